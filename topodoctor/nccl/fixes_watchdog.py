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
    "a hang of the NCCL release or build in use (a bug fixed in a later release, a wheel's libnccl that behaves "
    "unlike the system's build of the same version) [tells: the same run on another libnccl: the newest release, "
    "or the system's libnccl in place of the wheel's (LD_PRELOAD), and the NCCL version banner]",
)


# the communicator's first collective sets up its peers' connections (P2P, SHM, the network): one that never ends,
# every rank in it, is most often the GPUs' peer-to-peer path hanging (the corpus's threads of a first collective
# past its timeout: fixed by NCCL_P2P_DISABLE=1, then by ACS or the IOMMU turned off)
_FIRST_WORK = (
    "the first collective never completes: peer-to-peer between this node's GPUs hangs (PCIe P2P blocked by ACS or "
    "the IOMMU, a VM's passthrough, a board or driver without working P2P) [tells: the same job with "
    "NCCL_P2P_DISABLE=1 (then NCCL_SHM_DISABLE=1 too if it still hangs), `lspci -vvv | grep ACSCtl`, "
    "p2pBandwidthLatencyTest]"
)


# the collectives whose input every rank gives with one size (torch's NumelIn): all_reduce, broadcast, reduce, the
# all_gathers and reduce_scatters; an all_to_all's or a send's sizes may differ between ranks
_SAME_SIZE = frozenset(("ALLREDUCE", "BROADCAST", "REDUCE", "ALLGATHER", "ALLGATHER_BASE", "REDUCE_SCATTER",
                        "REDUCE_SCATTER_BASE", "ALLGATHER_INTO_TENSOR_COALESCED"))  # fmt: skip


def _ops_differ(evs: Sequence[Event]) -> str:
    """Ranks whose timed-out work has one sequence number but another operation (and no process
    group that tells them apart): "BROADCAST on rank 7, ALLREDUCE on rank 3"; "" when none."""
    by_seq: dict[str, dict[str, str]] = {}  # seq -> op (with its size, where every rank's must match) -> a rank
    pgs: dict[str, set[str]] = {}
    for e in evs:
        seq, op = e.fields.get("seq", ""), e.fields.get("op", "")
        if not seq or not op:  # torch before 1.10 numbers no work; the watchdog's "Timeout at NCCL work" names no op
            continue
        if op.lstrip("_") in _SAME_SIZE and e.fields.get("numel"):  # one op of other sizes is another call too
            op = f"{op} of {e.fields['numel']} elements"
        who = e.fields.get("wrank") or ("" if e.rank is None else str(e.rank))
        by_seq.setdefault(seq, {}).setdefault(op, who)
        if e.fields.get("pg"):
            pgs.setdefault(seq, set()).add(e.fields["pg"])
    for seq, ops in by_seq.items():
        if len(ops) > 1 and len(pgs.get(seq, ())) <= 1:
            return f"sequence {seq}: " + ", ".join(f"{op} on rank {r}" if r else op for op, r in ops.items())
    return ""


# a rank whose heartbeat monitor heard of another rank's timeout, with this rank's state of its default process
# group (torch's getNCCLWatchdogTimeoutErrorMsg): nothing in flight, or a collective of its own still open
_IDLE = (
    "this rank never reached the collective the other rank timed out in: it was still busy elsewhere (a long step, "
    "data loading, a checkpoint, an evaluation on some ranks), hung outside NCCL (a deadlock, the GIL held), or its "
    "code skipped the call (a branch on the rank, uneven data, an exception caught on this rank) [tells: this "
    "rank's stack at the hang (`py-spy dump --native --pid`), its last log lines, and the flight recorder of both "
    "ranks: the timed-out rank's entry for the sequence number against this rank's last]",
    "the collective that timed out is on another process group (a tensor-, pipeline- or data-parallel subgroup) "
    "whose works the default group's counters do not count [tells: the process group named in the timed-out "
    "rank's watchdog line, `[PG ID n ...]`, and the flight recorder's entries per group]",
)
_BUSY = (
    "the ranks are in different collectives at this point (a rank that skipped or added a call, or issued them in "
    "another order) [tells: the sequence number the other rank timed out in against this rank's open work; "
    "TORCH_DISTRIBUTED_DEBUG=DETAIL]",
    "a third rank never joined and both wait for it [tells: every rank's dump-signal line: the rank whose last "
    "enqueued work equals its last completed]",
    "a collective every rank entered stalled in the network or on a GPU [tells: NCCL_DEBUG=WARN's lines, `dmesg` "
    "for an Xid]",
    "two threads issue collectives on one process group at once: NCCL needs each communicator's calls in one "
    "order on every rank, and two threads interleave them differently on each [tells: the flight recorder's "
    "entries for one sequence number on each rank (different operations); the program's threads that call "
    "collectives or send/recv]",
)


def _dump_state(e: Event) -> tuple[str, int, int]:
    """Another rank's timeout heard by this one: (its rank, this rank's last enqueued, last completed)."""
    return e.fields["dump"], int(e.fields["enqueued"]), int(e.fields["completed"])


def _heard(evs: Sequence[Event]) -> Said:
    """Only the heartbeat monitor's word of a rank's timeout: whether the rank that heard it had any collective
    in flight tells a rank that never reached the collective from one that waits in it."""
    idle = next((e for e in evs if e.fields["enqueued"] == e.fields["completed"]), None)
    e = idle or evs[0]
    src, enq, done = _dump_state(e)
    who = f"rank {e.fields['wrank']}" if e.fields.get("wrank") else "this rank"
    origin = "this rank's own watchdog" if src == "local" else f"rank {src}'s watchdog"
    extra: dict[str, object] = {"dump_from": src, "enqueued": enq, "completed": done, "idle": idle is not None}
    if idle is not None and src != "local":
        msg = (
            f"{origin} timed out a collective while {who} had none in flight on its default process group (last "
            f"enqueued work {enq} = last completed {done}): {who} had not called it"
        )
        candidates = list(_IDLE)
    else:
        msg = (
            f"{origin} timed out a collective; {who} waits in one too: its work {done + 1} has not completed (last "
            f"enqueued {enq}, last completed {done})"
        )
        candidates = list(_BUSY)
    fix = (
        f"The log does not show which cause; candidates, most likely first: {numbered(candidates)}. Collect: every "
        "rank's `Received a dump signal` line (its last enqueued and completed work), the timed-out rank's "
        "`Watchdog caught collective operation timeout` line, and the flight recorder dumps "
        "(TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1)."
    )
    return Said("TD047", msg, fix, {**extra, "candidates": candidates})


def _reached(f: Mapping[str, str]) -> str:
    """What this rank's own counters say of the work it timed out: it enqueued it, so it reached it."""
    if not (f.get("enqueued") and f.get("completed") and f.get("seq")):
        return ""
    seq, enq, done = int(f["seq"]), int(f["enqueued"]), int(f["completed"])
    who = f"rank {f['wrank']}" if f.get("wrank") else "this rank"
    if enq >= seq > done:
        return f"; {who} reached it (last enqueued work {enq}, last completed {done}) and waits in it"
    return ""


def _watchdog(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    heard = [e for e in evs if e.fields.get("dump")]
    own = [e for e in evs if not e.fields.get("dump")]
    if not own:
        return _heard(heard)
    evs = own
    f = next((e.fields for e in evs if e.fields.get("op")), evs[0].fields)  # the work as torch printed it
    idle = [e for e in heard if e.fields["dump"] != "local" and e.fields["enqueued"] == e.fields["completed"]]
    f = {**f, **{k: v for e in evs for k, v in e.fields.items() if k in ("enqueued", "completed") and not f.get(k)}}
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
        ran = f"{work} ran {f['ran']} ms, past the {timeout_ms} ms timeout{_reached(f)}"
    else:  # the blocking wait (TORCH_NCCL_BLOCKING_WAIT=1) names the timeout, not the time it ran
        ran = f"{work} timed out in torch's blocking wait, its timeout {timeout_ms} ms{_reached(f)}"
    if idle and timeout_ms > TIMEOUT_SHORT_MS:  # a rank that heard of it had nothing in flight: it never came
        ranks = sorted({e.fields.get("wrank", "?") for e in idle})
        # the work's own group is the default one (PG 0): the counters that rank printed are that group's
        others = [] if f.get("pg") == "0" else list(_IDLE[1:])
        candidates = [_IDLE[0].replace("this rank", "that rank", 1), *others, *_LONG_TIMEOUT[1:]]
        listed = numbered(candidates)
        return Said(
            "TD047",
            f"{ran}; rank {', '.join(ranks)} had no collective in flight on its default process group when told "
            "of the timeout: it never reached this collective",
            f"Candidates, most likely first: {listed}. Collect: that rank's stack at the hang and its last log "
            "lines, the flight recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1).",
            {**extra, "idle_ranks": ranks, "candidates": candidates},
        )
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
    if f.get("seq", "").isdigit() and int(f["seq"]) <= 1:  # the first work: NCCL connects its peers on it
        candidates.insert(0, _FIRST_WORK)
    if geforce:
        candidates.insert(
            0,
            f"the GPUs are {geforce[0]}: GeForce boards have no supported P2P, and a first collective that never "
            "ends is its usual sign: try NCCL_P2P_DISABLE=1",
        )
    listed = numbered(candidates)
    return Said(
        "TD047",
        f"{ran}: a rank never joined it or the collective stalled; the watchdog does not say which, the flight "
        "recorder's dumps would (TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1)",
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
        "its timeout; the log does not say which call, the stacks or the flight recorder's dumps would "
        "(TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1)",
        "Find the call the watchdog is blocked in: dump the process's stacks (`py-spy dump --native --pid`, or "
        "the flight recorder: TORCH_NCCL_TRACE_BUFFER_SIZE with TORCH_NCCL_DUMP_ON_TIMEOUT=1); a hung GPU shows "
        "an Xid in `dmesg`; another thread holding the GIL inside a CUDA call, or a rank stuck in NCCL's abort, "
        "blocks it too. Raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only when the watchdog is slow, not stuck. "
        f"Candidates, most likely first: {numbered(_STUCK)}.",
        {"stuck_s": secs or "?", "candidates": list(_STUCK)},
    )


# what stops torch's watchdog thread itself (its heartbeat monitor's timeout), most likely first
_STUCK = (
    "a CUDA or NCCL call that hung inside the watchdog: a GPU that stopped (an Xid in `dmesg`), NCCL's abort of a "
    "communicator whose peer is gone, a collective stuck in the network",
    "another thread holding the GIL or a CUDA lock the watchdog waits for (a data loader or the program's own "
    "thread inside a CUDA call): `py-spy dump --native` shows it",
    "a hang of the NCCL release in use (a bug fixed in a later release): the same run on the newest NCCL",
    "a watchdog only slow, not stuck (many process groups, a host under heavy load): a longer "
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC lets it finish",
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
