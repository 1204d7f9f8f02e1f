"""``topodoctor.check(host)``: the rules on a scanned host, judged as ``topodoctor check`` judges
it (the same service, fail level, scope and exit code), as a ``Report``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from topodoctor.api.host import Host, probed
from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.options import from_keywords
from topodoctor.core.shared_options import FailLevel
from topodoctor.model.findings import Finding, Severity
from topodoctor.model.outcome import CheckOutcome
from topodoctor.report.check import check_json, one_line
from topodoctor.service.check import CheckRequest, judge
from topodoctor.service.request_check import DEFAULT_CHECK_TIMEOUT_S, Scope


@dataclass(frozen=True)
class Report:
    """A check's answer: the findings (worst first), the checks that could not read their input,
    the verdict and the exit code ``topodoctor check`` would end with (0 healthy, 1 unhealthy,
    2 misconfigured, 3 could not check)."""

    findings: tuple[Finding, ...]
    incomplete: tuple[Finding, ...]  # could-not-check findings (TD901), whatever the selection
    verdict: Literal["healthy", "unhealthy", "unknown"]
    exit_code: int
    fail_level: Severity
    reason: str  # the one line of `check -f line` (a drain reason)
    not_measured: tuple[str, ...]
    origin: str
    hostname: str
    _outcome: CheckOutcome

    @property
    def failing(self) -> tuple[Finding, ...]:
        """The findings at or above the fail level: the ones that make the host unhealthy."""
        return self._outcome.failing

    def to_json(self) -> dict[str, Any]:
        """The report as ``check -f json`` prints it (a JSON-able dict)."""
        return check_json(self._outcome)

    def __repr__(self) -> str:
        return f"<Report {self.verdict} (exit {self.exit_code}): {len(self.findings)} findings on {self.hostname!r}>"


def check(
    host: Host,
    *,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    fail_level: FailLevel = "error",
    prolog: bool = False,
    scope: Scope = "auto",
    expect: str | os.PathLike[str] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_CHECK_TIMEOUT_S,
) -> Report:
    """Judge ``host`` (from ``scan``) as ``topodoctor check`` would with the same options:
    ``select`` / ``ignore`` rule codes, prefixes or names; ``fail_level`` (``"warning"`` is
    ``--strict``); ``prolog`` (the fast subset, judged as gating a job); ``scope`` (``"job"``: the
    GPUs this process's environment names); ``expect`` (an expectations file); ``baseline`` (an
    earlier snapshot of this node). Raises ``InputError`` for a bad option or an unreadable
    baseline; an unusable expectations file is judged without, exit 2, as the command does."""
    found, source = probed(host)
    request = from_keywords(
        CheckRequest,
        {
            "replay": source.replay,
            "sysfs_root": source.sysfs_root,
            "select": _names(select, "select"),
            "ignore": _names(ignore, "ignore"),
            "fail_level": fail_level,
            "prolog": prolog,
            "scope": scope,
            "expect": expect,
            "baseline": baseline,
            "timeout": timeout,
        },
    )
    outcome = judge(found, request, Budget.start(request.budget_s))
    return Report(
        outcome.findings,
        outcome.incomplete,
        outcome.verdict,
        outcome.exit_code,
        outcome.fail_level,
        one_line(outcome),
        outcome.not_measured,
        outcome.meta.origin,
        outcome.meta.host,
        outcome,
    )


def _names(values: Iterable[str], what: str) -> tuple[str, ...]:
    """Rule patterns, each a string: one string is one value, never its letters (the spec splits
    them at commas, as the command line's ``--select TD1,TD3``)."""
    items = [values] if isinstance(values, str) else list(values) if isinstance(values, Iterable) else [values]
    if not all(isinstance(v, str) for v in items):
        raise InputError(f"{what} takes rule codes, prefixes or names (strings)")
    return tuple(items)
