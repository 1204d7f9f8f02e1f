"""`collectives --latency` started and assembled: one rank per GPU of this node, spawned and
watched as every collectives run is (``launch.py``), each running ``rank/latency.py``; the cells
rank 0 reported become a ``LatencyResult``. No torch here."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from typing import Literal

from topodoctor.core import codec
from topodoctor.measure.collectives.assemble import Collected, CollectivesUnavailable
from topodoctor.measure.collectives.launch import spawn
from topodoctor.model.collective_latency import (
    LATENCY_SCHEMA_VERSION,
    MULTICAST_OFF,
    PATH_OPS,
    PLAN_ENV,
    LatencyCell,
    LatencyPlan,
    LatencyResult,
    cells_of,
)
from topodoctor.model.collective_ops import Plan
from topodoctor.model.collectives import RankInfo


def measure_latency(
    lplan: LatencyPlan,
    nprocs: int,
    backend: str = "nccl",
    op_timeout_s: float = 30.0,
    start_timeout_s: float = 120.0,
    deadline: float | None = None,
    log_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> LatencyResult:
    """Spawn ``nprocs`` local ranks and run every path of ``lplan``; NVLink multicast forced off
    in every rank (the paths that need it are listed as skipped)."""

    if nprocs < 2:
        raise CollectivesUnavailable(f"--latency needs at least 2 ranks; {nprocs} to run (GPUs visible, --nprocs)")
    # The plan the launcher watches with: its op timeout cuts a hung path, whatever its size.
    kind: Literal["nccl", "gloo"] = "gloo" if backend == "gloo" else "nccl"
    plan = Plan(("all_reduce",), lplan.all_reduce_sizes, lplan.iters, 0, lplan.check, op_timeout_s, kind)
    env = {PLAN_ENV: json.dumps(codec.to_jsonable(lplan)), **MULTICAST_OFF}
    t0 = time.monotonic()
    if log_dir is not None:
        got = spawn(plan, nprocs, log_dir, start_timeout_s, deadline, extra_env=env, progress=progress)
    else:
        with tempfile.TemporaryDirectory(prefix="topodoctor-latency-") as tmp:
            got = spawn(plan, nprocs, tmp, start_timeout_s, deadline, extra_env=env, progress=progress)
    return build_latency(got, lplan, plan.backend, time.monotonic() - t0)


def build_latency(got: Collected, lplan: LatencyPlan, backend: str, wall_s: float) -> LatencyResult:
    """The result from what the ranks reported; a cell the run never reached (it stopped on a
    failure) is there too, failed, saying so. Raises CollectivesUnavailable when no rank reported."""
    meta = got.meta
    if not meta:
        first = got.failures[0].message if got.failures else "no rank reported"
        raise CollectivesUnavailable(f"--latency could not start: {first}")
    ranks = tuple(codec.from_jsonable(RankInfo, d, "rank") for d in meta.get("ranks", []))
    cells = list(cells_of(got.rows))
    seen = {(c.op, c.size_bytes, c.path) for c in cells}
    stopped = got.failures[0].message if got.failures else "the run stopped"
    for path in lplan.paths:
        for op in PATH_OPS.get(path, ()):
            for size in lplan.sizes(op):
                if (op, size, path) not in seen:
                    cells.append(LatencyCell(op, size, path, "failed", note=f"not reached: {stopped}"))
    return LatencyResult(
        kind="collectives-latency",
        schema_version=LATENCY_SCHEMA_VERSION,
        host=ranks[0].host if ranks else "",
        backend=backend,
        world_size=len(ranks),
        torch_version=str(meta.get("torch", "")),
        nccl_version=str(meta.get("nccl", "")),
        ranks=ranks,
        cells=tuple(cells),
        failures=tuple(got.failures),
        wall_s=round(wall_s, 3),
        settings=codec.to_jsonable(lplan),
        env=dict(meta.get("env", {})),
        versions={str(k): str(v) for k, v in (meta.get("versions") or {}).items()},
    )
