"""Why: a culprit's host joined with that host's topodoctor results (the fleet's input). Pure.

"Likely cause" is said only with evidence: a failed or could-not-check prolog, a finding at
warning or above (XID events, links down, throttling, NIC ports, a slow pair). Without any,
the report says so in as many words, and points at what the dumps show instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from topodoctor.core.text import plural
from topodoctor.fleet.rollup import NodeResult
from topodoctor.model.findings import SEVERITY_ORDER

CAUSE_LEVEL = "warning"


@dataclass(frozen=True)
class HostHealth:
    """What the results directory says about one host."""

    host: str
    results: tuple[str, ...]  # the files read for it
    causes: tuple[str, ...]  # "TD101 error GPU3/nvlink7: ..." and failed verdicts
    healthy: bool  # results exist and none shows a cause

    def summary(self) -> str:
        """One clause for the one-line verdict."""
        if self.causes:
            more = f" (+{len(self.causes) - 1} more)" if len(self.causes) > 1 else ""
            return f"likely cause on {self.host}: {self.causes[0]}{more}"
        if self.results:
            return f"no health evidence on {self.host} ({plural(len(self.results), 'result')}, all healthy)"
        return f"no health evidence on {self.host} (no topodoctor result for it)"


def _same_host(a: str, b: str) -> bool:
    return a == b or a.split(".", 1)[0] == b.split(".", 1)[0]


def host_health(host: str, nodes: Sequence[NodeResult]) -> HostHealth:
    """The causes the results of ``host`` show, worst first."""
    mine = [n for n in nodes if host and _same_host(n.node, host)]
    causes: list[tuple[int, str]] = []
    for n in mine:
        if n.state == "unknown":
            causes.append((SEVERITY_ORDER["error"], f"its {n.kind} could not run: {n.reason or n.path}"))
        for f in n.findings:
            if SEVERITY_ORDER.get(f.severity, 0) >= SEVERITY_ORDER[CAUSE_LEVEL]:
                causes.append((SEVERITY_ORDER[f.severity], f"{f.code} {f.severity} {f.subject}: {f.message}"))
        if n.state == "unhealthy" and not n.findings:
            causes.append((SEVERITY_ORDER["error"], f"its {n.kind} failed: {n.reason or n.path}"))
    ordered = tuple(dict.fromkeys(text for _, text in sorted(causes, key=lambda c: -c[0])))
    return HostHealth(host, tuple(n.path for n in mine), ordered, bool(mine) and not ordered)
