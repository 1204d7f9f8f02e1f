"""NET/IB's collective mismatch in each of its three wordings (transport/net_ib.cc: 2.3.7 - 2.9.9 `local size %d
remote %d`, 2.10 - 2.11 `peer %s collective mismatch error local size %d remote %d`, 2.12+ `req %d/%d tag %x peer
%s collective mismatch error, local size %d remote size %d`) is one class, the ranks' sizes read from each."""

from __future__ import annotations

import pytest

from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "host2:14508:15205 [0]"
TAIL = f"{H} NCCL INFO transport/net.cc:470 -> 3\n{H} NCCL INFO transport.cc:163 -> 3 [Proxy Thread]\n"


@pytest.mark.parametrize(
    "warn",
    [
        "transport/net_ib.cc:651 NCCL WARN NET/IB : collective mismatch error local size 348160 remote 32768 addr "
        "7fb47b011000 rkey baa8 seq 5a/5a",
        "transport/net_ib.cc:702 NCCL WARN NET/IB : peer 10.0.0.2<40123> collective mismatch error local size 348160 "
        "remote 32768 addr 7fb47b011000 rkey baa8 seq 5a/5a",
        "transport/net_ib.cc:1082 NCCL WARN NET/IB : req 0/1 tag 7 peer 10.0.0.2<40123> collective mismatch error, "
        "local size 348160 remote size 32768",
    ],
)
def test_each_wording_is_the_mismatch_with_both_sizes(warn: str) -> None:
    found = explain([parse_file("rank0.log", f"{H} {warn}\n{TAIL}")])
    lead = next(f for f in found if f.severity == "error")
    assert lead.code == "TD073"
    assert "348160" in lead.message and "32768" in lead.message
