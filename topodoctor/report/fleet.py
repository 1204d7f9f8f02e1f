"""`topodoctor fleet` output: text for people, JSON for machines, drain lists for Slurm."""

from __future__ import annotations

import shlex
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from topodoctor.core.text import plural, printable
from topodoctor.fleet.rollup import FLEET_SCHEMA_VERSION, FleetReport
from topodoctor.report.terminal import literal

_STYLE = {"healthy": "green", "slow": "yellow", "unhealthy": "bold red", "unknown": "magenta"}
REASON_LIMIT = 200  # Slurm keeps the reason whole, but a screen of `sinfo -R` does not


def _clean(text: str, limit: int = REASON_LIMIT) -> str:
    """One printable line: a reason lands in scontrol's command line and in `sinfo -R`."""
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def fleet_json(report: FleetReport) -> dict[str, Any]:
    """The fleet's verdict as ``fleet --format json`` prints it: counts by state, then every node,
    shared finding, outlier, node type and unreadable file, and the nodes to drain."""
    counts: dict[str, int] = {}
    for n in report.nodes:
        counts[n.state] = counts.get(n.state, 0) + 1
    return {
        "kind": "fleet",
        "schema_version": FLEET_SCHEMA_VERSION,
        "settings": asdict(report.settings),
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


def drain_lines(report: FleetReport) -> str:
    """``NODE REASON`` per node to drain: for scripts that call scontrol themselves. NODE is
    one shell word (quoted where it needs it); REASON is the rest of the line."""
    return "".join(f"{_node(n.node)} {_clean(n.drain_reason or '')}\n" for n in report.drain)


def scontrol_lines(report: FleetReport) -> str:
    """Ready-to-run ``scontrol update`` commands, quoted for a POSIX shell."""
    return "".join(
        f"scontrol update nodename={_node(n.node)} state=drain reason={shlex.quote(_clean(reason))}\n"
        for n in report.drain
        for reason in (n.drain_reason or "",)
    )


def print_fleet(report: FleetReport, console: Console) -> None:
    """The fleet's verdict as text: a table of the nodes, then the outliers and the shared findings."""
    t = Table(title=plural(len(report.nodes), "node"))
    for col in ("node", "type", "state", "check", "bandwidth", "collectives", "first reason"):
        t.add_column(col)
    for n in report.nodes:
        t.add_row(
            literal(n.node),
            literal(n.node_type or "-"),
            Text(n.state, _STYLE[n.state]) + (" (drain)" if n.drain else ""),
            *(literal(n.sources.get(k, "-")) for k in ("check", "bandwidth", "collectives")),
            literal(n.reasons[0] if n.reasons else ""),
        )
    console.print(t)
    if report.outliers:
        o_t = Table(title="Slower than the nodes of their type (median and MAD over nodes)")
        for col in ("node", "figure", "GB/s", "fleet median", "ratio", "robust z", "nodes"):
            o_t.add_column(col, justify="right" if col not in ("node", "figure") else "left")
        for o in report.outliers:
            z = f"{o.robust_z:.1f}" if o.robust_z is not None else "MAD 0"
            figures = (f"{o.gbps:.1f}", f"{o.fleet_median_gbps:.1f}", f"{o.ratio:.3f}", z, str(o.peers))
            o_t.add_row(literal(o.node), literal(o.figure), *figures)
        console.print(o_t)
    if report.shared:
        s_t = Table(title="Findings on more than one node")
        for col in ("code", "severity", "nodes", "example"):
            s_t.add_column(col)
        for s in report.shared:
            tag = " fleet-wide" if s.systemic else ""
            s_t.add_row(s.code, s.severity, f"{len(s.nodes)} of {len(report.nodes)}{tag}", literal(s.example))
        console.print(s_t)
        if any(s.systemic for s in report.shared):
            console.print(
                "fleet-wide: failing on more than "
                f"{report.settings.systemic_share:.0%} of the nodes: fix it once (image, driver, config); "
                "it is no reason to drain any one node"
            )
    for ty in report.types:
        few = ty.figures_too_few
        fewer = f", {few} measured by fewer than {plural(report.settings.min_nodes, 'node')}" if few else ""
        nodes, compared = plural(len(ty.nodes), "node"), plural(ty.figures_compared, "figure")
        console.print(literal(f"type {ty.node_type}: {nodes}, {compared} compared{fewer}"))
    for u in report.unreadable:
        console.print(Text("unreadable", "magenta") + literal(f": {u.error}"))
    for note in report.notes:
        console.print(literal(f"note: {note}"))
    drains = report.drain
    counts = ", ".join(
        f"{sum(1 for n in report.nodes if n.state == s)} {s}"
        for s in ("healthy", "slow", "unhealthy", "unknown")
        if any(n.state == s for n in report.nodes)
    )
    wide = f"; {fleet_wide_line(report)}" if report.fleet_wide else ""
    listed = f": {', '.join(n.node for n in drains)}" if drains else ""
    console.print(literal(f"{counts}; {len(drains)} to drain{listed}{wide}"))


def fleet_wide_line(report: FleetReport) -> str:
    """``fleet-wide: TD101 on 7 of 7 nodes``: why a fleet that drains nobody is still unhealthy."""
    return "fleet-wide: " + ", ".join(report.fleet_wide)
