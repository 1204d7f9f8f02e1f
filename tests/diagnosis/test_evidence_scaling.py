"""The judgement of scaling in words (diagnosis/evidence_scaling.py): the share of linear scaling by the kind of
speed, and each branch of a shortfall across nodes (a setting that keeps NCCL off InfiniBand, a fast network
named, none named) and within one node."""

from __future__ import annotations

from tests_support_evidence import judge

from topodoctor.diagnosis.evidence_scaling import efficiency
from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.evidence_scaling import SpeedSaid
from topodoctor.model.findings import Finding


def _judged(text: str) -> list[Finding]:
    return [f for f in judge(join([read_input("post.txt", text)])) if f.code in ("TD988", "TD989", "TD990")]


def test_efficiency_by_kind_of_speed() -> None:
    step = SpeedSaid(1, 2.0, "s/it", "step", "2s")
    assert efficiency(step, 1, SpeedSaid(1, 4.0, "s/it", "step", "4s"), 2) == 0.5  # a step's work kept per GPU
    total = SpeedSaid(1, 10.0, "s", "total", "10 s")
    assert efficiency(total, 1, SpeedSaid(1, 5.0, "s", "total", "5 s"), 2) == 1.0  # the work shared: half the time
    rate = SpeedSaid(1, 100.0, "samples/s", "rate", "100")
    assert efficiency(rate, 1, SpeedSaid(1, 150.0, "samples/s", "rate", "150"), 2) == 0.75
    per_gpu = SpeedSaid(1, 30.0, "samples/s", "rate", "30/s/gpu", per_gpu=True)
    assert efficiency(per_gpu, 1, SpeedSaid(1, 10.0, "samples/s", "rate", "10/s/gpu", per_gpu=True), 2) == 1 / 3


def test_ib_disabled_is_the_cause_across_nodes() -> None:
    (f,) = _judged("Training on 2 nodes is much slower than on a single node.\nexport NCCL_IB_DISABLE=1\n")
    assert f.code == "TD988" and f.message.startswith("NCCL_IB_DISABLE=1 keeps NCCL off InfiniBand")


def test_a_fast_network_named_leaves_the_candidates() -> None:
    (f,) = _judged("The nodes are joined by HDR InfiniBand, yet we get 100 samples/s on 1 node and 60 samples/s "
                   "on 2 nodes.\n")  # fmt: skip
    assert f.code == "TD988" and "fast enough for the GPUs' traffic: cause not found" in f.message
    assert "HDR InfiniBand (200 Gb/s)" in f.message


def test_a_scaling_within_a_node_near_linear_is_no_finding() -> None:
    assert _judged("One epoch takes 100 seconds with 1 GPU and 55 seconds with 2 GPUs on this machine.\n") == []
