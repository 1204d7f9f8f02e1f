"""``topodoctor.diagnose(paths)``: the evidence users bring, read and judged as ``topodoctor
diagnose`` does (the same service, fail level and exit code), as a ``Diagnosis``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.options import from_keywords
from topodoctor.core.shared_options import FailLevel
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding, Severity
from topodoctor.report.diagnose import json_doc, one_line
from topodoctor.service.diagnose import DiagnoseOutcome
from topodoctor.service.diagnose import diagnose as read_and_judge
from topodoctor.service.request_diagnose import DiagnoseRequest


@dataclass(frozen=True)
class Diagnosis:
    """What the evidence showed (``evidence``: every piece read, with its parts), the findings, and the
    exit code ``topodoctor diagnose`` would end with (0 nothing wrong, 1 a problem, 2 an input unread)."""

    evidence: Evidence
    findings: tuple[Finding, ...]
    exit_code: int
    fail_level: Severity
    reason: str  # the one line of `diagnose -f line`
    _outcome: DiagnoseOutcome

    @property
    def failing(self) -> tuple[Finding, ...]:
        """The findings at or above the fail level."""
        return self._outcome.failing

    def to_json(self) -> dict[str, Any]:
        """The diagnosis as ``diagnose -f json`` prints it (a JSON-able dict)."""
        return json_doc(self.evidence, self._outcome)

    def __repr__(self) -> str:
        return f"<Diagnosis exit {self.exit_code}: {len(self.evidence.pieces)} pieces, {len(self.findings)} findings>"


def diagnose(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    fail_level: FailLevel = "error",
    timeout: float = 60.0,
) -> Diagnosis:
    """Read ``paths`` (files, directories, ``"-"`` for standard input; one path or several) as
    ``topodoctor diagnose`` reads them, and judge what they show. Raises ``InputError`` (exit 2) when no
    input holds a kind it reads, or a file is missing or too large."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not all(isinstance(p, (str, os.PathLike)) for p in items):
        raise InputError("diagnose takes paths (strings or path objects)")
    request = from_keywords(DiagnoseRequest, {"paths": items, "fail_level": fail_level, "timeout": timeout})
    outcome = read_and_judge(request.paths, Budget.start(request.timeout), request.fails_from)
    return Diagnosis(
        outcome.evidence,
        outcome.findings,
        outcome.exit_code,
        request.fails_from,
        one_line(outcome.evidence, outcome),
        outcome,
    )
