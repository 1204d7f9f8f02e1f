"""``topodoctor.check(host)``: the rules on a scanned host, judged as ``topodoctor check`` judges
it (the same service, fail level, scope and exit code), as a ``Report``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from topodoctor.api.host import DEFAULT_TIMEOUT_S, Host, probed
from topodoctor.core.budget import Budget, parse_timeout
from topodoctor.core.errors import InputError
from topodoctor.model.findings import Finding, Severity, failing
from topodoctor.model.outcome import Outcome
from topodoctor.report.check import check_json, one_line
from topodoctor.service.check import CheckOptions, judge

Scope = Literal["auto", "job", "node"]


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
    _outcome: Outcome

    @property
    def failing(self) -> tuple[Finding, ...]:
        """The findings at or above the fail level: the ones that make the host unhealthy."""
        return failing(self.findings, self.fail_level)

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
    fail_level: Severity = "error",
    prolog: bool = False,
    scope: Scope = "auto",
    expect: str | os.PathLike[str] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Report:
    """Judge ``host`` (from ``scan``) as ``topodoctor check`` would with the same options:
    ``select`` / ``ignore`` rule codes, prefixes or names; ``fail_level`` (``"warning"`` is
    ``--strict``); ``prolog`` (the fast subset, judged as gating a job); ``scope`` (``"job"``: the
    GPUs this process's environment names); ``expect`` (an expectations file); ``baseline`` (an
    earlier snapshot of this node). Raises ``InputError`` for a bad option or an unreadable
    baseline; an unusable expectations file is judged without, exit 2, as the command does."""
    found, source = probed(host)
    if fail_level not in get_args(Severity):
        raise InputError(f"fail_level must be one of {', '.join(get_args(Severity))}, not {fail_level!r}")
    if scope not in get_args(Scope):
        raise InputError(f"scope must be one of {', '.join(get_args(Scope))}, not {scope!r}")
    options = CheckOptions(
        source=source,
        timeout_s=parse_timeout(timeout),
        select=_names(select, "select"),
        ignore=_names(ignore, "ignore"),
        tags=("prolog",) if prolog else (),
        fail_level=fail_level,
        expect=None if expect is None else Path(expect),
        scope=scope,
        baseline=None if baseline is None else Path(baseline),
    )
    outcome = judge(found, options, Budget.start(options.timeout_s))
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
    """Rule patterns as the command line reads them: each value, split at commas (``"TD1,TD3"``);
    one string is one value, never its letters."""
    items = [values] if isinstance(values, str) else list(values)
    if not all(isinstance(v, str) for v in items):
        raise InputError(f"{what} takes rule codes, prefixes or names (strings)")
    return tuple(p.strip() for v in items for p in v.split(",") if p.strip())
