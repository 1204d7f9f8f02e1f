"""Prometheus series of a fleet's history (`fleet --history --format prometheus`): one series per
history finding and the drift ratios. The families join ``report/prometheus.py``'s one table."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topodoctor.fleet.history import HistoryReport

Add = Callable[..., None]

HISTORY_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "topodoctor_fleet_history_finding": (
        "Findings of the fleet's history with these labels (TD950-TD956, see topodoctor explain CODE): 1, or how "
        "many one code found on one node's subject.",
        ("Hostname", "code", "name", "severity", "subject"),
    ),
    "topodoctor_fleet_drift_ratio": (
        "A node's figure over its own baseline (the median of its last healthy results), for figures judged drifted.",
        ("Hostname", "source", "figure"),
    ),
    "topodoctor_fleet_history_results": ("Results the history judged (those of its window).", ()),
}


def history_series(add: Add, h: HistoryReport) -> None:
    """The history's series: one per finding, and the drift ratios."""
    add("topodoctor_fleet_history_results", h.results)
    for nf in h.findings:
        f = nf.finding
        add(
            "topodoctor_fleet_history_finding",
            1,
            Hostname=nf.node,
            code=f.code,
            name=f.name,
            severity=f.severity,
            subject=f.subject,
        )
        if f.code == "TD950":
            ev = f.evidence
            add("topodoctor_fleet_drift_ratio", ev["ratio"], Hostname=nf.node, source=ev["source"], figure=ev["figure"])
