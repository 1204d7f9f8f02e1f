"""`topodoctor check` output: text for people, JSON for machines, one line for a drain reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from topodoctor.rules.registry import SEVERITY_ORDER, Finding

CHECK_SCHEMA_VERSION = 1
_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


def verdict(findings: list[Finding], fail_level: str) -> tuple[str, int]:
    bad = [f for f in findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[fail_level]]
    return ("unhealthy", 1) if bad else ("healthy", 0)


def _counts(findings: list[Finding]) -> str:
    c = Counter(f.severity for f in findings)
    parts = [
        f"{c[s]} {s}{'s' if c[s] != 1 and s != 'info' else ''}"
        for s in ("critical", "error", "warning", "info")
        if c[s]
    ]
    return ", ".join(parts) or "no findings"


def one_line(findings: list[Finding], fail_level: str, gpus: int, limit: int = 200) -> str:
    """A single line fit for `scontrol update nodename=... reason=...`: worst finding first."""
    state, _ = verdict(findings, fail_level)
    if state == "healthy":
        return f"topodoctor OK: {gpus} GPUs, {_counts(findings)}"
    bad = [f for f in findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[fail_level]]
    first = bad[0]
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    line = f"topodoctor FAIL {first.code} {first.subject}: {first.message}{more}"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def print_check(findings: list[Finding], fail_level: str, meta: dict[str, Any], console: Console) -> None:
    console.print(f"topodoctor check: {meta['origin']}, {meta['gpus']} GPUs, {meta['elapsed_s']:.2f} s")
    if meta.get("scope"):
        others = meta.get("findings_outside_scope") or 0
        console.print(
            f"scope: {meta['scope']}" + (f"; {others} finding(s) about other GPUs not shown" if others else "")
        )
    if findings:
        t = Table()
        for col in ("code", "severity", "subject", "finding"):
            t.add_column(col)
        for f in findings:
            t.add_row(f.code, f"[{_STYLE[f.severity]}]{f.severity}[/]", f.subject, f.message)
        console.print(t)
        seen = set()
        for f in findings:
            if f.code not in seen:
                seen.add(f.code)
                console.print(f"  {f.code} {f.name}: {f.fix}")
    state, _ = verdict(findings, fail_level)
    style = "green" if state == "healthy" else "bold red"
    console.print(f"[{style}]{state.upper()}[/]: {_counts(findings)} (fail level: {fail_level})")


def could_not_check_json(reason: str, exit_code: int) -> dict[str, Any]:
    return {
        "kind": "check",
        "schema_version": CHECK_SCHEMA_VERSION,
        "verdict": "unknown",
        "exit_code": exit_code,
        "reason": f"topodoctor UNKNOWN: {reason}",
        "findings": [],
    }


def check_json(findings: list[Finding], fail_level: str, meta: dict[str, Any]) -> dict[str, Any]:
    state, code = verdict(findings, fail_level)
    return {
        "kind": "check",
        "schema_version": CHECK_SCHEMA_VERSION,
        "verdict": state,
        "exit_code": code,
        "fail_level": fail_level,
        "reason": one_line(findings, fail_level, meta["gpus"]),
        **meta,
        "summary": dict(Counter(f.severity for f in findings)),
        "findings": [asdict(f) for f in findings],
    }
