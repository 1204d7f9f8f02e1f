"""The twenty-fifth blind set (fixtures/diagnose/holdout25), scored once and now a development set: Horovod built
without NCCL, from its own `--check-build` account or in the reporter's words."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

SET = FIXTURES / "diagnose" / "holdout25"


def test_a_horovod_build_without_nccl() -> None:
    found = judged_with(SET / "d25-01")  # --check-build: [ ] NCCL ... [X] Gloo; 2 GPUs at half the rate of 1
    lead = next(f for f in found if f.code == "TD978")
    assert lead.severity == "warning" and "Gloo" in lead.message and "HOROVOD_GPU_OPERATIONS" in lead.fix
    built = judged_with(SET / "d25-01", ("[ ] NCCL", "[X] NCCL"))
    assert "TD978" not in [f.code for f in built]


def test_horovod_on_gloo_in_the_reporter_s_words() -> None:
    found = judged_with(SET / "d25-08")  # "no way for Horovod with Gloo to use NCCL"; NVLink not used
    lead = next(f for f in found if f.code == "TD978")
    assert lead.severity == "warning" and "horovodrun --check-build" in lead.message
    other = judged_with(SET / "d25-08", ("Horovod with Gloo", "the library"), ("building Gloo", "building it"))
    assert "TD978" not in [f.code for f in other]
