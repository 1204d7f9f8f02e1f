"""`topodoctor check` output for machines: JSON, and one line for a drain reason (the text for
people is report/check_text.py). Nothing here loads a terminal library: a prolog's check prints one line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from topodoctor.core.codec import to_jsonable
from topodoctor.core.text import LINE_LIMIT, plural, printable, truncate, truncate_middle
from topodoctor.model.findings import consequences, finding_json, ident, subject_once
from topodoctor.model.outcome import CheckOutcome
from topodoctor.model.stamp import gpu_ids, readings

if TYPE_CHECKING:  # the rules package loads every rule family: not on the path of a could-not-check line
    from topodoctor.model.findings import Finding

CHECK_SCHEMA_VERSION = 1


def counts(findings: Sequence[Finding]) -> str:
    """Findings counted by severity, worst first: ``1 critical, 2 warnings``, or ``no findings``."""
    c = Counter(f.severity for f in findings)
    parts = [
        f"{c[s]} {s}" if s == "info" else plural(c[s], s) for s in ("critical", "error", "warning", "info") if c[s]
    ]
    return ", ".join(parts) or "no findings"


def incomplete_tail(outcome: CheckOutcome) -> str:
    """``; 2 checks incomplete`` when rules could not read their input, else nothing."""
    n = len(outcome.incomplete)
    return f"; {plural(n, 'check')} incomplete" if n else ""


def _judged(outcome: CheckOutcome) -> str:
    """The GPUs judged: all of them, or the job's few out of the node's."""
    meta = outcome.meta
    if meta.scope_kind != "job":
        return plural(meta.gpus, "GPU")
    ids = ",".join(str(i) for i in meta.scope_gpus) or "none"
    return f"job's {len(meta.scope_gpus)} of {plural(meta.gpus, 'GPU')} ({ids})"


def one_line(outcome: CheckOutcome, limit: int = LINE_LIMIT, after: str = "") -> str:
    """A single line fit for `scontrol update nodename=... reason=...`: the worst finding
    first, then how many more fail, and whether some checks could not run. Too long a line
    loses words from the finding's message, never its code, counts or scope. ``after`` (what
    went wrong beside the verdict: "; cannot write FILE: reason") ends the line within the same
    ``limit``: it gets at most half of it (a long path loses its middle, never the reason), the
    verdict the rest."""
    if after:
        after = truncate_middle(printable(after), limit // 2)
        return _one_line(outcome, limit - len(after)) + after
    return _one_line(outcome, limit)


def _one_line(outcome: CheckOutcome, limit: int) -> str:
    meta = outcome.meta
    if not outcome.failing and outcome.not_measured:
        judged = f"{_judged(outcome)}, {counts(outcome.findings)}"
        line = f"topodoctor UNKNOWN: {'; '.join(outcome.not_measured)} ({judged}{incomplete_tail(outcome)})"
        return truncate(printable(line), limit)
    tail = incomplete_tail(outcome)
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
    tail = (f" (+{len(rest)} more: {counts(rest)}{following(outcome.failing)})" if rest else "") + tail
    message, named = subject_once(first.message, first.subject)
    if named:  # the message names the subject: the head leaves it out, unless the cut would lose it
        line = _fail_line(f"topodoctor FAIL {first.code}: ", message, tail, limit)
        if ident(first.subject) in line:
            return line
    return _fail_line(f"topodoctor FAIL {first.code} {first.subject}: ", message, tail, limit)


def _fail_line(head: str, message: str, tail: str, limit: int) -> str:
    head = printable(head)
    room = limit - len(head) - len(printable(tail))
    if room < 20:  # a subject or tail so long the message has no room: shorten the whole line
        return truncate(printable(f"{head}{message}{tail}"), limit)
    return head + truncate(printable(message), room) + printable(tail)


def following(failing: Sequence[Finding]) -> str:
    """``; 6 follow from TD501``: how many of the failing findings after the first are consequences
    of another (findings/grouped puts every consequence after its cause, so never the first)."""
    after = [f for f in consequences(failing) if f is not failing[0]] if failing else []
    if not after:
        return ""
    codes = ", ".join(dict.fromkeys(c.split(" ", 1)[0] for f in after for c in f.caused_by))
    return f"; {len(after)} {'follows' if len(after) == 1 else 'follow'} from {codes}"


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


def check_json(outcome: CheckOutcome) -> dict[str, Any]:
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
        "findings": [finding_json(f) for f in outcome.findings],
        **({"fitness": fitness_json(outcome.fitness, outcome.snapshot)} if outcome.fitness is not None else {}),
        **_stamp(outcome),
    }


def _stamp(outcome: CheckOutcome) -> dict[str, Any]:
    """measured_at, node, and the GPUs and counters of the judged snapshot (model/stamp.py)."""
    snap = outcome.snapshot
    return {
        "measured_at": outcome.measured_at,
        "node": outcome.node,
        "gpu_ids": [asdict(g) for g in gpu_ids(snap)] if snap is not None else [],
        "counters": [asdict(r) for r in readings(snap)] if snap is not None else [],
    }


def fitness_json(result: Any, snapshot: Any = None) -> dict[str, Any]:
    """The fitness result as measured, with each figure's median and spread beside its samples,
    and the node type (for the fleet roll-up, which compares nodes of one type)."""
    doc: dict[str, Any] = to_jsonable(result)
    if snapshot is not None:
        from topodoctor.fleet.parse import node_type  # the fleet's reader: only a fitness result names its type

        doc["node_type"] = asdict(node_type(snapshot))
    for f, raw in zip(result.figures, doc["figures"]):
        if f.value is not None:
            raw["median"], raw["spread_pct"] = round(f.value.median, 3), round(f.value.spread_pct, 2)
    return doc
