"""Rule cases at the edge of each threshold: part of the table in tests/support/rule_cases.py.

Every numeric threshold a rule module declares has here (or beside its rule's other cases) a case
exactly at it and one just across, each named for it (``at=``): tests/rules/test_rule_cases.py
moves the threshold by 1 % (an integer by 1) and requires each to turn, so a comparison that
slips from ``<`` to ``<=`` or a threshold that drifts is caught. The numbers are written out (the
edge's value from the threshold as documented): a case that read the threshold from the code
would move with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rule_case_kit import BwEdit, Case, bandwidth_result, gpu, measured, set_measured
from rule_cases_edges_fitness import FITNESS_EDGE_CASES

from topodoctor.core.stats import median
from topodoctor.model.collectives import CollectivesResult
from topodoctor.model.snapshot import RetiredPages

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
COPY_GBPS = min(X4_ONEWAY[(0, 1)], X4_ONEWAY[(1, 0)])  # the measured reference of the pair 0-1


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


def busbw(op: str, size: int, gbps: float, expect: float | None = None, copies: bool = False) -> Callable[[Any], None]:
    """A context edit: ``op``'s largest row measured at ``size`` bytes and ``gbps`` busbw (both
    columns); ``expect`` as --expect-busbw; ``copies`` puts the x4 host's copy result beside it."""

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

    return change


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
EDGE_CASES = [
    # bandwidth: peers 0.85, nominal 0.5, PCIe fallback 1.5x, host link 0.7
    _bw(
        "TD701",
        False,
        "one-way GPU1->GPU2 at 0.85 of its peers' median",
        bw_value("oneway", 1, 2, 0.85 * PEER_MEDIAN),
        "SLOW_VS_PEERS",
    ),
    _bw(
        "TD701",
        True,
        "one-way GPU1->GPU2 at 0.845 of its peers' median",
        bw_value("oneway", 1, 2, 0.845 * PEER_MEDIAN),
        "SLOW_VS_PEERS",
    ),
    _bw(
        "TD701",
        False,
        "one-way GPU1->GPU2 alone at half its path's rate",
        bw_alone(1, 2, 0.5 * NV18_GBPS),
        "SLOW_VS_NOMINAL",
    ),
    _bw(
        "TD701",
        True,
        "one-way GPU1->GPU2 alone at 0.497 of its path's rate",
        bw_alone(1, 2, 0.497 * NV18_GBPS),
        "SLOW_VS_NOMINAL",
    ),
    _bw(
        "TD703",
        True,
        "one-way GPU0->GPU3 at 1.5x its PCIe rate",
        bw_value("oneway", 0, 3, 1.5 * X4_PCIE_GBPS),
        "PCIE_SPEED_FACTOR",
    ),
    _bw(
        "TD703",
        False,
        "one-way GPU0->GPU3 at 1.507x its PCIe rate",
        bw_value("oneway", 0, 3, 1.507 * X4_PCIE_GBPS),
        "PCIE_SPEED_FACTOR",
    ),
    _bw("TD704", False, "host->GPU2 at 0.7 of its link", bw_value("h2d", -1, 2, 0.7 * X4_PCIE_GBPS), "HOST_LINK_FLOOR"),
    _bw(
        "TD704",
        True,
        "host->GPU2 at 0.697 of its link",
        bw_value("h2d", -1, 2, 0.697 * X4_PCIE_GBPS),
        "HOST_LINK_FLOOR",
    ),
    # collectives: busbw floors (0.35 nominal, 0.40 measured, 0.90 expected; x0.7 below 256 MiB from 64 MiB)
    _coll(
        "TD001",
        False,
        "all_reduce at 1 GiB, 0.35 of NV18",
        busbw("all_reduce", 1024 * MiB, NOMINAL_FLOOR),
        "LOW_VS_NOMINAL",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 1 GiB, 0.348 of NV18",
        busbw("all_reduce", 1024 * MiB, 0.348 * NV18_GBPS),
        "LOW_VS_NOMINAL",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 1 GiB, 0.40 of the measured copy",
        busbw("all_reduce", 1024 * MiB, 0.40 * COPY_GBPS, copies=True),
        "LOW_VS_MEASURED",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 1 GiB, 0.398 of the measured copy",
        busbw("all_reduce", 1024 * MiB, 0.398 * COPY_GBPS, copies=True),
        "LOW_VS_MEASURED",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 1 GiB, 0.90 of --expect-busbw 100",
        busbw("all_reduce", 1024 * MiB, 90.0, expect=100.0),
        "LOW_VS_EXPECTED",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 1 GiB, 0.895 of --expect-busbw 100",
        busbw("all_reduce", 1024 * MiB, 89.5, expect=100.0),
        "LOW_VS_EXPECTED",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 256 MiB, 0.3 of NV18: the full floor",
        busbw("all_reduce", 256 * MiB, 0.3 * NV18_GBPS),
        "FULL_RATE_BYTES",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 256 MiB - 1, 0.3 of NV18: the climbing floor",
        busbw("all_reduce", 256 * MiB - 1, 0.3 * NV18_GBPS),
        "FULL_RATE_BYTES",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 128 MiB, 0.35 x 0.7 of NV18",
        busbw("all_reduce", 128 * MiB, 0.35 * 0.7 * NV18_GBPS),
        "SMALLER_SIZE_SHARE",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 128 MiB, 0.35 x 0.697 of NV18",
        busbw("all_reduce", 128 * MiB, 0.35 * 0.697 * NV18_GBPS),
        "SMALLER_SIZE_SHARE",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 64 MiB, 0.1 of NV18: judged",
        busbw("all_reduce", 64 * MiB, 0.1 * NV18_GBPS),
        "JUDGED_MIN_BYTES",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 64 MiB - 1, 0.1 of NV18: latency's range",
        busbw("all_reduce", 64 * MiB - 1, 0.1 * NV18_GBPS),
        "JUDGED_MIN_BYTES",
    ),
    # a rank 1.3x slower than the others' median, from 1 MiB
    _coll(
        "TD006",
        False,
        "all_reduce at 1 GiB, rank 0 at 1.3x rank 1",
        rank_times("all_reduce", 1024 * MiB, (1300.0, 1000.0)),
        "SLOW_RANK",
    ),
    _coll(
        "TD006",
        True,
        "all_reduce at 1 GiB, rank 0 at 1.301x rank 1",
        rank_times("all_reduce", 1024 * MiB, (1301.0, 1000.0)),
        "SLOW_RANK",
    ),
    _coll(
        "TD006",
        True,
        "all_reduce at 1 MiB, rank 0 at 2x rank 1",
        rank_times("all_reduce", MiB, (2000.0, 1000.0)),
        "SLOW_RANK_MIN_BYTES",
    ),
    _coll(
        "TD006",
        False,
        "all_reduce at 1 MiB - 1, rank 0 at 2x rank 1",
        rank_times("all_reduce", MiB - 1, (2000.0, 1000.0)),
        "SLOW_RANK_MIN_BYTES",
    ),
    # across nodes: 0.75 of what the rail's NICs carry (50 GB/s for GPU0 of each HGX node)
    *(
        Case(
            "TD011",
            fires,
            "h200-x2",
            f"multi-node result hgx-2nodes-healthy, all_reduce across the nodes at {gbps:g} GB/s of the NICs' 50",
            collectives="hgx-2nodes-healthy",
            context=span_busbw("local rank 0", "all_reduce", gbps),
            at="INTER_MIN_RATIO",
        )
        for fires, gbps in ((False, 0.75 * 50.0), (True, 0.747 * 50.0))
    ),
    # the busbw model: 0.85 of it, from 256 MiB
    _coll(
        "TD020",
        False,
        "all_reduce at 1 GiB, 0.85 of the model",
        busbw("all_reduce", 1024 * MiB, 0.85 * X2_MODEL_ALL_REDUCE),
        "BELOW_MODEL",
    ),
    # 0.85 of the model, and an error from 0.6 of it down
    *(
        _coll(
            "TD020",
            True,
            f"all_reduce at 1 GiB, {share:g} of the model",
            busbw("all_reduce", 1024 * MiB, share * X2_MODEL_ALL_REDUCE),
            at,
            severity,
        )
        for share, at, severity in (
            (0.846, "BELOW_MODEL", "warning"),
            (0.6, "FAR_BELOW_MODEL", "warning"),
            (0.594, "FAR_BELOW_MODEL", "error"),
        )
    ),
    _coll(
        "TD020",
        True,
        "all_reduce at 256 MiB, 0.5 of the model",
        busbw("all_reduce", 256 * MiB, 0.5 * X2_MODEL_ALL_REDUCE),
        "MODEL_MIN_BYTES",
        "error",
    ),
    _coll(
        "TD020",
        False,
        "all_reduce at 256 MiB - 1, 0.5 of the model",
        busbw("all_reduce", 256 * MiB - 1, 0.5 * X2_MODEL_ALL_REDUCE),
        "MODEL_MIN_BYTES",
    ),
    # a pair off NVLink counts as a fallback when at least half its peers are on NVLink (and nothing says it is wired)
    Case(
        "TD201",
        True,
        "h200-x4",
        "GPU3's links down and unwired: 3 of 6 pairs on NVLink, exactly half",
        unwired(3),
        subjects=("GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    Case("TD201", False, "h200-x4", "GPU2's and GPU3's links down and unwired: 1 of 6 pairs on NVLink", unwired(2, 3)),
    # retired pages: 64 is the limit
    *(
        Case(
            "TD510",
            n >= 64,
            "h200-x4",
            f"GPU2 {n} retired pages",
            gpu(2, retired_pages=RetiredPages(40, n - 40, False)),
            at="RETIRED_PAGES_LIMIT",
        )
        for n in (63, 64)
    ),
    *FITNESS_EDGE_CASES,
]
