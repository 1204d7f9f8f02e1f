"""Findings as they leave the rules: plain data that reports, metrics and the fleet roll-up read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, cast

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


class Judged(Protocol):
    """Anything with a severity: a rule's finding, a job's, an NCCL log's."""

    @property
    def severity(self) -> Severity:
        """How bad: info, warning, error or critical."""
        ...


J = TypeVar("J", bound=Judged)


def fail_from(level: str, strict: bool) -> Severity:
    """The severity from which a finding fails a command (``--fail-level``, ``--strict``): every
    command decides it here."""
    return "warning" if strict else cast("Severity", level)


def failing(findings: Sequence[J], fail_level: str) -> tuple[J, ...]:
    """The findings at or above the fail level: the ones that make a command exit 1."""
    return tuple(f for f in findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[fail_level])
