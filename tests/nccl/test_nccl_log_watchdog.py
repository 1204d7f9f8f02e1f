"""torch's watchdog timeout in every torch's words (c10d ProcessGroupNCCL.cpp): the work as 1.8-1.9 print it
(``WorkNCCL(OpType=.., TensorShape=[..], Timeout(ms)=..)``), 1.10-2.0 (``SeqNum=`` first) and 2.1+ (``NumelIn``,
``NumelOut``); said by the watchdog, by 1.x's blocking wait ("Caught collective operation timeout"), after
later releases' ``[PG ID 0 PG GUID 0(default_pg) Rank N]`` prefix, and by the blocking wait that names no
duration. Each is read with its own timeout and the time the work ran; a timeout too short for any
collective is the cause. The lines are as posted in public threads (their source beside them), or, for the
torch releases no thread here shows, torch's own format for that release with its numbers filled in."""

from __future__ import annotations

from pathlib import Path

from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

# NVIDIA/nccl#1438 (torch 1.10-2.0: SeqNum, no NumelIn)
AFTER_ABORT = (
    "RuntimeError: NCCL communicator was aborted on rank 0.  Original reason for failure was: [Rank 0] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=35582, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
    "1800366 milliseconds before timing out."
)
# huggingface/diffusers#12422: the watchdog, then the blocking wait's own line (no duration)
BLOCKING = (
    "[rank1]:[E1002 18:16:40.662691402 ProcessGroupNCCL.cpp:756] [Rank 1] Work WorkNCCL(SeqNum=2521, "
    "OpType=ALLREDUCE, NumelIn=160672064, NumelOut=160672064, Timeout(ms)=600000) timed out in blocking wait."
)
# thu-pacman/chitu#80 (torch 2.5+: the next line says "failure detected by watchdog at work sequence id")
PG_NEXT = (
    "[rank1]:[E327 09:31:09.976973235 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=3313, OpType=RECV, NumelIn=18, NumelOut=18, Timeout(ms)=600000) ran for 600086 "
    "milliseconds before timing out.\n"
    "2025-03-27 17:31:09.952  sm228-a100-40g-23 [rank1]:[E327 09:31:09.977409258 ProcessGroupNCCL.cpp:2168] [PG ID 0 "
    "PG GUID 0(default_pg) Rank 1]  failure detected by watchdog at work sequence id: 3313 PG status: last enqueued "
    "work: 3313, last completed work: 3312\n"
)
# torch 1.8-1.9's WorkNCCL (OpType and TensorShape, no SeqNum), said by the watchdog and by 1.x's blocking wait
TORCH_18 = (
    "[E ProcessGroupNCCL.cpp:566] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
    "TensorShape=[25557032], Timeout(ms)=1800000) ran for 1800215 milliseconds before timing out."
)
TORCH_1X_BLOCKING = (
    "RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(OpType=BROADCAST, Timeout(ms)=1) ran for "
    "2 milliseconds before timing out."
)
# later torch's prefix (logPrefix) names the process group before the rank
PG_PREFIX = (
    "[rank0]:[E ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1) ran for 15 "
    "milliseconds before timing out."
)


def _lead(text: str) -> tuple[str, str, str, dict[str, object]]:
    log = parse_file("job.log", text)
    assert log.failed
    f = explain([log])[0]
    return f.code, f.severity, f"{f.message} | {f.fix}", f.evidence


def test_torch_1_10_wording_inside_the_abort_is_read_with_timeout_and_duration() -> None:
    code, severity, said, ev = _lead(AFTER_ABORT)
    assert (code, severity) == ("TD047", "error")
    assert "ALLREDUCE (sequence 35582) ran 1800366 ms, past the 1800000 ms timeout" in said
    assert ev["timeout_ms"] == 1800000 and ev["ran_ms"] == 1800366


def test_the_blocking_wait_names_its_timeout_but_no_duration() -> None:
    code, severity, said, ev = _lead(BLOCKING)
    assert (code, severity) == ("TD047", "error")
    assert "timed out in torch's blocking wait, its timeout 600000 ms" in said and "ran None" not in said
    assert ev["timeout_ms"] == 600000 and "ran_ms" not in ev


def test_torch_2_5s_next_line_names_the_process_group() -> None:
    log = parse_file("job.log", PG_NEXT)
    (ev,) = [e for e in log.events if e.kind == "watchdog-timeout"]
    assert ev.fields["pg"] == "0" and ev.fields["seq"] == "3313" and ev.fields["ran"] == "600086"


def test_torch_1_8s_work_without_a_sequence_number_is_read() -> None:
    code, severity, said, ev = _lead(TORCH_18)
    assert (code, severity) == ("TD047", "error")
    assert "ALLREDUCE ran 1800215 ms, past the 1800000 ms timeout" in said and "sequence" not in said.split("|")[0]
    assert ev["seq"] == 0 and ev["op"] == "ALLREDUCE"


def test_a_timeout_of_one_millisecond_is_the_cause_in_every_wording() -> None:
    for text in (TORCH_1X_BLOCKING, PG_PREFIX):
        code, severity, said, ev = _lead(text)
        assert (code, severity) == ("TD047", "error") and ev["timeout_ms"] == 1
        assert "the timeout is too short for any collective, it is the cause" in said
        assert "init_process_group" in said


def test_the_rank_is_read_after_the_process_group_prefix() -> None:
    log = parse_file("job.log", PG_PREFIX)
    (ev,) = [e for e in log.events if e.kind == "watchdog-timeout"]
    assert ev.fields["wrank"] == "0" and ev.fields["timeout"] == "1" and ev.fields["ran"] == "15"


def test_a_work_named_in_another_error_is_no_timeout() -> None:
    # torch's async error names the work too (ProcessGroupNCCL.cpp "Collective %s raised the following async
    # exception"): the error is NCCL's own, not a watchdog timeout
    line = (
        "[rank7]:[E814 01:57:12.984417033 ProcessGroupNCCL.cpp:542] [Rank 7] Collective WorkNCCL(SeqNum=1915265, "
        "OpType=ALLREDUCE, NumelIn=196608, NumelOut=196608, Timeout(ms)=600000) raised the following async "
        "exception: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5"
    )
    assert not [e for e in parse_file("job.log", line).events if e.kind == "watchdog-timeout"]


def test_a_timeout_past_the_default_names_the_candidates_not_one_cause() -> None:
    # fixtures/nccl-logs/holdout4/h4-006.log (NVIDIA/Megatron-LM#1207): the thread settles nothing
    text = (Path(__file__).resolve().parents[2] / "fixtures/nccl-logs/holdout4/h4-006.log").read_text()
    code, severity, said, ev = _lead(text)
    assert (code, severity) == ("TD047", "error")
    assert "ALLREDUCE (sequence 5) ran 600013 ms, past the 600000 ms timeout" in said
    candidates = ev["candidates"]
    assert isinstance(candidates, list) and candidates[0].startswith("a rank never joined this collective")
    assert any("calls differ" in c for c in candidates) and "the watchdog does not say which" in said
