"""The rules engine: every family registers on import; ``evaluate`` runs the selection."""

from __future__ import annotations

from collections.abc import Iterable

from topodoctor.core.probed import ProbeError
from topodoctor.rules import (  # noqa: F401  (importing a family registers its rules)
    bandwidth,
    collectives,
    collectives_nodes,
    cuda_env,
    expectations,
    fabric,
    gdr,
    kernel,
    nccl_env,
    nccl_net,
    nccl_topo_file,
    numa,
    nvlink,
    p2p,
    pcie,
    probe,
)
from topodoctor.rules.context import Context, Environment, capture_environment
from topodoctor.rules.probe import probe_failures
from topodoctor.rules.registry import (
    REGISTRY,
    SEVERITY_ORDER,
    Evaluation,
    Finding,
    Rule,
    Severity,
    selected,
)

__all__ = [
    "REGISTRY",
    "Context",
    "Environment",
    "Evaluation",
    "Finding",
    "Rule",
    "Severity",
    "capture_environment",
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


def evaluate(
    ctx: Context, select: Iterable[str] = (), ignore: Iterable[str] = (), tags: Iterable[str] = ()
) -> Evaluation:
    """Run the selected rules; findings sorted by severity (worst first), then code and subject.

    Every input a rule could not read becomes one could-not-check finding (TD901) per
    subject, field and error, naming the rules it stopped; every other field that failed to
    probe becomes one at info. They are in ``incomplete`` always, and in ``findings`` when
    TD901 is selected.
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
                )
            )
        for u in ctx.unchecked:
            stopped.setdefault((u.subject, u.field, u.error), [])
            if r not in stopped[(u.subject, u.field, u.error)]:
                stopped[(u.subject, u.field, u.error)].append(r)
    ctx.unchecked = []
    incomplete: list[Finding] = []
    for (subject, what, err), by in stopped.items():
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
    incomplete.sort(key=_order)
    if td901 in rules:
        findings += incomplete
    findings.sort(key=_order)
    return Evaluation(tuple(findings), tuple(incomplete))


def worst(findings: Iterable[Finding]) -> Severity | None:
    findings = list(findings)
    if not findings:
        return None
    return max(findings, key=lambda f: SEVERITY_ORDER[f.severity]).severity
