"""`topodoctor fleet` output: text for people, JSON for machines, drain lists for Slurm."""

from __future__ import annotations

import shlex
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from topodoctor.core.text import plural, printable
from topodoctor.fleet.rollup import FLEET_SCHEMA_VERSION, FleetOutcome
from topodoctor.report.terminal import literal

_STYLE = {"healthy": "green", "slow": "yellow", "unhealthy": "bold red", "unknown": "magenta"}
REASON_LIMIT = 200  # Slurm keeps the reason whole, but a screen of `sinfo -R` does not


def _clean(text: str, limit: int = REASON_LIMIT) -> str:
    """One printable line: a reason lands in scontrol's command line and in `sinfo -R`."""
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def fleet_json(report: FleetOutcome) -> dict[str, Any]:
    """The fleet's verdict as ``fleet --format json`` prints it: counts by state, then every node,
    shared finding, outlier, node type and unreadable file, and the nodes to drain."""
    counts: dict[str, int] = {}
    for n in report.nodes:
        counts[n.state] = counts.get(n.state, 0) + 1
    return {
        "kind": "fleet",
        "schema_version": FLEET_SCHEMA_VERSION,
        "settings": report.settings.judged_by(),
        "summary": {
            "nodes": len(report.nodes),
            **counts,
            "drain": len(report.drain),
            "unreadable": len(report.unreadable),
        },
        "exit_code": report.exit_code,
        "fleet_wide": list(report.fleet_wide),
        "nodes": [asdict(n) for n in report.nodes],
        "shared_findings": [asdict(s) for s in report.shared],
        "outliers": [asdict(o) for o in report.outliers],
        "types": [asdict(t) for t in report.types],
        "unreadable": [asdict(u) for u in report.unreadable],
        "drain": [{"node": n.node, "reason": _clean(n.drain_reason or "")} for n in report.drain],
        "notes": list(report.notes),
    }


def _node(name: str) -> str:
    """A node name as one shell word, shown literally: a name with a space or a control
    character in it must not split the line or act on the terminal that shows it."""
    return shlex.quote(printable(name))


def drain_lines(report: FleetOutcome) -> str:
    """``NODE REASON`` per node to drain: for scripts that call scontrol themselves. NODE is
    one shell word (quoted where it needs it); REASON is the rest of the line."""
    return "".join(f"{_node(n.node)} {_clean(n.drain_reason or '')}\n" for n in report.drain)


def scontrol_lines(report: FleetOutcome) -> str:
    """Ready-to-run ``scontrol update`` commands, quoted for a POSIX shell."""
    return "".join(
        f"scontrol update nodename={_node(n.node)} state=drain reason={shlex.quote(_clean(reason))}\n"
        for n in report.drain
        for reason in (n.drain_reason or "",)
    )


ALL_NODES_UP_TO = 20  # a larger fleet's text lists the nodes that are not healthy (--details: all)
SOURCES = (("check", "check"), ("bandwidth", "bw"), ("collectives", "coll"), ("fitness", "fit"), ("history", "hist"))


def _type_keys(report: FleetOutcome) -> dict[str, str]:
    """A short key per node type (A, B, ...): the table's column, the legend below names them."""
    return {t.node_type: chr(ord("A") + i) if i < 26 else str(i) for i, t in enumerate(report.types)}


def _one_line(text: str) -> Text:
    return Text(printable(text), no_wrap=True, overflow="ellipsis")


def _line(console: Console, text: Text) -> None:
    """One line, cut with an ellipsis at the console's width (--details prints it whole)."""
    console.print(text, no_wrap=True, overflow="ellipsis", crop=True)


def print_fleet(report: FleetOutcome, console: Console, details: bool = False) -> None:
    """The fleet's verdict as text: one line per node (a larger fleet: the nodes that are not
    healthy), the node types, outliers and shared findings one line each, then the summary.
    ``details``: every node and every reason, the outliers and shared findings in full."""
    keys = _type_keys(report)
    used = [(k, label) for k, label in SOURCES if any(k in n.sources for n in report.nodes)]
    listed = [n for n in report.nodes if details or len(report.nodes) <= ALL_NODES_UP_TO or n.state != "healthy"]
    t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
    node_w = min(24, max([4, *(len(printable(n.node)) for n in listed)]))
    t.add_column("node", no_wrap=True, overflow="ellipsis", width=node_w)
    t.add_column("type", no_wrap=True, width=4)
    t.add_column("state", no_wrap=True, width=17)
    for _, label in used:
        t.add_column(label, no_wrap=True, width=7)
    # The reason takes what the other columns leave of the width: one line each, cut, never wrapped.
    fixed = node_w + 4 + 17 + 7 * len(used) + 2 * (3 + len(used))
    room = max(20, console.width - fixed)
    t.add_column("first reason" if not details else "reasons", no_wrap=not details, overflow="ellipsis", width=room)
    for n in listed:
        reasons = "\n".join(printable(r) for r in n.reasons) if details else (n.reasons[0] if n.reasons else "")
        t.add_row(
            literal(n.node),
            keys.get(n.node_type or "", "-"),
            Text(n.state, _STYLE[n.state]) + (" (drain)" if n.drain else ""),
            *(literal(_short(n.sources.get(k, "-"))) for k, _ in used),
            Text(reasons) if details else _one_line(reasons),
        )
    console.print(t)
    if len(listed) < len(report.nodes):
        hidden = len(report.nodes) - len(listed)
        console.print(literal(f"({plural(hidden, 'healthy node')} not listed: --details lists every node)"))
    for ty in report.types:
        few = ty.figures_too_few
        fewer = f", {few} measured by fewer than {plural(report.settings.min_nodes, 'node')}" if few else ""
        nodes, compared = plural(len(ty.nodes), "node"), plural(ty.figures_compared, "figure")
        _line(console, _one_line(f"type {keys[ty.node_type]}: {ty.node_type}: {nodes}, {compared} compared{fewer}"))
    _outliers(report, console, details)
    _shared(report, console, details)
    for u in report.unreadable:
        _line(console, Text("unreadable", "magenta") + _one_line(f": {u.error}"))
    for note in report.notes:
        _line(console, _one_line(f"note: {note}"))
    console.print(literal(summary_line(report)))


def _short(state: str) -> str:
    return {"unhealthy": "FAIL", "healthy": "ok", "measured": "ok"}.get(state, state)


def _outliers(report: FleetOutcome, console: Console, details: bool) -> None:
    if not report.outliers:
        return
    if not details:
        shown = report.outliers[:5]
        for o in shown:
            z = f"z {o.robust_z:.1f}" if o.robust_z is not None else "MAD 0"
            line = (
                f"outlier {o.node}: {o.figure} {o.gbps:.1f} {o.unit}, {o.ratio:.3f}x the median "
                f"{o.fleet_median_gbps:.1f} of {o.peers} nodes ({z})"
            )
            _line(console, _one_line(line))
        if len(report.outliers) > len(shown):
            console.print(literal(f"(+{plural(len(report.outliers) - len(shown), 'outlier')}: --details)"))
        return
    o_t = Table(title="Slower than the nodes of their type (median and MAD over nodes)")
    for col in ("node", "figure", "value", "unit", "fleet median", "ratio", "robust z", "nodes"):
        o_t.add_column(col, justify="right" if col not in ("node", "figure", "unit") else "left")
    for o in report.outliers:
        z = f"{o.robust_z:.1f}" if o.robust_z is not None else "MAD 0"
        figures = (f"{o.gbps:.1f}", o.unit, f"{o.fleet_median_gbps:.1f}", f"{o.ratio:.3f}", z, str(o.peers))
        o_t.add_row(literal(o.node), literal(o.figure), *figures)
    console.print(o_t)


def _shared(report: FleetOutcome, console: Console, details: bool) -> None:
    if not report.shared:
        return
    total = len(report.nodes)
    if details:
        s_t = Table(title="Findings on more than one node")
        for col in ("code", "severity", "nodes", "example"):
            s_t.add_column(col)
        for s in report.shared:
            tag = " fleet-wide" if s.systemic else ""
            s_t.add_row(s.code, s.severity, f"{len(s.nodes)} of {total}{tag}", literal(s.example))
        console.print(s_t)
    else:
        for s in report.shared[:5]:
            tag = ", fleet-wide" if s.systemic else ""
            _line(console, _one_line(f"shared {s.code} {s.severity} on {len(s.nodes)} of {total}{tag}: {s.example}"))
        if len(report.shared) > 5:
            console.print(literal(f"(+{len(report.shared) - 5} shared findings: --details)"))
    if any(s.systemic for s in report.shared):
        console.print(
            _one_line(
                "fleet-wide: failing on more than "
                f"{report.settings.systemic_share:.0%} of the nodes: fix it once (image, driver, config); "
                "it is no reason to drain any one node"
            )
        )


def summary_line(report: FleetOutcome) -> str:
    """``4 healthy, 1 slow, ...; 2 to drain: node03, node04``, and what is fleet-wide."""
    drains = report.drain
    counts = ", ".join(
        f"{sum(1 for n in report.nodes if n.state == s)} {s}"
        for s in ("healthy", "slow", "unhealthy", "unknown")
        if any(n.state == s for n in report.nodes)
    )
    wide = f"; {fleet_wide_line(report)}" if report.fleet_wide else ""
    names = [n.node for n in drains]
    shown = ", ".join(names[:10]) + (f" (+{len(names) - 10} more)" if len(names) > 10 else "")
    listed = f": {shown}" if drains else ""
    return f"{counts}; {len(drains)} to drain{listed}{wide}"


def fleet_wide_line(report: FleetOutcome) -> str:
    """``fleet-wide: TD101 on 7 of 7 nodes``: why a fleet that drains nobody is still unhealthy."""
    return "fleet-wide: " + ", ".join(report.fleet_wide)
