"""The twenty-sixth blind set (fixtures/nccl-logs/holdout26), scored once and now a development set: a refused
non-blocking connect seen at the first recv, NCCL's own words of a collective mismatch in its hang check, and a hang
said under an issue template's bug heading."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

LOGS = FIXTURES / "nccl-logs" / "holdout26"


def test_a_recv_refused_is_the_connect_that_was_refused() -> None:
    lead = explained_with(LOGS / "h26-008.log")[
        0
    ]  # "Net : Call to recv from NODE2_IP<56843> failed : Connection refused"
    assert lead.code == "TD072" and "NCCL_SOCKET_IFNAME" in lead.fix
    reset = explained_with(LOGS / "h26-008.log", ("failed : Connection refused", "failed : Connection reset by peer"))
    assert reset[0].code != "TD072"


def test_nccl_s_hang_check_naming_a_collective_mismatch() -> None:
    lead = explained_with(LOGS / "h26-010.log")[
        0
    ]  # init.cc:1256 "... may be caused by a collective mismatch around rank 1"
    assert lead.code == "TD073" and "mismatch" in lead.message and "rank 1" in lead.message


def test_a_hang_said_under_the_template_s_reproduction_heading() -> None:
    lead = explained_with(LOGS / "h26-001.log")[
        0
    ]  # "it stucks with multi-GPUs (2 or 4 A6000)" under "### Reproduction"
    assert lead.code == "TD959" and "NCCL_P2P_DISABLE=1" in lead.fix.split("(2)")[0]
    assert not explained_with(LOGS / "h26-001.log", ("### Reproduction", "### Notes"))


def test_tensorflow_without_nccl_kernels() -> None:
    lead = explained_with(LOGS / "h26-007.log")[0]  # Windows Server 2016: no OpKernel for 'NcclAllReduce'
    assert lead.code == "TD085" and "Windows" in lead.fix and "HierarchicalCopyAllReduce" in lead.fix
    other = explained_with(LOGS / "h26-007.log", ("Op 'NcclAllReduce'", "Op 'MatMul'"))
    assert all(f.code != "TD085" for f in other)
