"""The result of a run, assembled in the parent from what the ranks reported."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topodoctor.core import codec
from topodoctor.core.errors import CollectivesUnavailable as CollectivesUnavailable  # raised here, kept in core
from topodoctor.model.collective_ops import Plan
from topodoctor.model.collectives import (
    COLLECTIVES_SCHEMA_VERSION,
    CollectivesResult,
    Failure,
    PairwiseReport,
    RankInfo,
    Row,
    SpanRows,
)
from topodoctor.model.copies import Activity
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.nccl import account as nccl_log


@dataclass
class Collected:
    """What the parent gathered from the ranks' events."""

    meta: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)  # the ranks started (all killed and reaped on return)
    timeline: list[tuple[float, int, str]] = field(default_factory=list)  # (s since start, rank, event)


def build_result(
    got: Collected,
    plan: Plan,
    wall_s: float,
    log_dir: str | None,
    activity: tuple[Activity, ...] = (),
    snapshot: HostSnapshot | None = None,
) -> CollectivesResult:
    """The result of a run from what the ranks reported, with NCCL's account of it from the logs in
    ``log_dir``; raises CollectivesUnavailable when no rank reported at all."""
    meta = got.meta
    if not meta:
        first = got.failures[0].message if got.failures else "no rank reported"
        raise CollectivesUnavailable(f"collectives could not start: {first}")
    account = nccl_log.read_logs(log_dir) if log_dir and plan.backend == "nccl" else None
    ranks = tuple(codec.from_jsonable(RankInfo, d, "rank") for d in meta.get("ranks", []))
    used = {r.bus_id for r in ranks}
    return CollectivesResult(
        kind="collectives",
        schema_version=COLLECTIVES_SCHEMA_VERSION,
        source="topodoctor",
        host=ranks[0].host if ranks else "",
        backend=plan.backend,
        world_size=len(ranks),
        torch_version=str(meta.get("torch", "")),
        nccl_version=str(meta.get("nccl", "")),
        ranks=ranks,
        rows=tuple(codec.from_jsonable(Row, d, "row") for d in got.rows),
        failures=tuple(got.failures),
        wall_s=round(wall_s, 3),
        settings={
            "ops": list(plan.ops),
            "sizes": list(plan.sizes),
            "iters": plan.iters,
            "warmup_iters": plan.warmup_iters,
            "check": plan.check,
            "op_timeout_s": plan.op_timeout_s,
        },
        env=dict(meta.get("env", {})),
        activity=tuple(a for a in activity if snapshot is None or _bus(snapshot, a.index) in used),
        nccl=account,
        snapshot=snapshot,
        spans=tuple(codec.from_jsonable(SpanRows, d, "span") for d in meta.get("spans", [])),
        pairwise=codec.from_jsonable(PairwiseReport, meta["pairwise"], "pairwise") if meta.get("pairwise") else None,
    )


def _bus(snap: HostSnapshot, index: int) -> str | None:
    bus = snap.gpu(index).bus_id
    return bus.lower() if isinstance(bus, str) else None
