"""Helpers of the rule cases at the edge of each threshold: the helpers those cases are written with
(the cases themselves are in tests/rules/cases/, by family).

Every numeric threshold a rule module declares has here (or beside its rule's other cases) a case
exactly at it and one just across, each named for it (``at=``): tests/rules/test_rule_cases.py moves
the threshold by 1 % (an integer by 1) and requires each to turn, so a comparison that slips from
``<`` to ``<=`` or a threshold that drifts is caught. The numbers are written out (the edge's value
from the threshold as documented): a case that read the threshold from the code would move with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rule_case_kit import BwEdit, Case, bandwidth_result, measured, set_measured

from topodoctor.core.probed import Unsupported
from topodoctor.core.stats import median
from topodoctor.model.collectives import CollectivesResult

X4_ONEWAY = {
    (m.src, m.dst): m.value.median
    for m in bandwidth_result(lambda r: None).measurements
    if m.mode == "oneway" and m.value is not None
}
# GPU1->GPU2 below every other one-way pair: the median of the twelve is the others' middle pair.
PEER_MEDIAN = median([0.0, *(v for k, v in X4_ONEWAY.items() if k != (1, 2))])
NV18_GBPS = 478.125  # the NV18 path's signalling rate per direction (both H200 hosts)
X4_PCIE_GBPS = 63.008  # each x4 GPU's Gen5 x16 link
X2_MODEL_ALL_REDUCE = 320.0  # the busbw model's all_reduce on the x2 host (topology/busbw.py)
COPY_GBPS = round(min(X4_ONEWAY[(0, 1)], X4_ONEWAY[(1, 0)]), 1)  # the pair 0-1 as every output states it


def unwired(*gpus: int) -> Any:
    """A snapshot edit: these GPUs' links down, their far ends unknown (nothing says they are wired)."""

    def edit(s: Any) -> Any:
        def cut(g: Any) -> Any:
            links = tuple(replace(k, active=False, remote_type="unknown") for k in g.nvlinks)
            return replace(g, nvlinks=links) if g.index in gpus else g

        return replace(s, gpus=tuple(cut(g) for g in s.gpus))

    return edit


def _stats(v: float) -> dict[str, Any]:
    return {"median": v, "min": v, "max": v, "samples": [v]}


def bw_value(mode: str, src: int, dst: int, gbps: float) -> BwEdit:
    """The measurement's samples all at ``gbps``."""

    def edit(r: dict[str, Any]) -> None:
        m = next(m for m in r["measurements"] if (m["mode"], m["src"], m["dst"]) == (mode, src, dst))
        m["value"] = _stats(gbps)

    return edit


def bw_alone(src: int, dst: int, gbps: float) -> BwEdit:
    """One-way ``src``->``dst`` at ``gbps`` with a single peer left (the others not measured): no median."""

    def edit(r: dict[str, Any]) -> None:
        for m in r["measurements"]:
            if m["mode"] == "oneway" and (m["src"], m["dst"]) not in ((src, dst), (dst, src)):
                m["value"] = None
        bw_value("oneway", src, dst, gbps)(r)

    return edit


def _pair_0_1(r: dict[str, Any]) -> None:
    """The x4 host's copies between GPU0 and GPU1 (and the host) alone, as a two-GPU host's."""
    keep = (-1, 0, 1)
    r["measurements"] = [m for m in r["measurements"] if m["src"] in keep and m["dst"] in keep]
    r["activity"] = [a for a in r["activity"] if a["index"] in keep]
    r["snapshot"] = None


def _collectives(edit: Callable[[CollectivesResult], CollectivesResult]) -> Callable[[Any], None]:
    def change(ctx: Any) -> None:
        set_measured(ctx, "collectives", edit(measured(ctx, "collectives")))

    return change


def busbw(
    op: str, size: int, gbps: float, expect: float | None = None, copies: bool = False, model: bool = True
) -> Callable[[Any], None]:
    """A context edit: ``op``'s largest row measured at ``size`` bytes and ``gbps`` busbw (both
    columns); ``expect`` as --expect-busbw; ``copies`` puts the x4 host's copy result beside it;
    ``model`` False takes from the snapshot what the topology's model needs (the GPUs' compute
    capability and current PCIe generation), so that a measured copy or the link rate is the basis."""

    def edit(r: CollectivesResult) -> CollectivesResult:
        rows = [row for row in r.rows if row.op == op]
        last = rows[-1]
        t = replace(last.in_place, busbw_gbps=gbps) if last.in_place else None
        o = replace(last.out_of_place, busbw_gbps=gbps) if last.out_of_place else None
        new = replace(last, size_bytes=size, in_place=t, out_of_place=o)
        return replace(r, rows=(*(row for row in r.rows if row.op != op), new))

    def change(ctx: Any) -> None:
        _collectives(edit)(ctx)
        if expect is not None:
            set_measured(ctx, "collectives_expect_gbps", expect)
        if copies:
            ctx.bandwidth = bandwidth_result(_pair_0_1)
        if not model:
            ctx.snap = without_model(ctx.snap)

    return change


def without_model(snap: Any) -> Any:
    """``snap`` with the GPUs' compute capability and current PCIe generation not read: the
    topology's model has no link credit to start from, the link rates stay."""
    gone = Unsupported("not read in this case")
    return replace(
        snap,
        gpus=tuple(replace(g, compute_capability=gone, pcie=replace(g.pcie, gen_current=gone)) for g in snap.gpus),
    )


def rank_times(op: str, size: int, times_us: tuple[float, ...]) -> Callable[[Any], None]:
    """A context edit: ``op`` measured at ``size`` bytes only, each rank's time per op ``times_us`` (both
    columns); the other ops as they are."""

    def edit(r: CollectivesResult) -> CollectivesResult:
        last = [row for row in r.rows if row.op == op][-1]
        t = replace(last.in_place, rank_time_us=times_us) if last.in_place else None
        o = replace(last.out_of_place, rank_time_us=times_us) if last.out_of_place else None
        return replace(
            r, rows=(*(x for x in r.rows if x.op != op), replace(last, size_bytes=size, in_place=t, out_of_place=o))
        )

    return _collectives(edit)


def span_busbw(span: str, op: str, gbps: float) -> Callable[[Any], None]:
    """A context edit: ``op``'s rows in the multi-node result's span ``span`` at ``gbps`` busbw."""

    def timing(t: Any) -> Any:
        return replace(t, busbw_gbps=gbps) if t is not None else None

    def edit(r: CollectivesResult) -> CollectivesResult:
        spans = tuple(
            replace(
                sp,
                rows=tuple(
                    replace(row, in_place=timing(row.in_place), out_of_place=timing(row.out_of_place))
                    if row.op == op
                    else row
                    for row in sp.rows
                ),
            )
            if sp.name == span
            else sp
            for sp in r.spans
        )
        return replace(r, spans=spans)

    return _collectives(edit)


def _bw(code: str, fires: bool, change: str, edit: BwEdit, at: str) -> Case:
    return Case(code, fires, "h200-x4", change, bandwidth=edit, at=at)


def _coll(
    code: str, fires: bool, change: str, edit: Callable[[Any], None], at: str, severity: str | None = None
) -> Case:
    return Case(code, fires, "h200-x2", change, collectives="x2-healthy", context=edit, at=at, severity=severity)


MiB = 1 << 20
NOMINAL_FLOOR = 0.35 * NV18_GBPS  # TD001's floor against the nominal rate, from 256 MiB
