"""The tenth blind set (fixtures/diagnose/holdout10), scored once and now a development set: GPUs of two models
on one host, as the rig's list of parts or nvidia-smi shows them, are the slow run's bound under tensor
parallelism (TD994); GPUs of one model in several names are not mixed."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding

SET = FIXTURES / "diagnose" / "holdout10"
TITLE = (SET / "d10-01" / "evidence-1.txt").read_text()  # the run's figure against the project's table
RIG = (SET / "d10-01" / "evidence-2.txt").read_text()  # a rig report: RTX 5090 beside RTX 3090 Ti, TP=2


def _findings(*texts: str) -> list[Finding]:
    return list(judge(join([read_input(f"post-{k}.txt", t) for k, t in enumerate(texts)])))


def test_a_rig_listing_two_models_names_the_mixed_pair() -> None:
    mixed = [f for f in _findings(TITLE, RIG) if f.code == "TD994"]
    assert len(mixed) == 1 and mixed[0].severity == "warning"
    assert "RTX 5090 (GPU 0)" in mixed[0].message and "RTX 3090 Ti (GPU 1)" in mixed[0].message
    same = RIG.replace("NVIDIA GeForce RTX 3090 Ti (Ampere sm_86, 24 GB)", "NVIDIA GeForce RTX 5090 (Blackwell)")
    assert not [f for f in _findings(TITLE, same) if f.code == "TD994"]


def test_nvidia_smi_listing_two_models_is_mixed_and_one_model_in_two_sizes_is_not() -> None:
    listing = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2)\n"
        "GPU 2: NVIDIA GeForce RTX 4090 (UUID: GPU-3)\n"
    )
    said = "On the three GPUs all_reduce reaches only 20 GB/s busbw, much slower than expected."
    found = [f for f in _findings(listing, said) if f.code == "TD994"]
    assert len(found) == 1 and "RTX 4090 (GPU 2)" in found[0].message and "GPU 0, GPU 1" in found[0].message
    assert found[0].severity == "warning"
    two_sizes = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2)\n"
    assert not [f for f in _findings(two_sizes) if f.code == "TD994"]
    # a listing with no run said of it is information, not a slow run's cause
    assert [f.severity for f in _findings(listing) if f.code == "TD994"] == ["info"]
