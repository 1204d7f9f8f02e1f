"""A fleet judged over time: each node's stored results read once, node by node, oldest first
(memory holds one node's results at a time), judged against the node's own past (fleet/drift.py)
and for lemons, flapping, rising counters, replaced GPUs and silence (fleet/episodes.py); the
latest result of each kind is then rolled up with every other node's as ``fleet`` rolls up a
directory (status, peers of the same type, shared findings, drain list), the history's findings
joining them as one more result per node. A GPU's checks follow its UUID from node to node.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from topodoctor.fleet.drift import drift_findings
from topodoctor.fleet.episodes import (
    Verdict,
    checks,
    counters_rising,
    flapping,
    gpu_failures,
    lemon,
    replaced,
    silent,
)
from topodoctor.fleet.request import FleetThresholds, HistoryRequest
from topodoctor.fleet.results import Better, NodeFigure, NodeResult, NodeType, Unreadable
from topodoctor.fleet.rollup import FleetOutcome, roll_up, slow_by
from topodoctor.fleet.rows import StoredRow, unpack_floats
from topodoctor.fleet.timeline import DAY_S, Past, day, forget
from topodoctor.model.findings import SEVERITY_ORDER, Finding
from topodoctor.model.stamp import utc_iso

KIND_OF_SOURCE = {"bandwidth": ("bandwidth",), "collectives": ("collectives",), "fitness": ("check", "fitness")}


@dataclass(frozen=True)
class NodeFinding:
    """A history finding and the node it is about."""

    node: str
    finding: Finding


@dataclass(frozen=True)
class PeerSince:
    """Since when a node's figure has been below its peers' median (an outlier of the roll-up)."""

    node: str
    figure: str
    since: str  # UTC ISO 8601: the first of the node's latest results that were already this far off
    results: int  # how many results in a row


@dataclass(frozen=True)
class HistoryReport:
    """The fleet over time: the roll-up of the latest results with the history's findings joined,
    the findings by node, since when the peers' outliers are off, and the heat strip's cells."""

    fleet: FleetOutcome
    settings: HistoryRequest
    as_of: float
    results: int  # results judged (those of the window)
    first: float | None
    last: float | None
    findings: tuple[NodeFinding, ...]
    peers_since: tuple[PeerSince, ...] = ()
    heat: tuple[tuple[str, str, float], ...] = ()  # (node, day, value) of settings.heat_figure
    heat_how: tuple[str, str] = ("", "higher")  # its unit, and which way is better
    timed_by_file: int = 0  # results without measured_at: timed by their file's mtime
    ingested: dict[str, int] = field(default_factory=dict)  # added, duplicates, pruned, unreadable


@dataclass
class _Segment:
    """A GPU's checks on one node: when, how many, and each verdict where one failed."""

    node: str
    first: float
    last: float
    serial: str | None
    verdicts: list[Verdict]


def _latest(r: Past, blobs: dict[int, Any]) -> NodeResult:
    """The roll-up's view of a stored result."""
    row = r.row
    findings = tuple(Finding(c, n, sev, s, m, "", {}) for c, n, sev, s, m in json.loads(row.findings or "[]"))
    figures: tuple[NodeFigure, ...] = ()
    if row.figure_keys is not None:
        keys = blobs[row.figure_keys]
        figures = tuple(
            NodeFigure(k[0], k[1], k[2], v, k[3], k[4]) for k, v in zip(keys, unpack_floats(row.figure_values))
        )
    ntype = NodeType(*blobs[row.node_type]) if row.node_type is not None else None
    gpus = tuple(tuple(g) for g in blobs[row.gpus]) if row.gpus is not None else ()
    state: Any = row.state
    kind: Any = row.kind
    timed: Any = row.time_from
    return NodeResult(
        row.node, kind, row.path, state, row.reason, findings, figures, ntype, row.measured_at, timed, gpus
    )


def judge(
    rows: Iterable[StoredRow],
    blobs: dict[int, Any],
    st: HistoryRequest,
    fleet: FleetThresholds,
    as_of: float,
    rows_of: Callable[[str], Iterable[StoredRow]] | None = None,
    unreadable: Iterable[Unreadable] = (),
) -> HistoryReport:
    """Judge every node of ``rows`` (ordered by node, then time) as of ``as_of``; ``rows_of``
    gives one node's rows again (for the peers' outliers: since when), ``unreadable`` the files
    that could not be added."""
    bar = SEVERITY_ORDER[fleet.fail_level]
    forget()
    latest: list[NodeResult] = []
    found: dict[str, list[Finding]] = defaultdict(list)
    segments: dict[str, list[_Segment]] = defaultdict(list)
    heat: list[tuple[str, str, float]] = []
    how: list[tuple[str, str]] = []
    count, first, last, by_file = 0, None, None, 0
    for node, group in groupby(rows, key=lambda row: row.node):
        recs = [Past(row, blobs, bar) for row in group]
        count += len(recs)
        by_file += sum(1 for r in recs if r.row.time_from == "file")
        first = recs[0].t if first is None else min(first, recs[0].t)
        last = recs[-1].t if last is None else max(last, recs[-1].t)
        by_kind: dict[str, list[Past]] = defaultdict(list)
        for r in recs:
            by_kind[r.kind].append(r)
        mine = found[node]
        for rs in by_kind.values():
            latest.append(_latest(rs[-1], blobs))
            mine += drift_findings(rs, blobs, st, fleet)
        swapped, swap_times = replaced(recs)
        judged = checks(recs)
        seq = [Verdict(r.t, r.verdict == "failed", tuple(f"{c} {s}" for _, c, s in r.failing)) for r in judged]
        got = lemon(
            "node", "TD951", seq, [t for t in swap_times if any(v.failed and v.t < t for v in seq)], st, "the node"
        )
        mine += ([got] if got else []) + flapping(recs, st, fleet.fail_level)
        mine += counters_rising(recs, blobs, st, as_of) + swapped
        quiet = silent(recs, st, as_of)
        mine += [quiet] if quiet else []
        _segments(node, judged, segments)
        if st.heat_key is not None:
            heat += _heat(node, recs, blobs, st.heat_key, how)
    for uuid, segs in segments.items():
        segs.sort(key=lambda s: s.first)
        seq = [v for s in segs for v in s.verdicts]
        if not any(v.failed for v in seq):
            continue
        nodes = list(dict.fromkeys(s.node for s in segs))
        if len(nodes) == 1 and any(f.code == "TD951" for f in found[nodes[0]]):
            continue  # a GPU that stayed on a lemon node: the node's finding names it already
        serial = segs[-1].serial or "?"
        got = lemon(uuid, "TD952", seq, [s.first for s in segs[1:]], st, f"{uuid} (serial {serial})")
        if got is not None:
            ev = {**got.evidence, "uuid": uuid, "serial": serial, "nodes": nodes}
            moved = f"; on {', '.join(nodes)}" if len(nodes) > 1 else ""
            found[segs[-1].node].append(
                Finding(got.code, got.name, got.severity, got.subject, got.message + moved, got.fix, ev)
            )
    history = [
        NodeResult(node, "history", f"history of {node}", "healthy", "", tuple(fs), (), None, as_of)
        for node, fs in sorted(found.items())
        if fs
    ]
    report = roll_up(latest + history, unreadable, fleet)
    listed = tuple(NodeFinding(node, f) for node, fs in sorted(found.items()) for f in fs)
    since = tuple(_peers_since(report, fleet, rows_of, blobs)) if rows_of is not None else ()
    return HistoryReport(
        report, st, as_of, count, first, last, listed, since, tuple(heat), how[0] if how else ("", "higher"), by_file
    )


def _segments(node: str, judged: list[Past], segments: dict[str, list[_Segment]]) -> None:
    """Extend each GPU's segments with this node's checks (verdicts kept where one failed)."""
    per: dict[str, _Segment] = {}
    failures: dict[str, dict[float, tuple[str, ...]]] = {}
    for r in judged:
        if r.failing:
            for failed, why in gpu_failures(r).items():
                failures.setdefault(failed, {})[r.t] = tuple(why)
        for gpu, serial in r.gpus.values():
            if not gpu:
                continue
            uuid = gpu
            seg = per.get(uuid)
            if seg is None:
                seg = per[uuid] = _Segment(node, r.t, r.t, serial, [])
            seg.last = r.t
            seg.verdicts.append(Verdict(r.t, False) if uuid not in failures else _verdict(r.t, failures[uuid]))
    for uuid, seg in per.items():
        if uuid not in failures:  # all passed: when and how many is all a lemon needs
            seg.verdicts = [Verdict(seg.first, False)] * len(seg.verdicts)
        segments[uuid].append(seg)


def _verdict(t: float, failed_at: dict[float, tuple[str, ...]]) -> Verdict:
    why = failed_at.get(t)
    return Verdict(t, why is not None, why or ())


def _heat(
    node: str, recs: list[Past], blobs: dict[int, Any], figure: str, how: list[tuple[str, str]]
) -> list[tuple[str, str, float]]:
    """The figure's value on each day (the day's last result), for the heat strip; its unit and
    direction go into ``how``."""
    per_day: dict[str, float] = {}
    for r in recs:
        if r.row.figure_keys is None:
            continue
        for k, v in zip(blobs[r.row.figure_keys], unpack_floats(r.row.figure_values)):
            if f"{k[1]} {k[2]}" == figure:
                per_day[day(r.t)] = v
                if not how:
                    how.append((k[3], k[4]))
    return [(node, d, v) for d, v in sorted(per_day.items())]


def _peers_since(
    report: FleetOutcome, fleet: FleetThresholds, rows_of: Callable[[str], Iterable[StoredRow]], blobs: dict[int, Any]
) -> Iterable[PeerSince]:
    """For each outlier among peers, since when the node's figure has been that far off their median."""
    index: dict[int, dict[str, int]] = {}
    for o in report.outliers:
        kinds = KIND_OF_SOURCE.get(o.source, ())
        values: list[tuple[float, float]] = []
        for row in rows_of(o.node):
            if row.kind not in kinds or row.figure_keys is None:
                continue
            where = index.get(row.figure_keys)
            if where is None:
                where = index[row.figure_keys] = {f"{k[1]} {k[2]}": i for i, k in enumerate(blobs[row.figure_keys])}
            i = where.get(o.figure)
            if i is not None:
                values.append((row.measured_at, unpack_floats(row.figure_values)[i]))
        since, n = None, 0
        better: Better = "lower" if o.ratio > 1.0 else "higher"
        for t, v in reversed(values):
            if not slow_by(v / o.fleet_median_gbps, None, fleet, better):
                break
            since, n = t, n + 1
        if since is not None:
            yield PeerSince(o.node, o.figure, utc_iso(since), n)


def days_between(a: float, b: float) -> float:
    """Days from ``a`` to ``b``."""
    return (b - a) / DAY_S
