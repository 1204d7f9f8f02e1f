"""`topodoctor diagnose` output: text (what was read, piece by piece, with what was cut, then the
findings), JSON (the evidence and the findings), and one line."""

from __future__ import annotations

from collections import Counter
from typing import Any

from topodoctor.core.codec import to_jsonable
from topodoctor.core.text import LINE_LIMIT, plural, printable, truncate
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import SEVERITY_ORDER, finding_json
from topodoctor.model.outcome import CommandOutcome
from topodoctor.report.check import counts

DIAGNOSE_SCHEMA_VERSION = 1
READ_CODE = "TD980"  # the finding that says what a piece showed: the text lists pieces itself


def text(ev: Evidence, outcome: CommandOutcome) -> str:
    """For people: each piece read (kind, source and lines, version, what was cut), then the findings
    worst first."""
    out = [f"Read {plural(len(ev.pieces), 'piece')} of evidence:"]
    for p in ev.pieces:
        where = f"{p.source}:{p.first_line}-{p.last_line}"
        version = f" {p.version}" if p.version else ""
        out.append(f"  {p.kind}{version}  {where}")
        if p.cut:
            out.append(f"    cut: {p.cut}")
    if ev.driver_version or ev.cuda_version:
        out.append(f"  driver {ev.driver_version or '?'}, CUDA {ev.cuda_version or '?'}")
    for why in ev.unreadable:
        out.append(f"  not read: {why}")
    judged = [f for f in outcome.findings if f.code != READ_CODE]
    judged.sort(key=lambda f: -SEVERITY_ORDER[f.severity])
    out.append("")
    out.append(f"Findings: {counts(judged)}" if judged else "Findings: none beyond what was read")
    for f in judged:
        out.append(f"  {f.severity.upper():8} {f.code} {f.subject}: {f.message}")
        if f.fix:
            out.append(f"           fix: {f.fix}")
    return "\n".join(printable(line) for line in out) + "\n"


def json_doc(ev: Evidence, outcome: CommandOutcome) -> dict[str, Any]:
    """For machines: the evidence as read, the findings, and the exit code."""
    return {
        "kind": "diagnose",
        "schema_version": DIAGNOSE_SCHEMA_VERSION,
        "evidence": to_jsonable(ev),
        "findings": [finding_json(f) for f in outcome.findings],
        "exit_code": outcome.exit_code,
    }


def could_not_read_json(reason: str, exit_code: int) -> dict[str, Any]:
    """For machines, when nothing could be judged (no input of a kind it reads, the budget spent): the
    reason and the exit code, no evidence and no findings."""
    return {
        "kind": "diagnose",
        "schema_version": DIAGNOSE_SCHEMA_VERSION,
        "verdict": "unknown",
        "reason": printable(reason),
        "evidence": None,
        "findings": [],
        "exit_code": exit_code,
    }


def one_line(ev: Evidence, outcome: CommandOutcome, limit: int = LINE_LIMIT) -> str:
    """One line: OK / FAIL / UNKNOWN, the worst finding first, what was read."""
    kinds = Counter(p.kind for p in ev.pieces)
    read = ", ".join(f"{n} {k}" if n > 1 else k for k, n in kinds.items())
    failing = outcome.failing
    if failing:
        first = failing[0]
        more = f" (+{len(failing) - 1} more)" if len(failing) > 1 else ""
        return truncate(
            printable(f"topodoctor FAIL {first.code} {first.subject}: {first.message}{more}; read {read}"), limit
        )
    if outcome.unusable:
        return truncate(printable(f"topodoctor UNKNOWN: {'; '.join(outcome.unusable)}; read {read}"), limit)
    judged = [f for f in outcome.findings if f.code != READ_CODE]
    return truncate(printable(f"topodoctor OK: {counts(judged)}; read {read}"), limit)
