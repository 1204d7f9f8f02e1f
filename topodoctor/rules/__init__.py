"""The rules engine: every family registers on import; ``evaluate`` runs the selection."""

from __future__ import annotations

from collections.abc import Iterable

from topodoctor.probed import ProbeError
from topodoctor.rules import (  # noqa: F401  (importing a family registers its rules)
    bandwidth,
    collectives,
    collectives_nodes,
    cuda_env,
    expectations,
    fabric,
    gdr,
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
from topodoctor.rules.registry import (
    REGISTRY,
    SEVERITY_ORDER,
    CannotCheck,
    Finding,
    Issue,
    Rule,
    Severity,
    selected,
)

__all__ = ["REGISTRY", "Context", "Environment", "Finding", "Rule", "Severity", "capture_environment", "evaluate"]


def _runnable(r: Rule, ctx: Context) -> bool:
    return ("bandwidth" not in r.needs or ctx.bandwidth is not None) and (
        "expect" not in r.needs or ctx.expect is not None
    )


def evaluate(
    ctx: Context, select: Iterable[str] = (), ignore: Iterable[str] = (), tags: Iterable[str] = ()
) -> list[Finding]:
    """Run the selected rules; findings sorted by severity (worst first), then code and subject."""
    want_tags = set(tags)
    rules = [r for r in selected(select, ignore) if not want_tags or want_tags & r.tags]
    incomplete = REGISTRY["TD901"]
    report_incomplete = incomplete in rules
    out: list[Finding] = []
    for r in rules:
        if not _runnable(r, ctx):
            continue
        for item in r.func(ctx):
            if isinstance(item, CannotCheck):
                if report_incomplete:
                    err = item.error
                    detail = f"{err.error} at {err.call}" if isinstance(err, ProbeError) else str(err)
                    out.append(
                        Finding(
                            incomplete.code,
                            incomplete.name,
                            incomplete.severity,
                            item.subject,
                            f"{r.code} {r.name} could not check {item.subject}: {detail}",
                            incomplete.fix,
                            {"rule": r.code, "error": detail},
                        )
                    )
                continue
            assert isinstance(item, Issue)
            out.append(
                Finding(
                    r.code,
                    r.name,
                    item.severity or r.severity,
                    item.subject,
                    item.message,
                    item.fix or r.fix,
                    item.evidence,
                )
            )
    out.sort(key=lambda f: (-SEVERITY_ORDER[f.severity], f.code, f.subject))
    return out


def worst(findings: list[Finding]) -> Severity | None:
    if not findings:
        return None
    return max(findings, key=lambda f: SEVERITY_ORDER[f.severity]).severity
