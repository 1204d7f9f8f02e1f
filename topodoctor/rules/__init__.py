"""The rules engine: every family registers on import; ``evaluate`` runs the selection."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from topodoctor.core.probed import ProbeError
from topodoctor.diagnosis.symptoms import SYMPTOMS
from topodoctor.model.findings import SEVERITY_ORDER, Finding, Severity, grouped, ref
from topodoctor.model.fitness import NOT_RECORDED
from topodoctor.rules import (  # noqa: F401  (importing a family registers its rules)
    bandwidth,
    bandwidth_sm,
    collectives,
    collectives_model,
    collectives_nodes,
    collectives_runs,
    cuda_env,
    data_path,
    diagnose,
    expectations,
    fabric,
    fitness,
    fitness_measured,
    gdr,
    kernel,
    nccl_env,
    nccl_names,
    nccl_net,
    nccl_topo_file,
    nccl_values,
    nic_ports,
    numa,
    nvlink,
    p2p,
    pcie,
    pcie_errors,
    probe,
)
from topodoctor.rules.context import Context, Environment
from topodoctor.rules.probe import probe_failures
from topodoctor.rules.registry import REGISTRY, Evaluation, Rule, selected

if TYPE_CHECKING:
    from topodoctor.diagnosis.explain import Case

__all__ = [
    "REGISTRY",
    "Context",
    "Environment",
    "Evaluation",
    "Finding",
    "Rule",
    "Severity",
    "case_of",
    "evaluate",
]


def _runnable(r: Rule, ctx: Context) -> bool:
    return ("bandwidth" not in r.needs or ctx.bandwidth is not None) and (
        "expect" not in r.needs or ctx.expect is not None
    )


def _order(f: Finding) -> tuple[int, str, str]:
    return (-SEVERITY_ORDER[f.severity], f.code, f.subject)


def _detail(err: ProbeError) -> str:
    return f"{err.error} at {err.call}"


class _NotRecorded:
    """Inputs a replayed recording never answered because an older topodoctor made it: one
    finding for the whole recording, naming every call it lacks and the checks they stopped;
    none when no selected check needed any of them (a collectives judgement of an old host).
    Info, not warning: nothing is wrong with the host, the recording predates the question."""

    def __init__(self) -> None:
        self.calls: dict[str, None] = {}
        self.subjects: dict[str, None] = {}
        self.rules: dict[str, Rule] = {}

    def add(self, subject: str, err: ProbeError, by: list[Rule]) -> None:
        """``err`` at ``subject`` stopped the rules ``by``."""
        self.calls[err.call] = None
        self.subjects[subject] = None
        self.rules.update((r.code, r) for r in by)

    def findings(self, td901: Rule) -> list[Finding]:
        if not self.rules:
            return []
        calls = sorted(self.calls)
        message = (
            f"recording made before topodoctor read {_areas(calls)} ({len(calls)} reads, in the evidence); "
            f"not judged on {_runs(list(self.subjects), 'GPU')}: {_runs(sorted(self.rules), 'TD')}"
        )
        evidence = {"error": NOT_RECORDED, "calls": calls, "subjects": list(self.subjects), "rules": sorted(self.rules),
                    "names": {code: r.name for code, r in sorted(self.rules.items())}}  # fmt: skip
        fix = "Record the host again with this topodoctor (topodoctor record) to check what the old recording lacks."
        return [Finding(td901.code, td901.name, "info", "recording", message, fix, evidence)]


# What each read an old recording lacks is about, for the one line that names them; the evidence lists
# every call. First match wins.
_AREAS = (
    ("EventReasons", "clock-event reasons"),
    ("Clock", "clocks"),
    ("Power", "power"),
    ("Temperature", "temperatures"),
    ("Violation", "slowdown time"),
    ("FieldValues", "counters"),
    ("MemoryBusWidth", "memory bus width"),
    ("PerformanceState", "performance state"),
    ("uptime", "uptime"),
)


def _areas(calls: list[str]) -> str:
    """The areas of ``calls``, in words: ``clocks, power, counters``."""
    out = [next((area for key, area in _AREAS if key in call), call.partition("[")[0]) for call in calls]
    return ", ".join(dict.fromkeys(out))


def _runs(items: list[str], prefix: str) -> str:
    """``GPU0, GPU1, GPU2`` as ``GPU0-GPU2`` and ``TD530, TD531, TD532`` as ``TD530-TD532``: runs of
    consecutive numbers after ``prefix`` joined; anything else listed as it is."""
    nums = [int(x[len(prefix) :]) for x in items if x.startswith(prefix) and x[len(prefix) :].isdigit()]
    if len(nums) != len(items):
        return ", ".join(items)
    width = len(items[0]) - len(prefix) if prefix == "TD" else 0
    parts, start = [], 0
    for k in range(1, len(nums) + 1):
        if k == len(nums) or nums[k] != nums[k - 1] + 1:
            lo, hi = (f"{prefix}{n:0{width}d}" for n in (nums[start], nums[k - 1]))
            parts.append(lo if start == k - 1 else f"{lo}-{hi}" if k - start > 2 else f"{lo}, {hi}")
            start = k
    return ", ".join(parts)


def evaluate(
    ctx: Context, select: Iterable[str] = (), ignore: Iterable[str] = (), tags: Iterable[str] = ()
) -> Evaluation:
    """Run the selected rules; findings sorted by severity (worst first), then code and subject.

    Every input a rule could not read becomes one could-not-check finding (TD901) per
    subject, field and error, naming the rules it stopped; every other field that failed to
    probe becomes one at info. Inputs an older recording does not hold ("not recorded")
    become one finding at info, naming the calls, when a selected rule needed them. They are
    in ``incomplete`` always, and in ``findings`` when TD901 is selected.
    """
    want_tags = set(tags)
    rules = [r for r in selected(select, ignore) if not want_tags or want_tags & r.tags]
    td901 = REGISTRY["TD901"]
    findings: list[Finding] = []
    stopped: dict[tuple[str, str, ProbeError], list[Rule]] = {}
    for r in rules:
        if not _runnable(r, ctx):
            continue
        ctx.unchecked = []
        for item in r.func(ctx):
            findings.append(
                Finding(
                    r.code,
                    r.name,
                    r.raised(item),
                    item.subject,
                    item.message,
                    item.fix or r.fix,
                    item.evidence,
                    caused_by=item.caused_by,
                )
            )
        for u in ctx.unchecked:
            stopped.setdefault((u.subject, u.field, u.error), [])
            if r not in stopped[(u.subject, u.field, u.error)]:
                stopped[(u.subject, u.field, u.error)].append(r)
    ctx.unchecked = []
    incomplete: list[Finding] = []
    unrecorded = _NotRecorded()
    for (subject, what, err), by in stopped.items():
        if err.error == NOT_RECORDED:
            unrecorded.add(subject, err, by)
            continue
        names = ", ".join(f"{r.code} {r.name}" for r in by)
        incomplete.append(
            Finding(
                td901.code,
                td901.name,
                td901.severity,
                subject,
                f"could not check {subject}: {what} unreadable ({_detail(err)}); not checked: {names}",
                td901.fix,
                {"field": what, "error": err.error, "call": err.call, "rules": [r.code for r in by]},
            )
        )
    seen = {(subject, err) for subject, _, err in stopped}
    for subject, what, err in probe_failures(ctx.snap):
        if (subject, err) in seen:
            continue
        seen.add((subject, err))
        if err.error == NOT_RECORDED:
            # Not a failure of the probe: named in the one note, if a selected check needed
            # something the recording lacks; a field no check needs is simply not there.
            unrecorded.add(subject, err, [])
            continue
        incomplete.append(
            Finding(
                td901.code,
                td901.name,
                "info",
                subject,
                f"the probe could not read {subject} {what} ({_detail(err)}); no selected check uses it",
                td901.fix,
                {"field": what, "error": err.error, "call": err.call, "rules": []},
            )
        )
    incomplete += unrecorded.findings(td901)
    incomplete.sort(key=_order)
    if any(f.code in SYMPTOMS for f in findings):
        # The cause engine loads only where a symptom was found: a static check has none.
        from topodoctor.diagnosis.explain import explain  # the cause engine: only where a symptom was found

        findings = list(explain(findings, case_of(ctx)))
    if td901 in rules:
        findings += incomplete
    findings.sort(key=_order)
    return Evaluation(grouped(_linked(findings)), tuple(incomplete))


_GPUS = re.compile(r"GPU(\d+)")


def _linked(findings: list[Finding]) -> list[Finding]:
    """Each finding's candidate cause codes (``Issue.caused_by``) resolved to the findings of
    those codes about its GPUs, some of them, or the whole host (a subject naming no GPU):
    TD306 GPU0-GPU1 follows from TD501 GPU0, and from TD305 host."""
    out = []
    for f in findings:
        if not f.caused_by:
            out.append(f)
            continue
        mine = set(_GPUS.findall(f.subject))
        by = tuple(
            ref(c) for c in findings if c.code in f.caused_by and c is not f and set(_GPUS.findall(c.subject)) <= mine
        )
        out.append(replace(f, caused_by=by))
    return out


def case_of(ctx: Context) -> Case:
    """What the cause engine joins with the findings: the host and every result the check holds."""
    from topodoctor.diagnosis.explain import Case  # with the engine, where a symptom was found

    return Case(ctx.snap, ctx.collectives, ctx.bandwidth, ctx.fitness)


def worst(findings: Iterable[Finding]) -> Severity | None:
    """The highest severity among the findings, or None when there are none."""
    findings = list(findings)
    if not findings:
        return None
    return max(findings, key=lambda f: SEVERITY_ORDER[f.severity]).severity
