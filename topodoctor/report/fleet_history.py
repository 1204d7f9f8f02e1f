"""`topodoctor fleet --history` output beyond the roll-up's: what the store holds and what the
history found, as text (one line each), JSON, and Prometheus series."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from rich.console import Console
from rich.text import Text

from topodoctor.core.text import plural, printable
from topodoctor.fleet.history import HistoryReport
from topodoctor.model.findings import SEVERITY_ORDER

SHOWN = 12  # history findings listed in the text (--details: all)
_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "dim"}


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M")


def summary(h: HistoryReport) -> str:
    """``history: 945 results of 28 nodes, 2026-11-01 06:00 to ... UTC (as of ...); added 945``."""
    nodes = len(h.fleet.nodes)
    span = f"{_when(h.first)} to {_when(h.last)} UTC" if h.first is not None else "none"
    return f"history: {plural(h.results, 'result')} of {plural(nodes, 'node')}, {span} (as of {_when(h.as_of)})"


def stored(h: HistoryReport) -> str | None:
    """``added 945, 0 already stored``: what this run added to the database, and what it noticed."""
    parts = []
    ing = h.ingested
    if ing:
        parts.append(f"added {ing['added']}, {ing['duplicates']} already stored")
        if ing.get("pruned"):
            parts.append(f"{ing['pruned']} past the retention bounds deleted")
    if h.timed_by_file:
        parts.append(f"{plural(h.timed_by_file, 'result')} without measured_at: timed by the file's mtime")
    return "; ".join(parts) or None


def print_history(h: HistoryReport, console: Console, details: bool = False) -> None:
    """The history's findings, worst first, one line each (``details``: all of them, whole)."""
    for said in (summary(h), stored(h)):
        if said is not None:
            console.print(Text(printable(said)), no_wrap=True, overflow="ellipsis", crop=not details)
    found = sorted(h.findings, key=lambda nf: (-SEVERITY_ORDER[nf.finding.severity], nf.finding.code, nf.node))
    counts = Counter(nf.finding.code for nf in found)
    if counts:
        console.print(Text(printable("found: " + ", ".join(f"{c} x{n}" for c, n in sorted(counts.items())))))
    shown = found if details else found[:SHOWN]
    for nf in shown:
        f = nf.finding
        line = Text(f.severity.ljust(8), _STYLE[f.severity]) + Text(printable(f"{nf.node} {f.code} {f.message}"))
        console.print(line, no_wrap=not details, overflow="ellipsis", crop=not details)
    if len(shown) < len(found):
        console.print(Text(f"(+{plural(len(found) - len(shown), 'finding')}: --details, or --format json)"))
    for p in h.peers_since:
        text = f"peers: {p.node} {p.figure} off its type's median since {p.since[:10]} ({plural(p.results, 'result')})"
        console.print(Text(printable(text)), no_wrap=not details, overflow="ellipsis", crop=not details)


def history_json(h: HistoryReport) -> dict[str, Any]:
    """The history's part of ``fleet --history --format json``."""
    return {
        "as_of": _iso(h.as_of),
        "results": h.results,
        "first": _iso(h.first),
        "last": _iso(h.last),
        "timed_by_file": h.timed_by_file,
        "ingested": dict(h.ingested),
        "settings": h.settings.judged_by(),
        "findings": [{"node": nf.node, **asdict(nf.finding)} for nf in h.findings],
        "peers_since": [asdict(p) for p in h.peers_since],
    }


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
