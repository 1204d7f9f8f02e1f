"""Many nodes' results in, one verdict per node out: its own status, the findings it shares
with others, and its figures against those of the nodes of its type.

Pure: the results arrive as ``NodeResult``s (read by ``fleet_input``); nothing here reads a
file or judges a measurement twice. A node's own verdicts come from the findings its
results carry; what the fleet adds is the comparison no single node can make.

**The outlier test.** Figures (a pair's copy bandwidth, a collective's busbw at one size)
are compared among nodes of the same type (GPU model, GPU count, NVLink fabric), figure by
figure: the fleet's value is the median over those nodes, its spread the median absolute
deviation (MAD). A node's figure is an outlier when it is both

- practically slow: below ``(1 - tolerance)`` of the fleet median (default 5 %), and
- statistically apart: its robust z-score ``0.6745 * (x - median) / MAD`` is below
  ``-z_threshold`` (default 3.5, Iglewicz and Hoaglin's cut-off), or the MAD is zero.

The median and the MAD ignore the very outliers they look for (up to half the nodes), which
a mean and standard deviation do not; the ratio keeps a fleet that measures within 0.1 % of
itself from flagging a node that is 0.5 % slower. Fewer than ``min_nodes`` values (default
3) give no median worth the name: such figures are counted as not compared, never judged.
Only the slow side is judged: a fast figure is not a fault.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from topodoctor.core.stats import median
from topodoctor.fleet.request import FleetThresholds
from topodoctor.fleet.results import Better, NodeFigure, NodeResult, NodeType, SourceState, Unreadable
from topodoctor.model.findings import SEVERITY_ORDER, Finding, headed
from topodoctor.model.outcome import CommandOutcome

__all__ = ["NodeFigure", "NodeResult", "NodeType", "Unreadable"]  # re-exported: where the roll-up's callers find them

FLEET_SCHEMA_VERSION = 1
MAD_TO_SIGMA = 0.6745  # the MAD of a normal distribution is 0.6745 sigma

NodeState = Literal["healthy", "unhealthy", "slow", "unknown"]
SLOW_CODES = frozenset({"TD950"})  # a node's figure off its own past: the node is slow, not broken


@dataclass(frozen=True)
class Outlier:
    """A node's figure well below the median of its type's nodes."""

    node: str
    node_type: str
    source: str
    figure: str
    gbps: float
    fleet_median_gbps: float
    ratio: float  # gbps / fleet median (above 1 for a latency)
    robust_z: float | None  # None when the fleet's MAD is zero
    peers: int  # nodes that measured this figure, this node included
    unit: str = "GB/s"


@dataclass(frozen=True)
class SharedFinding:
    """A finding code seen on several nodes: which, and whether it looks fleet-wide."""

    code: str
    name: str
    severity: str
    nodes: tuple[str, ...]
    share: float  # of the nodes with readable results
    systemic: bool  # failing, and on more than FleetThresholds.systemic_share of the nodes
    example: str


@dataclass(frozen=True)
class NodeStatus:
    """One node's verdict: its state, what each result file said, whether to drain it and why."""

    node: str
    node_type: str | None
    state: NodeState
    sources: dict[str, SourceState]  # check / bandwidth / collectives -> what its file said
    reasons: tuple[str, ...]  # worst first
    drain: bool
    drain_reason: str | None
    files: tuple[str, ...]


@dataclass(frozen=True)
class TypeSummary:
    """One node type: its nodes and how many figures were compared among them."""

    node_type: str
    nodes: tuple[str, ...]
    figures_compared: int
    figures_too_few: int  # figures fewer than min_nodes nodes measured: not judged


@dataclass(frozen=True)
class FleetOutcome(CommandOutcome):
    """The fleet's verdict: per node, the shared findings, the outliers, files that could not be read."""

    nodes: tuple[NodeStatus, ...]
    shared: tuple[SharedFinding, ...]
    outliers: tuple[Outlier, ...]
    types: tuple[TypeSummary, ...]
    unreadable: tuple[Unreadable, ...]
    settings: FleetThresholds
    notes: tuple[str, ...] = field(default=())

    @property
    def drain(self) -> tuple[NodeStatus, ...]:
        """The nodes to drain."""
        return tuple(n for n in self.nodes if n.drain)

    @property
    def fleet_wide(self) -> tuple[str, ...]:
        """One "TD101 on 7 of 7 nodes" per failing finding held by more than the systemic share."""
        return tuple(f"{s.code} on {len(s.nodes)} of {len(self.nodes)} nodes" for s in self.shared if s.systemic)

    @property
    def failing(self) -> tuple[object, ...]:
        """The nodes to drain and the findings fleet-wide (they drain no node, but the fleet is
        not healthy)."""
        return (*self.drain, *self.fleet_wide)

    @property
    def not_measured(self) -> tuple[str, ...]:  # type: ignore[override]  # a property over the base's field
        """The files and the nodes that could not be judged."""
        unknown = tuple(f"{n.node}: could not be judged" for n in self.nodes if n.state == "unknown")
        return tuple(u.error for u in self.unreadable) + unknown

    @property
    def unusable(self) -> tuple[str, ...]:  # type: ignore[override]  # a property over the base's field
        """Nothing: a result that cannot be read is a node not judged (``not_measured``)."""
        return ()


def robust_outliers(
    values: dict[str, float], settings: FleetThresholds, better: Better = "higher"
) -> tuple[float, dict[str, tuple[float, float | None]]]:
    """The median of ``values`` and, for each slow outlier, (ratio to the median, robust z): a rate
    below the median, a latency (``better="lower"``) above it."""
    med = median(values.values())
    mad = median(abs(v - med) for v in values.values())
    out: dict[str, tuple[float, float | None]] = {}
    if med <= 0:
        return med, out
    for name, v in values.items():
        ratio = v / med
        z = MAD_TO_SIGMA * (v - med) / mad if mad > 0 else None
        if slow_by(ratio, z, settings, better):
            out[name] = (ratio, z)
    return med, out


def slow_by(ratio: float, z: float | None, settings: FleetThresholds, better: Better = "higher") -> bool:
    """Whether a figure at ``ratio`` to its reference and robust z ``z`` (None: a spread of zero)
    is slow: practically (past the tolerance) and statistically (past the z threshold)."""
    if better == "lower":
        return ratio > 1.0 + settings.latency_tolerance and (z is None or z > settings.z_threshold)
    return ratio < 1.0 - settings.tolerance and (z is None or z < -settings.z_threshold)


def _failing(findings: Iterable[Finding], level: str) -> list[Finding]:
    bar = SEVERITY_ORDER[level]
    return sorted(
        (f for f in findings if SEVERITY_ORDER[f.severity] >= bar),
        key=lambda f: (-SEVERITY_ORDER[f.severity], f.code, f.subject),
    )


def _line(f: Finding) -> str:
    return headed(f)


def _outlier_line(o: Outlier) -> str:
    return (
        f"{o.figure} {o.gbps:.1f} {o.unit}, {o.ratio:.2f}x the median of {o.peers} nodes of its type "
        f"({o.fleet_median_gbps:.1f} {o.unit})"
    )


def roll_up(
    results: Iterable[NodeResult], unreadable: Iterable[Unreadable] = (), settings: FleetThresholds | None = None
) -> FleetOutcome:
    """Per-node status, shared findings and outliers from the results of many nodes."""
    st = settings or FleetThresholds()
    by_node: dict[str, list[NodeResult]] = defaultdict(list)
    for r in results:
        by_node[r.node].append(r)
    bad = list(unreadable)
    notes: list[str] = []

    types: dict[str, NodeType] = {}
    for node, rs in by_node.items():
        known = {r.node_type for r in rs if r.node_type is not None}
        if len(known) > 1:
            notes.append(
                f"{node}: its results describe different hardware ({', '.join(sorted(t.label for t in known))})"
            )
        if known:
            types[node] = sorted(known, key=lambda t: t.label)[0]

    # Figures: one value per node and key; a node with two results of one kind keeps the last file's.
    figures: dict[tuple[str, str, str], dict[str, float]] = {}
    how: dict[tuple[str, str, str], tuple[str, Better]] = {}  # unit, and which way is better
    for node, rs in by_node.items():
        kinds = Counter(r.kind for r in rs) if len(rs) > 1 else {}
        for kind, n in kinds.items():
            if n > 1:
                last = max(r.path for r in rs if r.kind == kind)
                notes.append(f"{node}: {n} {kind} results; the figures of {last} are compared")
        if node not in types:
            continue
        label = types[node].label
        for r in sorted(rs, key=lambda r: r.path) if len(rs) > 1 else rs:
            for f in r.figures:
                named = (label, f.source, f"{f.metric} {f.subject}")
                got = figures.get(named)
                if got is None:
                    got = figures[named] = {}
                    how[named] = (f.unit, f.better)
                got[node] = f.gbps

    outliers: list[Outlier] = []
    compared: Counter[str] = Counter()
    too_few: Counter[str] = Counter()
    for (tlabel, source, key), values in sorted(figures.items()):
        if len(values) < st.min_nodes:
            too_few[tlabel] += 1
            continue
        compared[tlabel] += 1
        unit, better = how[(tlabel, source, key)]
        med, slow = robust_outliers(values, st, better)
        for node, (ratio, z) in slow.items():
            outliers.append(Outlier(node, tlabel, source, key, values[node], med, ratio, z, len(values), unit))
    outliers.sort(key=lambda o: (-abs(o.ratio - 1.0), o.node, o.figure))

    shared = _shared(by_node, st)
    systemic = {s.code for s in shared if s.systemic}
    nodes = tuple(
        _status(node, by_node[node], types.get(node), [o for o in outliers if o.node == node], bad, systemic, st)
        for node in sorted(by_node)
    )
    known_nodes = set(by_node)
    bad = [Unreadable(u.path, u.error, u.node if u.node in known_nodes else None) for u in bad]
    summaries = tuple(
        TypeSummary(t, tuple(sorted(n for n, nt in types.items() if nt.label == t)), compared[t], too_few[t])
        for t in sorted({nt.label for nt in types.values()})
    )
    return FleetOutcome(nodes, shared, tuple(outliers), summaries, tuple(bad), st, tuple(notes))


def _shared(by_node: dict[str, list[NodeResult]], st: FleetThresholds) -> tuple[SharedFinding, ...]:
    total = len(by_node)
    holders: dict[str, set[str]] = defaultdict(set)
    first: dict[str, Finding] = {}
    for node, rs in by_node.items():
        for r in rs:
            for f in r.findings:
                holders[f.code].add(node)
                if f.code not in first or SEVERITY_ORDER[f.severity] > SEVERITY_ORDER[first[f.code].severity]:
                    first[f.code] = f
    out = []
    for code, nodes in holders.items():
        if len(nodes) < 2:
            continue
        f = first[code]
        share = len(nodes) / total
        failing = SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[st.fail_level]
        systemic = failing and total >= st.min_nodes and share > st.systemic_share
        out.append(SharedFinding(code, f.name, f.severity, tuple(sorted(nodes)), share, systemic, _line(f)))
    out.sort(key=lambda s: (-len(s.nodes), -SEVERITY_ORDER[s.severity], s.code))
    return tuple(out)


def _status(
    node: str,
    rs: list[NodeResult],
    node_type: NodeType | None,
    slow: list[Outlier],
    unreadable: list[Unreadable],
    systemic: set[str],
    st: FleetThresholds,
) -> NodeStatus:
    sources: dict[str, SourceState] = {}
    reasons: list[str] = []
    drain_reasons: list[str] = []
    rank = {"unreadable": 0, "measured": 1, "healthy": 2, "slow": 3, "unknown": 4, "unhealthy": 5}
    for r in sorted(rs, key=lambda r: r.path):
        failing = _failing(r.findings, st.fail_level)
        state = r.state
        if state in ("healthy", "unhealthy", "measured") and r.findings:
            state = "unhealthy" if failing else "healthy"
            if failing and all(f.code in SLOW_CODES for f in failing):
                state = "slow"  # slower than its own past: slow, as an outlier among peers is
        elif state == "unhealthy" and not r.findings:
            reasons.append(f"{r.kind}: {r.reason}")
            drain_reasons.append(r.reason)
        if rank[state] >= rank.get(sources.get(r.kind, "unreadable"), 0):
            sources[r.kind] = state
        if state == "unknown":
            reasons.append(f"{r.kind} could not check: {r.reason}")
        for f in failing:
            reasons.append(f"{_line(f)}" + (" (fleet-wide)" if f.code in systemic else ""))
            if f.code not in systemic:
                drain_reasons.append(_line(f))
    for u in unreadable:
        if u.node == node:
            reasons.append(f"unreadable: {u.error}")
    reasons.extend(_outlier_line(o) for o in slow)
    drain_reasons.extend(_outlier_line(o) for o in slow)

    values = set(sources.values())
    verdict: NodeState
    if "unhealthy" in values:
        verdict = "unhealthy"
    elif slow or "slow" in values:
        verdict = "slow"
    elif values & {"unknown"} or any(u.node == node for u in unreadable):
        verdict = "unknown"
    else:
        verdict = "healthy"
    drain = bool(drain_reasons)
    reason = None
    if drain:
        more = f" (+{len(drain_reasons) - 1} more)" if len(drain_reasons) > 1 else ""
        reason = f"topodoctor: {drain_reasons[0]}{more}"
    return NodeStatus(
        node,
        node_type.label if node_type else None,
        verdict,
        sources,
        tuple(reasons),
        drain,
        reason,
        tuple(sorted(r.path for r in rs)),
    )
