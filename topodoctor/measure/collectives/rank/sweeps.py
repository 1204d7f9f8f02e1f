"""The runs of `collectives --algo` / `--scaling` inside a launcher's world (torchrun, srun),
one rank's side. Imports torch: a measuring process only.

Each run is a new process group of the world (``torch.distributed.new_group``), made by every
rank in the same order as torch requires, measured by its members (``worker.Rank`` on the
group), then destroyed. NCCL reads NCCL_ALGO each time it sets up a communicator: init.cc's
initTransportsRank calls ncclTopoTuneModel (graph/tuning.cc), which reads it through
ncclGetEnv, getenv behind a once-only load of nccl.conf (2.21 - 2.26) or the environment
plugin, whose default is getenv (2.28); 2.18 called getenv itself. Only the NCCL_PARAM
integers are cached for the process (ncclLoadParam), and NCCL_DEBUG_SUBSYS (debug.cc reads it
once). torch makes a group's communicator when the group is made (ncclCommSplit of the world's,
on a bound device) or at its first collective: so the variable is set on every rank before the
group is made, and restored once the group is destroyed. An NCCL environment plugin of the
user's own (NCCL_ENV_PLUGIN) may cache it: the default run's TUNING log then shows it.

The members of a run measure while the others wait on the world's store for the run's result,
which the group's first rank puts there: that is the run's meeting point, no collective, since a
rank waiting outside a group must not look hung to its watchdog. A failure every member met at
the same point (NCCL refusing a forced algorithm: each rank gets the same answer) is that run's
failure and the next run goes on; a failure of some members only stops the world, as in any
joined run (guard.Alarm), and rank 0 reports the runs done so far.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist  # this module runs inside the measuring ranks

from topodoctor.measure.collectives.guard import Alarm, Emit, Watchdog, failure_of, flush_c_streams
from topodoctor.measure.collectives.nodes import node_name
from topodoctor.measure.collectives.rank.worker import Rank
from topodoctor.measure.collectives.sweeps import SweepRun

RUN_KEY = "topodoctor/sweep/"  # + run index: its result (JSON); + "/failed/" + rank: a member's failure
AGREE_S = 5.0  # members that fail at the same call do so within this of one another
POLL_S = 0.02
DESTROY_S = 5.0


@dataclass
class SweepState:
    """The runs done so far, readable by the rank's watching thread after a stop: the world
    stopped in the first run without a result."""

    done: list[dict[str, Any]] = field(default_factory=list)  # per run: rows, failures, wall_s, log span
    rows: list[dict[str, Any]] = field(default_factory=list)  # the run under way: rank 0's rows so far


def _quiet(emit: Emit) -> Emit:
    """A run's rows and failures travel in its result, not as the world's events."""

    def send(ev: dict[str, Any]) -> None:
        if ev.get("ev") not in ("row", "failure"):
            emit(ev)

    return send


def _log_size() -> int | None:
    """Bytes NCCL has written to this rank's log so far (its debug file, ours only)."""
    path = os.environ.get("NCCL_DEBUG_FILE", "")
    if not path or "%" in path:
        return None
    flush_c_streams()
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _wait_key(alarm: Alarm, key: str, limit_s: float) -> bool:
    """Polled, so that the thread never sits in the store's client while the watching thread asks it."""
    end = time.monotonic() + limit_s
    while not alarm.present([key]):
        if time.monotonic() > end:
            return False
        time.sleep(POLL_S)
    return True


def _bound_s(run: SweepRun) -> float:
    """How long the ranks outside a run may wait for it: every op of its plan under its timeout."""
    p = run.plan
    return p.op_timeout_s * (len(p.ops) * len(p.sizes) + 2) + 30.0


def _destroy(group: Any) -> None:
    """The run's group torn down, bounded: NCCL's destroy can wait on peers; the next run goes on."""

    def go() -> None:
        try:
            dist.destroy_process_group(group)
        except Exception:  # a group that failed may refuse its own teardown: it is abandoned
            return

    t = threading.Thread(target=go, daemon=True, name="topodoctor-destroy")
    t.start()
    t.join(DESTROY_S)


def _measure(sub: Rank, k: int, run: SweepRun, watchdog: Watchdog, alarm: Alarm) -> dict[str, Any]:
    """``sub``'s run: its rows and failures, or the failure every member met at the same point."""
    try:
        body = sub.run(watchdog)
        return {"rows": body["rows"], "failures": body["failures"]}
    except Exception as exc:
        where = watchdog.current
        failure = failure_of(exc, alarm.rank, node_name(), where)
        watchdog.end()
        alarm.publish(f"{RUN_KEY}{k}/failed/{alarm.rank}", json.dumps(failure))
        keys = [f"{RUN_KEY}{k}/failed/{r}" for r in run.ranks]
        end = time.monotonic() + min(AGREE_S, run.plan.op_timeout_s / 2)
        while True:
            if alarm.peek() is not None:
                raise  # a peer's failure stopped the world: this error is its echo (a closed connection)
            if alarm.present(keys):
                break
            if time.monotonic() > end:
                # this rank's own failure: the world stops and rank 0 names it, with the op it was in
                watchdog.current = (where[0], where[1], time.monotonic()) if where else None
                raise
            time.sleep(POLL_S)
        return {"rows": sub.rows, "failures": [*sub.failures, failure]}


def one_run(
    rank: Rank, k: int, run: SweepRun, emit: Emit, watchdog: Watchdog, alarm: Alarm, state: SweepState
) -> dict[str, Any]:
    """Run ``k`` on every rank of the world; its result on rank 0 (the others: an empty one)."""
    saved = {name: os.environ.get(name) for name in run.env}
    t0 = time.monotonic()
    start = _log_size() if rank.me == 0 else None
    member = rank.me in run.ranks
    timeout = timedelta(seconds=run.plan.op_timeout_s + 5.0)
    watchdog.begin(f"making the groups of ranks {','.join(map(str, run.ranks))}", 0)
    # The members' bookkeeping group, its NCCL communicator made now, before the run's NCCL_ALGO
    # is set: a forced algorithm refuses the ops the bookkeeping needs.
    control = dist.new_group(list(run.ranks), timeout=timeout)
    if member and rank.cuda:
        dist.all_reduce(torch.zeros(1, device=rank.device), group=control)
    watchdog.end()
    os.environ.update(run.env)
    try:
        watchdog.begin(f"making the group of ranks {','.join(map(str, run.ranks))}", 0)
        group = dist.new_group(list(run.ranks), timeout=timeout)
        watchdog.end()
        key = f"{RUN_KEY}{k}"
        if member:
            sub = Rank(run.plan, rank.world, _quiet(emit), group=group, control=control)
            state.rows = sub.rows  # what rank 0 has of this run when the world stops
            out = _measure(sub, k, run, watchdog, alarm)
            if run.ranks[0] == rank.me:
                alarm.publish(key, json.dumps(out))
        if not _wait_key(alarm, key, _bound_s(run)):
            raise TimeoutError(f"run {run.label}: no result from its ranks within {_bound_s(run):g} s")
        doc: dict[str, Any] = {"rows": [], "failures": []}
        if rank.me == 0:
            doc = json.loads(alarm.read(key, 5.0) or '{"rows": [], "failures": []}')
        if member:
            _destroy(group)
            _destroy(control)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    doc.update(wall_s=round(time.monotonic() - t0, 3), log=[start, _log_size() if rank.me == 0 else None])
    return doc


def run_sweep(
    rank: Rank, runs: Sequence[SweepRun], emit: Emit, watchdog: Watchdog, alarm: Alarm, state: SweepState
) -> dict[str, Any]:
    """Every run in turn; rank 0 keeps their results in ``state`` (read too after a stop)."""
    for k, run in enumerate(runs):
        state.rows = []
        state.done.append(one_run(rank, k, run, emit, watchdog, alarm, state))
    return {"rows": [], "failures": [], "sweep": state.done}
