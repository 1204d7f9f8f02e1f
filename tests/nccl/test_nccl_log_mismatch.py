"""torch's collective mismatch checks, named at error with the ranks and what differs: ProcessGroupWrapper's
"Detected mismatch between collectives on ranks" (TORCH_DISTRIBUTED_DEBUG=DETAIL) as 1.10-1.12 print it (one
rank, "inconsistent collective"), as 1.13 print it (both ranks, the second one's operation alone) and as 2.1+
print it (both fingerprints and "Collectives differ in the following aspects"), and the flight recorder
analyser's "Error type: ..._MISMATCH" (torchfrtrace). The lines are as posted in the public threads named
beside them; the flight recorder's is its analyser's format (tools/flight_recorder) with a type filled in."""

from __future__ import annotations

from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

_OPTS = (
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), "
    "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))"
)
# pytorch/pytorch#78022 (torch 1.10-1.12)
ONE_RANK = (
    "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective: "
    f"CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[34112], TensorDtypes=Float, {_OPTS}"
)
# pytorch/pytorch#79901 (torch 1.13: the second rank's operation alone)
SHORT = (
    "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
    "CollectiveFingerPrint(OpType=ALLREDUCE, …), but Rank 1 is running collective: REDUCE."
)
# pytorch/pytorch#100214 (torch 2.1+: both fingerprints and what differs)
WITH_DIFF = (
    "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
    "CollectiveFingerPrint(SequenceNumber=1151423632, OpType=ALLREDUCE, TensorShape=[20, 10], TensorDtypes=Float, "
    f"{_OPTS}), but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=1151423632, OpType=REDUCE, "
    f"TensorShape=[20, 10], TensorDtypes=Float, {_OPTS}). Collectives differ in the following aspects:         "
    "Op type: ALLREDUCEvs REDUCE"
)
# pytorch/pytorch#148976 (a barrier under DETAIL): a BARRIER fingerprint names no tensor, only its sequence
BARRIER = (
    "  RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
    "CollectiveFingerPrint(SequenceNumber=1OpType=BARRIER), but Rank 2 is running collective: "
    "CollectiveFingerPrint(SequenceNumber=0OpType=BARRIER)."
)
FLIGHT_RECORDER = (
    "Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: 'nccl:all_reduce' does not match found "
    "collective type: 'nccl:broadcast'"
)


def _lead(text: str) -> tuple[str, str, str, dict[str, object]]:
    log = parse_file("job.log", text)
    assert log.failed
    f = explain([log])[0]
    return f.code, f.severity, f.message, f.evidence


def test_torch_1_10s_one_rank_wording_names_that_rank_and_its_call() -> None:
    code, severity, msg, ev = _lead(ONE_RANK)
    assert (code, severity) == ("TD073", "error") and ev["ranks"] == [0]
    assert "rank 0 runs BROADCAST of [34112] Float, which the other ranks do not" in msg


def test_torch_1_13s_short_form_names_both_operations() -> None:
    code, severity, msg, ev = _lead(SHORT)
    assert (code, severity) == ("TD073", "error") and ev["ranks"] == [0, 1]
    assert "rank 0 runs ALLREDUCE while rank 1 runs REDUCE" in msg


def test_torch_2_1s_diff_is_said_with_both_calls() -> None:
    code, severity, msg, ev = _lead(WITH_DIFF)
    assert (code, severity) == ("TD073", "error") and ev["ranks"] == [0, 1]
    assert "rank 0 runs ALLREDUCE of [20, 10] Float while rank 1 runs REDUCE of [20, 10] Float" in msg
    assert "at sequence 1151423632" in msg and "(Op type: ALLREDUCEvs REDUCE)" in msg


def test_a_barrier_out_of_step_names_the_sequence_numbers_apart() -> None:
    code, severity, msg, _ = _lead(BARRIER)
    assert (code, severity) == ("TD073", "error")
    assert "rank 1 is at collective 1 (BARRIER) while rank 2 is at 0 (BARRIER)" in msg


def test_the_flight_recorders_mismatch_is_named() -> None:
    code, severity, msg, ev = _lead(FLIGHT_RECORDER)
    assert (code, severity) == ("TD073", "error") and ev["flight_recorder"] == "COLLECTIVE_TYPE_MISMATCH"
    assert "'nccl:all_reduce' does not match found collective type: 'nccl:broadcast'" in msg


def test_the_flight_recorders_state_mismatch_is_no_program_mismatch() -> None:
    # one rank's work completed while another's was scheduled: a hang's sign, not different calls
    line = "Error type: COLLECTIVE_STATE_MISMATCH, Expected state: 'completed' does not match found state: 'scheduled'"
    assert not [e for e in parse_file("job.log", line).events if e.kind == "torch-mismatch"]
