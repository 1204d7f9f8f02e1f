"""Builders of `nccl-log` findings for torch's NCCL watchdog: a work past its timeout (how long it ran, the
timeout, the operation; a timeout too short for any collective is the cause, else the candidates ranked), ranks
that timed out in different collectives at one point, and the heartbeat monitor that found the watchdog
itself stuck. Data in, text out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.nccl.evidence import Builder, LogContext, Said, odd_interfaces
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.parse import Event
from topodoctor.nccl.torch_stack import ASYNC_ERROR, TIMEOUT

# torch's watchdog timeout: at or below this no collective can be expected to finish (the timeout is the
# cause); below the short one either the timeout or a rank that did not join (the default is 10 minutes)
TIMEOUT_IS_CAUSE_MS = 100
TIMEOUT_SHORT_MS = 5_000


# what leaves a work past a usual timeout, most likely first, each with what tells it (torch's own guidance
# and the classes of the corpus's watchdog threads)
_LONG_TIMEOUT = (
    "a rank never joined this collective: it died, hung or was still busy elsewhere (loading data, saving a "
    "checkpoint, evaluating on one rank, an exception caught on one rank) [tells: each rank's last completed "
    "sequence number, that rank's own log's last lines]",
    "the ranks' calls differ at this point (a branch on the rank, uneven data) [tells: TORCH_DISTRIBUTED_DEBUG="
    "DETAIL, the flight recorder's report]",
    "the collective stalled in the network or on a GPU [tells: NCCL_DEBUG=WARN's lines, `dmesg` for an Xid]",
    "the work needs longer than the timeout (a first collective after a long load) [tells: the timeout passed "
    "to init_process_group]",
)


def _ops_differ(evs: Sequence[Event]) -> str:
    """Ranks whose timed-out work has one sequence number but another operation (and no process
    group that tells them apart): "BROADCAST on rank 7, ALLREDUCE on rank 3"; "" when none."""
    by_seq: dict[str, dict[str, str]] = {}  # seq -> op -> a rank
    pgs: dict[str, set[str]] = {}
    for e in evs:
        seq, op = e.fields.get("seq", ""), e.fields.get("op", "")
        if not seq or not op:  # torch before 1.10 numbers no work; the watchdog's "Timeout at NCCL work" names no op
            continue
        who = e.fields.get("wrank") or ("" if e.rank is None else str(e.rank))
        by_seq.setdefault(seq, {}).setdefault(op, who)
        if e.fields.get("pg"):
            pgs.setdefault(seq, set()).add(e.fields["pg"])
    for seq, ops in by_seq.items():
        if len(ops) > 1 and len(pgs.get(seq, ())) <= 1:
            return f"sequence {seq}: " + ", ".join(f"{op} on rank {r}" if r else op for op, r in ops.items())
    return ""


def _watchdog(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    f = next((e.fields for e in evs if e.fields.get("op")), f)  # the work as torch printed it, where it did
    extra: dict[str, object] = {
        "seq": int(f.get("seq", 0)),
        "op": f.get("op", ""),
        "timeout_ms": int(f.get("timeout", 0)),
    }
    if f.get("ran"):
        extra["ran_ms"] = int(f["ran"])
    fix = EXPLANATIONS["TD047"].fix
    if geforce := [g for g in ctx.gpu_names if "GeForce" in g]:
        fix = (
            f"The GPUs are {geforce[0]}: GeForce boards have no supported P2P, and a first collective that never "
            f"ends is its usual sign: try NCCL_P2P_DISABLE=1. {fix}"
        )
    if odd := odd_interfaces(ctx):
        fix = f"{odd} {fix}"
    if differ := _ops_differ(evs):
        extra["ops_differ"] = differ
        return Said(
            "TD047",
            f"the ranks timed out in different collectives at one point ({differ}): they did not call the same "
            "operations",
            "The program's collectives differ between ranks: a branch on the rank, a rank that left a loop "
            "early (uneven data), or an exception caught on one rank; TORCH_DISTRIBUTED_DEBUG=DETAIL and the "
            "flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) show each rank's calls. " + fix,
            extra,
        )
    timeout_ms = int(f.get("timeout") or 0)
    work = f"{f.get('op')} (sequence {f['seq']})" if f.get("seq") else str(f.get("op"))
    if not f.get("op"):  # only the watchdog's "Timeout at NCCL work: N, last enqueued ..., last completed ..."
        extra |= {k: f[k] for k in ("pg", "enqueued", "completed") if f.get(k)}
        where = f" of process group {f['pg']}" if f.get("pg") else ""
        rank = f" on rank {f['wrank']}" if f.get("wrank") else ""
        ran = (
            f"torch's watchdog timed out work {f.get('seq', '?')}{where}{rank} (last enqueued "
            f"{f.get('enqueued', '?')}, last completed {f.get('completed', '?')}); the operation and its timeout are "
            "in the watchdog's line before it, not in the paste"
        )
    elif f.get("ran"):
        ran = f"{work} ran {f['ran']} ms, past the {timeout_ms} ms timeout"
    else:  # the blocking wait (TORCH_NCCL_BLOCKING_WAIT=1) names the timeout, not the time it ran
        ran = f"{work} timed out in torch's blocking wait, its timeout {timeout_ms} ms"
    if 0 < timeout_ms <= TIMEOUT_IS_CAUSE_MS:
        return Said(
            "TD047",
            f"{ran}: the timeout is too short for any collective, it is the cause",
            "Raise the timeout passed to init_process_group (timeout=timedelta(minutes=10); the default is 10 "
            "minutes, 30 with some launchers) or the framework's own setting, and remove a test value left in the "
            "configuration.",
            extra,
        )
    if 0 < timeout_ms < TIMEOUT_SHORT_MS:
        return Said(
            "TD047",
            f"{ran}: either the timeout is too short for this operation or a rank did not join it",
            f"The timeout of {timeout_ms} ms is far below the default of 10 minutes: raise it first (the "
            "timeout passed to init_process_group); if it still times out, a rank did not join. " + fix,
            extra,
        )
    # past a usual timeout the watchdog's words say only that the work outlived it: the candidates, ranked
    candidates = list(_LONG_TIMEOUT)
    if geforce:
        candidates.insert(
            0,
            f"the GPUs are {geforce[0]}: GeForce boards have no supported P2P, and a first collective that never "
            "ends is its usual sign: try NCCL_P2P_DISABLE=1",
        )
    listed = numbered(candidates)
    return Said(
        "TD047",
        f"{ran}: a rank never joined it or the collective stalled; the watchdog does not say which",
        f"{odd + ' ' if odd else ''}The log does not show which cause; candidates, most likely first: {listed}. "
        "Collect: each rank's last completed sequence number and its log's last lines, the flight recorder "
        "(TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT=1), NCCL_DEBUG=WARN.",
        {**extra, "candidates": candidates},
    )


def _watchdog_stuck(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """torch's heartbeat monitor killed the process: its NCCL watchdog thread, not a collective, stopped."""
    secs = next((e.fields["secs"] for e in evs if e.fields.get("secs")), "")
    took = f"for {secs} s" if secs else "within its heartbeat timeout"
    return Said(
        "TD047",
        f"torch's NCCL watchdog thread made no progress {took} (its heartbeat monitor, "
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC): a CUDA or NCCL call hung inside the watchdog, not a collective past "
        "its timeout",
        "Find the call the watchdog is blocked in: dump the process's stacks (`py-spy dump --native --pid`, or "
        "the flight recorder: TORCH_NCCL_TRACE_BUFFER_SIZE with TORCH_NCCL_DUMP_ON_TIMEOUT=1); a hung GPU shows "
        "an Xid in `dmesg`; another thread holding the GIL inside a CUDA call, or a rank stuck in NCCL's abort, "
        "blocks it too. Raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only when the watchdog is slow, not stuck.",
        {"stuck_s": secs or "?"},
    )


# what makes the watchdog raise on an NCCL error it found on a work (checkAndSetException), most likely first
_ASYNC_ERROR = (
    "a peer rank died or failed first (its own log's last lines: an exception, out of memory, a killed process)",
    "the network between the nodes failed (NCCL_DEBUG=WARN's lines name the connection)",
    "a GPU fault on this or a peer's node (`dmesg` for an Xid)",
)
_ASK = (
    "The message is not in the paste: send the lines above the stack, where torch prints what the watchdog caught "
    "(`Watchdog caught collective operation timeout: WorkNCCL(...)` with the work, its timeout and the time it "
    "ran, or `NCCL error: ...` with NCCL's reason)."
)


def _watchdog_stack(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """torch's ProcessGroupNCCL stack without its message: its frames say what raised (``nccl.torch_stack``)."""
    if f.get("stack") == TIMEOUT:  # WorkNCCL::checkTimeout raised: a work outlived its timeout
        listed = numbered(_LONG_TIMEOUT)
        return Said(
            "TD047",
            "torch's watchdog timed out a collective (WorkNCCL::checkTimeout in the stack); the operation, its "
            "timeout and how long it ran are in the message above the stack, not in the paste",
            f"{_ASK} Candidates, most likely first: {listed}. Collect: each rank's last completed sequence "
            "number and its log's last lines, the flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE, "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1), NCCL_DEBUG=WARN.",
            {"stack": TIMEOUT, "message_pasted": False, "candidates": list(_LONG_TIMEOUT)},
        )
    found = f.get("stack") == ASYNC_ERROR
    candidates = list(_ASYNC_ERROR) if found else [f"a collective past its timeout: {_LONG_TIMEOUT[0]}", *_ASYNC_ERROR]
    listed = numbered(candidates)
    what = (
        "torch's watchdog found an NCCL error on a work (WorkNCCL::checkAndSetException in the stack), not a timeout"
        if found
        else "torch's NCCL watchdog thread raised (its stack names no check: a timeout or an NCCL error)"
    )
    return Said(
        "TD052",
        f"{what}; its message is not in the paste; cause not found",
        f"{_ASK} Candidates, most likely first: {listed}.",
        {"stack": f.get("stack", ""), "message_pasted": False, "candidates": candidates},
    )


WATCHDOG: dict[str, Builder] = {
    "watchdog-timeout": _watchdog,
    "watchdog-stuck": _watchdog_stuck,
    "watchdog-stack": _watchdog_stack,
}
