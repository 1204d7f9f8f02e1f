"""The fifth development set (fixtures/diagnose/real5/, its README): how a job scales, in the reporter's words.
Every case holds its verdict by the scorer's own rules; a shortfall across nodes is TD988 with the network named
where its rate is stated and slow (or Ethernet said), else the interconnect and NCCL's NET/ lines asked for; more
GPUs of one node no faster is TD989, normal (information) where the GPUs have no peer-to-peer."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support_evidence import assert_holds, case_findings, cases_of, one_finding

from topodoctor.diagnosis.evidence_scaling import ASK_NET

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "fixtures" / "diagnose" / "real5"
HOLDOUT6 = ROOT / "fixtures" / "diagnose" / "holdout6"
CASES = cases_of(SET)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_holds_its_verdict(name: str) -> None:
    assert_holds(CASES[name], SET / name)


def test_gigabit_ethernet_between_machines_is_named_with_its_rate() -> None:
    """CNTK#440: twice as slow on two machines, over gigabit Ethernet: 1 Gb/s, under NCCL's 100 Gb/s."""
    f = one_finding(SET / "cntk-gigabit-ethernet", "TD988")
    assert f.severity == "warning"
    assert f.message.startswith("the inter-node network (1 Gb/s Ethernet")
    assert f.evidence["gbit_s"] == 1.0


def test_a_step_slower_on_two_nodes_with_no_interconnect_asks_for_it() -> None:
    """horovod#2976: 3 s a step on one node, 7 s on two; nothing of the network: cause not found, the interconnect
    and NCCL's NET/ lines asked for."""
    f = one_finding(SET / "two-nodes-epoch-step-unsettled", "TD988")
    assert "7s on 2 nodes against 3s on 1" in f.message
    assert "cause not found" in f.message and "NET/Socket" in f.message and "NCCL_IB_DISABLE=1" in f.message
    assert f.evidence["post"] == [ASK_NET]


def test_ethernet_named_without_a_rate_ranks_the_network_first() -> None:
    """mmdetection#485: "multiple machines connected with the ethernet ... slower than the single node"."""
    f = one_finding(SET / "ethernet-two-nodes-twice-slower", "TD988")
    assert "over Ethernet" in f.message and "the inter-node network first" in f.message
    assert "cause not found" in f.message


def test_two_pcie_h100_at_0_61_of_linear_is_not_a_finding() -> None:
    """sd-scripts#1434: 1.27 s/it on one H100, 2.07 s/it on two on PCIe: two do more work a second than one."""
    codes = {f.code for f in case_findings(SET / "pcie-h100-two-gpus")}
    assert "TD989" not in codes and "TD988" not in codes


def test_two_geforce_cards_slower_than_one_is_normal() -> None:
    """ChatGLM-6B#595 (Chinese): 3090单卡 51.82 s/it, 3090双卡 124.55 s/it: GeForce has no P2P over PCIe."""
    f = one_finding(SET / "rtx3090-two-cards-slower", "TD989")
    assert f.severity == "info" and "normal for this hardware: RTX 3090" in f.message
    assert "124.55s/it on 2 GPUs against 51.82s/it on 1" in f.message


def test_the_sixth_blind_set_cases_of_this_class() -> None:
    """holdout6, development input now: a 10 Gb/s interconnect named (open_clip#325), a count sweep that breaks
    at the seventh card (flash-attention#1021), PCIe GPUs slower together than one (imagenet-multiGPU.torch#59),
    two GeForce cards in words (sglang#4723) and NVLink inactive on 2080 Ti (accelerate#71)."""
    net = one_finding(HOLDOUT6 / "g-06", "TD988")
    assert net.message.startswith("the inter-node network (10 Gb/s") and net.severity == "warning"
    gpu = one_finding(HOLDOUT6 / "g-08", "TD990")
    assert "the seventh GPU (GPU 6" in gpu.message and gpu.subject == "gpu:6"
    acs = one_finding(HOLDOUT6 / "g-04", "TD989")
    assert acs.severity == "warning" and "ACS" in acs.evidence["candidates"][0]  # type: ignore[index]
    for case in ("g-01", "g-13"):
        f = one_finding(HOLDOUT6 / case, "TD989")
        assert f.severity == "info" and "normal for this hardware" in f.message, case
