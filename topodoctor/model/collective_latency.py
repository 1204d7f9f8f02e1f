"""`collectives --latency`: small messages timed through each path a program can take between
GPUs, as plain data (the ranks' side is ``measure/collectives/rank/latency.py``).

The paths, for point-to-point (one way: half a ping-pong, each message complete before the
answer leaves) and all_reduce:

- ``nccl_eager``: NCCL as a program's eager code calls it, one launch per call (``dist.send``
  / ``dist.recv``, ``dist.all_reduce``): what nccl-tests reports without ``-G``.
- ``nccl_graph``: the same calls captured once in a CUDA graph and replayed: what code under
  ``torch.compile(mode="reduce-overhead")`` or a serving engine's captured decode step sees.
- ``symm_put`` / ``symm_one_shot`` / ``symm_two_shot``: PyTorch symmetric memory: a copy into the
  peer's buffer with ``put_signal`` / ``wait_signal``; ``one_shot_all_reduce`` and
  ``two_shot_all_reduce_``.
- ``nvshmem``: NVSHMEM through nvshmem4py: ``put_signal`` + ``signal_wait`` on the stream, and
  its on-stream ``reduce`` (the ``nvshmem`` extra; absent, the path is "not available" and says
  why).

Every time is microseconds per operation, the mean over ranks of each rank's median over
``reps`` timings of ``iters`` back-to-back operations (nccl-tests averages over ranks too).
NVLink multicast stays off: the paths that need it are listed as skipped, never measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from topodoctor.core import codec
from topodoctor.model.collectives import Failure, RankInfo
from topodoctor.model.stamp import Stamped

LATENCY_SCHEMA_VERSION = 1
LatencyOp = Literal["p2p", "all_reduce"]
Status = Literal["ok", "failed", "not available"]
PATHS: dict[str, str] = {  # id -> what the table calls it
    "nccl_eager": "NCCL, eager (a launch per call)",
    "nccl_graph": "NCCL, in a CUDA graph",
    "symm_put": "symm-mem copy + put_signal",
    "symm_one_shot": "symm-mem one_shot_all_reduce",
    "symm_two_shot": "symm-mem two_shot_all_reduce_",
    "nvshmem": "NVSHMEM",
}
# all_reduce first on every path: a path whose point-to-point breaks (NCCL's send / recv refusing a
# CUDA graph's capture) has its all_reduce figures by then.
PATH_OPS: dict[str, tuple[LatencyOp, ...]] = {
    "nccl_eager": ("all_reduce", "p2p"),
    "nccl_graph": ("all_reduce", "p2p"),
    "symm_put": ("p2p",),
    "symm_one_shot": ("all_reduce",),
    "symm_two_shot": ("all_reduce",),
    "nvshmem": ("all_reduce", "p2p"),
}
BASELINE = "nccl_eager"
# What NVLink multicast would add; never enabled here (it can take a shared host's GPUs out of service).
MULTICAST_PATHS = (
    ("symm-mem multimem_all_reduce_", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1"),
    ("NCCL's NVLS algorithms", "NCCL_NVLS_ENABLE=0"),
    ("NVSHMEM NVLS collectives", "NVSHMEM_DISABLE_NVLS=1"),
)
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
PLAN_ENV = "TOPODOCTOR_COLL_LATENCY"  # a spawned rank finds its latency plan here


@dataclass(frozen=True)
class LatencyPlan:
    """What ``--latency`` runs: sizes per op, the paths, and how many operations each timing takes."""

    p2p_sizes: tuple[int, ...] = (1 << 10, 100 << 10)
    all_reduce_sizes: tuple[int, ...] = (1 << 10, 1 << 20, 100 << 20)
    paths: tuple[str, ...] = tuple(PATHS)
    iters: int = 20  # operations per timing (p2p: round trips)
    reps: int = 5  # timings per path and size; their median is the rank's figure
    warmup: int = 5  # untimed operations first
    check: bool = True  # one operation on known data after the timings

    def sizes(self, op: LatencyOp) -> tuple[int, ...]:
        """The sizes this op runs at."""
        return self.p2p_sizes if op == "p2p" else self.all_reduce_sizes


@dataclass(frozen=True)
class LatencyCell:
    """One path at one op and size: its time per operation, or why there is none."""

    op: LatencyOp
    size_bytes: int
    path: str  # a key of PATHS
    status: Status
    time_us: float | None = None  # mean over ranks; p2p: one way
    rank_time_us: tuple[float, ...] = ()
    wrong: int | None = None  # elements wrong after one checked operation, summed over ranks; None: not checked
    note: str = ""  # the reason when not ok


@dataclass(frozen=True)
class Overtake:
    """Where eager NCCL catches up with a faster path: between ``below`` and ``at`` (None: not
    within the sizes measured, ``speedup`` then the path's lead at the largest)."""

    op: LatencyOp
    path: str
    below: int | None  # the largest size where the path was still faster
    at: int | None  # the first size where eager NCCL was as fast or faster
    speedup: float  # the path's speedup over eager NCCL at ``at`` (or at the largest size measured)


@dataclass(frozen=True)
class LatencyResult(Stamped):
    """The small-message table of one run: every path at every op and size."""

    kind: Literal["collectives-latency"]
    schema_version: int
    host: str
    backend: str
    world_size: int
    torch_version: str
    nccl_version: str
    ranks: tuple[RankInfo, ...]
    cells: tuple[LatencyCell, ...]
    failures: tuple[Failure, ...]
    wall_s: float
    settings: dict[str, Any]
    skipped: tuple[tuple[str, str], ...] = MULTICAST_PATHS  # (path, the setting that keeps it off)
    env: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)  # nvshmem4py, libnvshmem, when loaded

    def cell(self, op: str, size: int, path: str) -> LatencyCell | None:
        """The cell of this op, size and path, if the run got there."""
        return next((c for c in self.cells if c.op == op and c.size_bytes == size and c.path == path), None)


def speedup(res: LatencyResult, c: LatencyCell) -> float | None:
    """How many times faster than eager NCCL at the same op and size (None without both times)."""
    base = res.cell(c.op, c.size_bytes, BASELINE)
    if base is None or base.time_us is None or c.time_us is None or c.time_us <= 0:
        return None
    return base.time_us / c.time_us


def overtakes(res: LatencyResult) -> list[Overtake]:
    """Per op and path faster than eager NCCL at its smallest size: the size where eager NCCL
    catches up (is as fast or faster), or that it did not within the sizes measured."""
    out: list[Overtake] = []
    for op in dict.fromkeys(c.op for c in res.cells):
        for path in (p for p in PATHS if p != BASELINE):
            ups = [(c.size_bytes, speedup(res, c)) for c in res.cells if c.op == op and c.path == path]
            ups = sorted((s, u) for s, u in ups if u is not None)
            if not ups or ups[0][1] is None or ups[0][1] <= 1.0:
                continue
            below = None
            for size, up in ups:
                if up is not None and up <= 1.0:
                    out.append(Overtake(op, path, below, size, round(up, 3)))
                    break
                below = size
            else:
                out.append(Overtake(op, path, below, None, round(ups[-1][1] or 0.0, 3)))
    return out


def cells_of(rows: Sequence[dict[str, Any]]) -> tuple[LatencyCell, ...]:
    """The cells the ranks reported (rank 0's ``row`` events), decoded."""
    return tuple(codec.from_jsonable(LatencyCell, d, "latency cell") for d in rows)


def cell_of(op: LatencyOp, size: int, path: str, per_rank: Sequence[Sequence[float]], note: str = "") -> dict[str, Any]:
    """One cell from every rank's [time_us, wrong] (NaN time: the path did not run there; NaN
    wrong: not checked): the mean time over ranks, #wrong summed, as ``row_of`` does for rows."""
    times = [float(v[0]) for v in per_rank]
    if not times or any(math.isnan(t) for t in times):
        return {"op": op, "size_bytes": size, "path": path, "status": "failed", "note": note or "no time on every rank"}
    wrong = [float(v[1]) for v in per_rank]
    return {
        "op": op,
        "size_bytes": size,
        "path": path,
        "status": "ok",
        "time_us": round(sum(times) / len(times), 3),
        "rank_time_us": [round(t, 3) for t in times],
        "wrong": None if any(math.isnan(w) for w in wrong) else int(sum(wrong)),
        "note": note,
    }


def unavailable(op: LatencyOp, size: int, path: str, why: str, status: Status = "not available") -> dict[str, Any]:
    """A cell without a time: the path cannot run here (``not available``) or broke (``failed``)."""
    return {"op": op, "size_bytes": size, "path": path, "status": status, "note": why}
