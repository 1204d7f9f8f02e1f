"""`collectives --algo` / `--scaling` under a launcher (torchrun, srun): this process joins the
launcher's world as one rank, every run of the sweep is a new process group of that world
(rank/sweeps.py), and rank 0 turns what came back into one result per run, the same results a
spawned run gives. No torch here (the rank side imports it).
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from topodoctor.core import codec
from topodoctor.measure.collectives.assemble import Collected, build_result
from topodoctor.measure.collectives.launch import die_with_parent
from topodoctor.measure.collectives.sweeps import TUNING_SUBSYS, SweepRun
from topodoctor.measure.collectives.world import World
from topodoctor.model.collective_ops import Plan
from topodoctor.model.collectives import CollectivesResult, Failure
from topodoctor.nccl.account import MAX_LOG_BYTES, account


def join_sweeps(
    plan: Plan, runs: Sequence[SweepRun], world: World, log_dir: str | None = None, deadline: float | None = None
) -> list[CollectivesResult] | None:
    """Run ``runs`` as one rank of a launcher's world; rank 0 gets one result per run (a run the
    world never reached carries the failure that stopped it), the others None. ``plan``: the
    world's own (its backend, its op timeout for the world's steps)."""
    from topodoctor.measure.collectives.rank.main import run_rank  # torch: this process becomes a rank

    die_with_parent(signal.SIGTERM)
    t0 = time.monotonic()
    own = log_dir or tempfile.mkdtemp(prefix=f"topodoctor-coll-{world.rank}-")
    if "NCCL_DEBUG_FILE" not in os.environ and "NCCL_DEBUG_SUBSYS" not in os.environ:
        # NCCL reads it once per process (sweeps.PROCESS_ENV): the default run's choices need it from the start
        os.environ["NCCL_DEBUG_SUBSYS"] = TUNING_SUBSYS
    stops: list[Failure] = []

    def emit(ev: dict[str, Any]) -> None:
        if ev.get("ev") in ("fail", "hang") and world.rank == 0 and "kind" in ev:
            stops.append(
                Failure(ev["kind"], ev.get("op"), ev.get("size_bytes"), str(ev.get("message", "")), ev.get("rank", 0))
            )

    raw = run_rank(plan, world, emit, own, None, keep=True, deadline=deadline, sweep=runs)
    if raw is None:
        return None
    done: list[dict[str, Any]] = raw.get("sweep", [])
    at = len(done)  # the world stopped in the first run without a result
    meta = {k: v for k, v in raw.items() if k not in ("rows", "failures", "sweep", "sweep_rows")}
    idents = {int(r["rank"]): r for r in meta.get("ranks", [])}
    out = []
    for i, run in enumerate(runs):
        doc = done[i] if i < len(done) else {"rows": raw.get("sweep_rows", []) if i == at else [], "failures": []}
        fails = [codec.from_jsonable(Failure, f, "failure") for f in doc["failures"]]
        if i >= len(done):
            fails += stops if i == at else [_not_run(runs, at, stops)]
        got = Collected(meta={**meta, "ranks": [idents[r] for r in run.ranks if r in idents]}, rows=doc["rows"])
        got.failures = fails
        res = build_result(got, run.plan, float(doc.get("wall_s", time.monotonic() - t0)), None)
        out.append(_with_account(res, doc.get("log"), os.environ.get("NCCL_DEBUG_FILE")))
    return out


def _not_run(runs: Sequence[SweepRun], at: int, stops: list[Failure]) -> Failure:
    where = f"run {runs[at].label}" if 0 <= at < len(runs) else "the world's start"
    why = stops[0].message if stops else "stopped"
    return Failure("error", None, None, f"not run: the sweep stopped at {where} ({why})")


def _with_account(res: CollectivesResult, span: Any, path: str | None) -> CollectivesResult:
    """The run with NCCL's account of it: the part of rank 0's log written during the run (its
    group's set-up, cost table and per-call choices), where rank 0 was in the run."""
    from dataclasses import replace

    if not path or not isinstance(span, list) or len(span) != 2 or None in span or res.backend != "nccl":
        return res
    start, end = int(span[0]), int(span[1])
    try:
        with open(path, "rb") as f:
            f.seek(start)
            text = f.read(min(end - start, MAX_LOG_BYTES)).decode("utf-8", "replace")
    except OSError:
        return res
    return replace(res, nccl=account([text]))
