"""How a collectives run went (TD004-TD007): wrong data, an op that hung or failed, a rank much
slower than the others, a GPU that was busy when the run started."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from topodoctor.core.stats import median
from topodoctor.core.text import plural
from topodoctor.diagnosis.load import Load, loads
from topodoctor.rules.collectives import (
    SLOW_RANK,
    SLOW_RANK_MIN_BYTES,
    _rank_name,
    _size,
    collectives_of,
    gpu_of_rank,
)
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule


@rule(
    "TD004",
    "coll-data-error",
    "critical",
    tags=("prolog", "collectives"),
)
def coll_data_error(ctx: Context) -> Iterator[Issue]:
    """A collective returned wrong data (#wrong above zero).

    Every result is compared with its expected value, element by element, as nccl-tests does; the
    count of elements that differ is reported apart from the speed.

    Why it matters: a collective that returns wrong data corrupts training silently: gradients and
    weights diverge with no error.

    How to fix: re-run to see whether it repeats; a GPU that returns wrong data needs its memory and
    links checked (TD5xx health, NVLink error counters) before any job runs on it.
    """
    res = collectives_of(ctx)
    if res is None:
        return
    gpus = gpu_of_rank(ctx, res)
    for row in res.rows:
        for place, t in row.timings():
            if not t.wrong:
                continue
            bad: list[int | None] = [r for r, w in enumerate(t.rank_wrong) if w] or [None]
            for r in bad:
                subject = _rank_name(gpus, r) if r is not None else row.op
                yield Issue(
                    subject,
                    f"{row.op} {place} at {_size(row.size_bytes)}: {plural(t.wrong, 'wrong element')}"
                    + (f" on rank {r}" if r is not None else ""),
                    {"op": row.op, "size_bytes": row.size_bytes, "place": place, "wrong": t.wrong, "rank": r},
                )


@rule(
    "TD005",
    "coll-op-failed",
    "error",
    also=("warning",),
    tags=("prolog", "collectives"),
)
def coll_op_failed(ctx: Context) -> Iterator[Issue]:
    """A collective hung, failed, or a rank died or never joined.

    Every op runs under a timeout; a hang kills the whole group and is reported with the op and size
    it hit and the ranks that never reached it. Out of memory at a size is a warning: the sizes that
    fit were measured. A pass that could not run at all (``check --collectives`` without torch, say)
    is reported as not checked.

    Why it matters: an op that hangs or fails in the check will hang or fail a job the same way,
    usually after the job has spent its start-up.

    How to fix: a hang names the ranks that never reached the op: check their GPUs (`topodoctor
    check`) and NCCL's log; out of memory means other processes hold the GPU memory.
    """
    error = ctx.collectives_error
    if error:
        ctx.missing("collectives", "collectives", str(error), "check --collectives")
    res = collectives_of(ctx)
    if res is None:
        return
    gpus = gpu_of_rank(ctx, res)
    for f in res.failures:
        where = f"{f.op} at {_size(f.size_bytes)}" if f.op and f.size_bytes else (f.op or "the run")
        subject = _rank_name(gpus, f.rank) if f.rank is not None else (f.op or "collectives")
        yield Issue(
            subject,
            f"{f.kind}: {where}: {f.message}",
            {"kind": f.kind, "op": f.op, "size_bytes": f.size_bytes, "rank": f.rank},
            severity="warning" if f.kind == "oom" else None,
        )


@rule(
    "TD006",
    "coll-rank-slow",
    "warning",
    tags=("prolog", "collectives"),
)
def coll_rank_slow(ctx: Context) -> Iterator[Issue]:
    """One rank takes much longer per op than the others.

    Each rank times its own ops; the result keeps every rank's time. A rank more than 1.3x the
    median of the other ranks, at sizes from 1 MiB, is named with its GPU (the largest such size per
    op). Runs on NCCL only: ranks on CPU (gloo) share cores with everything else on the host.

    Why it matters: a collective finishes only when its last rank does, so every rank of a job waits
    for the slow one at every step.

    How to fix: look at that GPU: other processes on it, clocks and throttling (nvidia-smi -q -d
    PERFORMANCE), its links.
    """
    res = collectives_of(ctx)
    if res is None or res.backend != "nccl":
        return
    gpus = gpu_of_rank(ctx, res)
    worst: dict[tuple[str, int], tuple[float, Any, float]] = {}
    for row in res.rows:
        if row.size_bytes < SLOW_RANK_MIN_BYTES:
            continue
        for _, t in row.timings():
            times = t.rank_time_us
            if len(times) < 2:
                continue
            for r, mine in enumerate(times):
                others = median(times[:r] + times[r + 1 :])
                ratio = mine / others if others > 0 else 0.0
                key = (row.op, r)
                if ratio > SLOW_RANK:  # rows come smallest first: the largest size that lags is kept
                    worst[key] = (ratio, row, mine)
    for (op, r), (ratio, row, mine) in sorted(worst.items()):
        yield Issue(
            _rank_name(gpus, r),
            f"rank {r} takes {mine:.0f} us per {op} at {_size(row.size_bytes)}, {ratio:.2f}x the other ranks",
            {"rank": r, "op": op, "size_bytes": row.size_bytes, "time_us": mine, "ratio": round(ratio, 2)},
        )


@rule(
    "TD007",
    "coll-gpu-busy",
    "info",
    tags=("prolog", "collectives"),
)
def coll_gpu_busy(ctx: Context) -> Iterator[Issue]:
    """A GPU was busy with someone else's work when the collectives started or while they ran: numbers may be low.

    Someone else's: a compute process that is not topodoctor's own (the check, the ranks and workers
    it starts, its Slurm job), named with its pid, user and command; or, where no process shows at
    all, utilisation of 50 % or more. topodoctor's own workers hold every GPU during a check and the
    utilisation NVML reports is often theirs, so neither counts. NVML is read a few times a second
    while the ranks run, so a process that started and ended within the run is named too, with when
    it was seen.

    Why it matters: the collectives share the GPU with the other work, so low figures may be the
    load, not the hardware; the findings on them are less certain.

    How to fix: measure on idle GPUs for numbers you can compare.
    """
    res = collectives_of(ctx)
    if res is None:
        return
    yield from busy_issues(loads(res.snapshot or ctx.snap, res.activity, res.during))


def busy_issues(found: dict[int, Load]) -> Iterator[Issue]:
    """One issue per GPU someone else's work kept busy (TD007, TD707)."""
    for i, load in sorted(found.items()):
        if load.busy:
            yield Issue(
                f"GPU{i}",
                load.describe(" when measuring started"),
                {
                    "utilization_pct": load.utilization_pct,
                    "processes": [f.pid for f in load.foreign],
                    "unlisted_processes": load.unseen,
                    "seen_during_run": [f.pid for f in load.foreign if f.seen is not None],
                },
            )
