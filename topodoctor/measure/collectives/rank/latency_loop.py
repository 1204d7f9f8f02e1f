"""A rank's side of ``collectives --latency``, its loop: every path, op and size of the plan, a
cell at a time (imports torch: a measuring process only). How a cell is prepared, agreed and
timed: ``rank/latency.py``; the NVSHMEM path: ``rank/nvshmem_path.py``."""

from __future__ import annotations

import math
from typing import Any

from topodoctor.measure.collectives.guard import Emit, Watchdog
from topodoctor.measure.collectives.rank.latency import NO_GPU, WHY_CHARS, Bench, Job, first_line, said
from topodoctor.measure.collectives.rank.nvshmem_path import Nvshmem
from topodoctor.measure.collectives.rank.worker import Rank
from topodoctor.model.collective_latency import PATH_OPS, LatencyOp, LatencyPlan, cell_of, unavailable


def run_latency(rank: Rank, plan: LatencyPlan, emit: Emit, watchdog: Watchdog) -> dict[str, Any]:
    """Every path of ``plan`` at each of its ops and sizes; rank 0 emits each cell as a ``row``
    event and returns them all (with the NVSHMEM versions, when it loaded)."""
    bench = Bench(rank, plan)
    cells: list[dict[str, Any]] = []
    versions: dict[str, str] = {}
    for path in plan.paths:
        watchdog.begin(f"{path} setup", 0)
        emit({"ev": "begin", "rank": rank.me, "op": f"{path} setup", "size": 0})
        shmem: Nvshmem | None = None
        why = ""
        if path == "nccl_graph" and not bench.cuda:
            why = NO_GPU
        elif path.startswith("symm"):
            why = bench.symm_open()
        elif path == "nvshmem":
            shmem = Nvshmem(bench)
            why = shmem.open()
        why = bench.agree(why)
        if shmem is not None and not why:
            why = shmem.start(bench.agree)  # a collective start: every rank or none goes on
            versions = shmem.versions
            if rank.me == 0 and versions:
                emit({"ev": "note", "versions": versions})
        watchdog.end()
        emit({"ev": "end", "rank": rank.me, "op": f"{path} setup", "size": 0})
        for op in PATH_OPS[path]:
            for size in plan.sizes(op):
                cell = unavailable(op, size, path, why) if why else _cell(bench, path, op, size, shmem, watchdog, emit)
                if rank.me == 0:
                    cells.append(cell)
                    emit({"ev": "row", "row": cell})
    return {"latency": cells, "versions": versions}


def _cell(
    bench: Bench, path: str, op: LatencyOp, size: int, shmem: Any, watchdog: Watchdog, emit: Emit
) -> dict[str, Any]:
    """One path at one op and size: prepared, agreed, timed and gathered across the ranks."""
    me = bench.me
    watchdog.begin(f"{path} {op}", size)
    emit({"ev": "begin", "rank": me, "op": f"{path} {op}", "size": size})
    job: Job | None = None
    why = ""
    try:
        if path.startswith("nccl"):
            job = bench.nccl(op, size, graph=path == "nccl_graph")
        elif path.startswith("symm"):
            job = bench.symm(path, size)
        else:
            job = shmem.prepare(op, size)
    except Exception as exc:  # could not prepare on this rank: every rank hears it next
        why = first_line(exc)
    agreed = bench.agree(why)
    us, wrong, why = math.nan, math.nan, ""
    if not agreed and job is not None:
        try:
            us, wrong = job()
        except Exception as exc:  # broke while running: the others hear it below
            why = first_line(exc)
    docs = bench.rank.gather_json({"us": _num(us), "wrong": _num(wrong), "why": why[:WHY_CHARS]})
    watchdog.end()
    emit({"ev": "end", "rank": me, "op": f"{path} {op}", "size": size})
    failed = agreed or said(docs)
    if failed:
        return unavailable(op, size, path, failed, "failed")
    if op == "p2p":
        docs = docs[:2]  # ranks past 1 idle in a ping-pong
    return cell_of(op, size, path, [[_float(d.get("us")), _float(d.get("wrong"))] for d in docs])


def _num(v: float) -> float | None:
    return None if math.isnan(v) else round(v, 4)


def _float(v: Any) -> float:
    return float(v) if isinstance(v, int | float) else math.nan
