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

from topodoctor.core.text import plural
from topodoctor.model.outcome import Outcome
from topodoctor.report.terminal import LINE_LIMIT, literal, printable, truncate

if TYPE_CHECKING:  # the rules package loads every rule family: not on the path of a could-not-check line
    from topodoctor.model.findings import Finding

CHECK_SCHEMA_VERSION = 1
_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


def counts(findings: Sequence[Finding]) -> str:
    """Findings counted by severity, worst first: ``1 critical, 2 warnings``, or ``no findings``."""
    c = Counter(f.severity for f in findings)
    parts = [
        f"{c[s]} {s}" if s == "info" else plural(c[s], s) for s in ("critical", "error", "warning", "info") if c[s]
    ]
    return ", ".join(parts) or "no findings"


def _incomplete(outcome: Outcome) -> str:
    n = len(outcome.incomplete)
    return f"; {plural(n, 'check')} incomplete" if n else ""


def _judged(outcome: Outcome) -> str:
    """The GPUs judged: all of them, or the job's few out of the node's."""
    meta = outcome.meta
    if meta.scope_kind != "job":
        return plural(meta.gpus, "GPU")
    ids = ",".join(str(i) for i in meta.scope_gpus) or "none"
    return f"job's {len(meta.scope_gpus)} of {plural(meta.gpus, 'GPU')} ({ids})"


def one_line(outcome: Outcome, limit: int = LINE_LIMIT) -> str:
    """A single line fit for `scontrol update nodename=... reason=...`: the worst finding
    first, then how many more fail, and whether some checks could not run. Too long a line
    loses words from the finding's message, never its code, counts or scope."""
    meta = outcome.meta
    if not outcome.failing and outcome.not_measured:
        judged = f"{_judged(outcome)}, {counts(outcome.findings)}"
        line = f"topodoctor UNKNOWN: {'; '.join(outcome.not_measured)} ({judged}{_incomplete(outcome)})"
        return truncate(printable(line), limit)
    tail = _incomplete(outcome)
    if meta.scope_kind == "job" and outcome.failing:
        tail += f"; judged the {_judged(outcome)}"
    if meta.expectations_unused is not None and outcome.failing:
        tail += "; judged without the expectations file (unusable)"
    if not outcome.failing:
        verdict = printable(f"{_judged(outcome)}, {counts(outcome.findings)}{tail}")
        if meta.expectations_unused is None:
            return truncate(f"topodoctor OK: {verdict}", limit)
        # Exit 2: the node passed, but not against its type; the file's trouble may be shortened.
        head, why = "topodoctor UNKNOWN: expectations not used: ", printable(meta.expectations_unused)
        return head + truncate(why, max(20, limit - len(head) - len(verdict) - 14)) + f"; without it: {verdict}"
    first, rest = outcome.failing[0], outcome.failing[1:]
    tail = (f" (+{len(rest)} more: {counts(rest)})" if rest else "") + tail
    head = printable(f"topodoctor FAIL {first.code} {first.subject}: ")
    room = limit - len(head) - len(printable(tail))
    if room < 20:  # a subject or tail so long the message has no room: shorten the whole line
        return truncate(printable(f"{head}{first.message}{tail}"), limit)
    return head + truncate(printable(first.message), room) + printable(tail)


def print_check(outcome: Outcome, console: Console) -> None:
    """The check as text: what was judged, the findings and their fixes, the fitness figures where
    measured, and the verdict line."""
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
    if outcome.fitness is not None:
        from topodoctor.report.fitness import print_fitness

        print_fitness(outcome.fitness, console)
    style = "bold red" if outcome.failing else "yellow" if outcome.not_measured else "green"
    summary = Text(outcome.verdict.upper(), style=style)
    missed = "".join(f"; {why}" for why in outcome.not_measured)
    summary.append(
        printable(f": {counts(outcome.findings)}{_incomplete(outcome)}{missed} (fail level: {outcome.fail_level})")
    )
    console.print(summary)


def could_not_check_json(reason: str, exit_code: int) -> dict[str, Any]:
    """The JSON document of a check that could not run: verdict unknown, the reason, no findings."""
    return {
        "kind": "check",
        "schema_version": CHECK_SCHEMA_VERSION,
        "verdict": "unknown",
        "exit_code": exit_code,
        "reason": printable(f"topodoctor UNKNOWN: {reason}"),  # whole: JSON has room, a line does not
        "findings": [],
    }


def check_json(outcome: Outcome) -> dict[str, Any]:
    """The check as ``--format json`` prints it: verdict, exit code, reason, run metadata and findings."""
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
        "not_measured": list(outcome.not_measured),
        "findings": [asdict(f) for f in outcome.findings],
        **({"fitness": fitness_json(outcome.fitness, outcome.snapshot)} if outcome.fitness is not None else {}),
    }


def fitness_json(result: Any, snapshot: Any = None) -> dict[str, Any]:
    """The fitness result as measured, with each figure's median and spread beside its samples,
    and the node type (for the fleet roll-up, which compares nodes of one type)."""
    from topodoctor.core.codec import to_jsonable

    doc: dict[str, Any] = to_jsonable(result)
    if snapshot is not None:
        from topodoctor.fleet.inputs import node_type

        doc["node_type"] = asdict(node_type(snapshot))
    for f, raw in zip(result.figures, doc["figures"]):
        if f.value is not None:
            raw["median"], raw["spread_pct"] = round(f.value.median, 3), round(f.value.spread_pct, 2)
    return doc
