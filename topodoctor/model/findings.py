"""Findings as they leave the rules: plain data that reports, metrics and the fleet roll-up read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["info", "warning", "error", "critical"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "warning": 1, "error": 2, "critical": 3}


@dataclass(frozen=True)
class Finding:
    """One thing a rule found: its stable code and name, how bad, about what, and what to do."""

    code: str
    name: str
    severity: Severity
    subject: str
    message: str
    fix: str
    evidence: dict[str, Any]


def failing(findings: Sequence[Finding], fail_level: str) -> tuple[Finding, ...]:
    """The findings at or above the fail level: the ones that make a check unhealthy."""
    return tuple(f for f in findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[fail_level])
