"""The seventeenth blind sets (fixtures/nccl-logs/holdout17, holdout17b), scored once and now development sets: a
CUDA error whose own words state its cause, quoted in a post's title over nccl-tests' output, and ranks whose
timed-out all_reduce of one sequence number has two sizes."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

LOGS = FIXTURES / "nccl-logs"


def test_a_cuda_error_that_states_its_cause_in_a_title() -> None:
    lead = explained_with(LOGS / "holdout17/h17-002.log")[0]  # "peer mapping resources exhausted", -g 10
    assert lead.code == "TD057" and "one process per GPU" in lead.fix
    generic = explained_with(LOGS / "holdout12/h12-015.log")[
        0
    ]  # "... failed of initialization error": not CUDA's alone
    assert generic.code == "TD049"


def test_one_sequence_number_two_sizes_is_two_different_calls() -> None:
    lead = explained_with(LOGS / "holdout17b/h17b-004.log")[0]  # ALLREDUCE of 4311252 on rank 0, of 1 on rank 1
    assert lead.code == "TD047" and "did not call the same" in lead.message and "of 1 elements" in lead.message
    same = explained_with(
        LOGS / "holdout17b/h17b-004.log", ("NumelIn=1, NumelOut=1", "NumelIn=4311252, NumelOut=4311252")
    )
    assert "did not call the same" not in same[0].message
