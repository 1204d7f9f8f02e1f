"""`topodoctor check` output: text for people, JSON for machines, one line for a drain reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from topodoctor.report.terminal import LINE_LIMIT, literal, printable, truncate, unknown_line
from topodoctor.service.check import Outcome

if TYPE_CHECKING:  # the rules package loads every rule family: not on the path of a could-not-check line
    from topodoctor.rules.registry import Finding

CHECK_SCHEMA_VERSION = 1
_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def counts(findings: Sequence[Finding]) -> str:
    c = Counter(f.severity for f in findings)
    parts = [
        f"{c[s]} {s}" if s == "info" else plural(c[s], s) for s in ("critical", "error", "warning", "info") if c[s]
    ]
    return ", ".join(parts) or "no findings"


def _incomplete(outcome: Outcome) -> str:
    n = len(outcome.incomplete)
    return f"; {plural(n, 'check')} incomplete" if n else ""


def one_line(outcome: Outcome, limit: int = LINE_LIMIT) -> str:
    """A single line fit for `scontrol update nodename=... reason=...`: the worst finding
    first, then how many more fail, and whether some checks could not run."""
    if not outcome.failing:
        line = f"topodoctor OK: {plural(outcome.meta.gpus, 'GPU')}, {counts(outcome.findings)}{_incomplete(outcome)}"
    else:
        first, rest = outcome.failing[0], outcome.failing[1:]
        more = f" (+{len(rest)} more: {counts(rest)})" if rest else ""
        line = f"topodoctor FAIL {first.code} {first.subject}: {first.message}{more}{_incomplete(outcome)}"
    return truncate(printable(line), limit)


def print_check(outcome: Outcome, console: Console) -> None:
    meta = outcome.meta
    measured = f", measured: {', '.join(meta.measured)}" if meta.measured else ""
    console.print(
        literal(f"topodoctor check: {meta.origin}, {plural(meta.gpus, 'GPU')}, {meta.elapsed_s:.2f} s{measured}")
    )
    if meta.scope:
        others = meta.findings_outside_scope
        about = f"; {plural(others, 'finding')} about other GPUs not shown" if others else ""
        console.print(literal(f"scope: {meta.scope}{about}"))
    if outcome.findings:
        t = Table()
        t.add_column("code", no_wrap=True)
        t.add_column("severity", no_wrap=True)
        t.add_column("subject", no_wrap=True)  # bus ids and link names are never cut
        t.add_column("finding", ratio=1, overflow="fold")
        for f in outcome.findings:
            t.add_row(f.code, literal(f.severity, _STYLE[f.severity]), literal(f.subject), literal(f.message))
        console.print(t)
        seen = set()
        for f in outcome.findings:
            if f.code not in seen:
                seen.add(f.code)
                # Wrapped at word boundaries, continuation lines indented under the hint.
                console.print(Padding(literal(f"{f.code} {f.name}: {f.fix}"), (0, 0, 0, 2), expand=False))
    style = "bold red" if outcome.failing else "green"
    summary = Text(outcome.verdict.upper(), style=style)
    summary.append(printable(f": {counts(outcome.findings)}{_incomplete(outcome)} (fail level: {outcome.fail_level})"))
    console.print(summary)


def could_not_check_json(reason: str, exit_code: int) -> dict[str, Any]:
    return {
        "kind": "check",
        "schema_version": CHECK_SCHEMA_VERSION,
        "verdict": "unknown",
        "exit_code": exit_code,
        "reason": unknown_line(reason),
        "findings": [],
    }


def check_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "kind": "check",
        "schema_version": CHECK_SCHEMA_VERSION,
        "verdict": outcome.verdict,
        "exit_code": outcome.exit_code,
        "fail_level": outcome.fail_level,
        "reason": one_line(outcome),
        **asdict(outcome.meta),
        "bandwidth": "bandwidth" in outcome.meta.measured,
        "summary": dict(Counter(f.severity for f in outcome.findings)),
        "incomplete": len(outcome.incomplete),
        "findings": [asdict(f) for f in outcome.findings],
    }
