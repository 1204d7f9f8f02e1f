"""Cases of the seventh blind set (fixtures/diagnose/holdout7/), development input since it was scored: a link
rate stated in Mb/s ("Network: 95Mbit/s LAN"), a run said to be slower than on a single node, and a PCIe link
whose speed alone is lower, which is what an idle GPU's link shows (lspci and nvidia-smi read at idle)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support_evidence import SCORER, assert_holds, case_findings, cases_of, judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.evidence.scaling import links
from topodoctor.model.findings import finding_json

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "fixtures" / "diagnose" / "holdout7"
CASES = cases_of(SET)


@pytest.mark.parametrize("name", ["g-07", "g-11"])
def test_each_fixed_case_holds_its_verdict(name: str) -> None:
    assert_holds(CASES[name], SET / name)


@pytest.mark.parametrize(
    ("text", "kind", "gbit_s"),
    [
        ("Network: 95Mbit/s LAN calculated by iperf", "ethernet", 0.095),
        ("the interconnect = 100 Mbps between them", "network", 0.1),
        ("network: 1Gbps", "network", 1.0),
        ("I have a 10G network card", "network", 10.0),
    ],
)
def test_a_link_rate_in_words_is_read_in_gbit_s(text: str, kind: str, gbit_s: float) -> None:
    (got,) = links(text, 1)
    assert (got.kind, got.gbit_s) == (kind, pytest.approx(gbit_s))


def _pcie(description: str, sta: str) -> list[tuple[str, str, str]]:
    text = f"{description}\n\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L1\n\tLnkSta:\t{sta}\n"
    found = judge(join([read_input("lspci.txt", text)]))
    return [(f.code, f.severity, f.message) for f in found if f.code == "TD030"]


def test_a_gpus_link_at_a_lower_speed_alone_cannot_tell_without_load() -> None:
    (got,) = _pcie(
        "65:00.0 VGA compatible controller: NVIDIA Corporation Device 2684",
        "Speed 2.5GT/s (downgraded), Width x16 (ok)",
    )
    assert got[1] == "info" and "under load" in got[2]


def test_a_nics_link_at_a_lower_speed_and_any_narrow_link_stay_faults() -> None:
    (nic,) = _pcie(
        "3b:00.0 Ethernet controller: Mellanox Technologies MT28908", "Speed 2.5GT/s (downgraded), Width x16 (ok)"
    )
    assert nic[1] == "error"
    (narrow,) = _pcie("65:00.0 3D controller: NVIDIA Corporation Device 2330", "Speed 16GT/s, Width x8 (downgraded)")
    assert narrow[1] == "error" and "under load" not in narrow[2]


@pytest.mark.parametrize("name", ["g-02", "g-13"])
def test_cases_no_longer_confidently_wrong(name: str) -> None:
    """g-02 (an algorithm's name as the label of its figures, beside the issue template's version) is named;
    g-13 (NET/Socket's listing beside NET/IB's devices in the same processes) no longer blames sockets."""
    got, note = SCORER.judge(CASES[name], [finding_json(f) for f in case_findings(SET / name)])
    assert got != "confidently-wrong", (name, got, note)


def test_a_monitors_network_traffic_is_not_judged_as_busbw() -> None:
    text = (
        "I have 2 servers with 4 GPUs each. network trans/receive is about 20M/s, I have a 10G network card, "
        "so it should not be the bottleneck.\n"
    )
    found = judge(join([read_input("post.txt", text)]))
    assert not any(f.severity in ("warning", "error") and "busbw" in f.message for f in found)


def test_the_socket_listing_beside_ib_devices_is_not_the_choice() -> None:
    host = "server3:15223:15223 [7] NCCL INFO"
    text = "\n".join(
        [
            f"{host} NET/Socket : Using [0]enp41s0f1:<0>",
            f"{host} NET/IB : Using [0]mlx5_0:1/IB ; OOB enp41s0f1:<0>",
            "server1:117953:117953 [7] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB ; OOB enp41s0f1:<0>",
            "the all_reduce between the 4 servers is slow",
        ]
    )
    found = judge(join([read_input("log.txt", text + "\n")]))
    assert not any(f.code == "TD025" for f in found)
