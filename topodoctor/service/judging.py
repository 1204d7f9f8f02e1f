"""The rules' view of a probed host and the rules engine's answer: the one place the ``Context`` is
built from what a command probed and measured, and the one place that reads the engine's answer.
Every command that judges a host (check, bandwidth, expect) goes through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from topodoctor import rules
from topodoctor.model.environment import Environment
from topodoctor.rules.context import Context
from topodoctor.rules.one_cause import one_per_setting
from topodoctor.service.host import ProbedHost

if TYPE_CHECKING:
    from topodoctor.model.findings import Finding
    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.topology.expect import Expectations


def make_context(host: ProbedHost, expect: Expectations | None = None, baseline: HostSnapshot | None = None) -> Context:
    """The rules' Context: the one place it is built. With no process (a saved result) no
    process is judged: no variables, and no affinity for TD403 to hold against the GPUs."""
    measured = host.measured
    answer = measured.get("collectives")  # the quick pass's answer (service/collectives.py QuickAnswer)
    why = host.missed.get("collectives")
    if answer is not None and answer.result is None:
        why = answer.error or "unknown"
    env = Environment.of(host.process) if host.process is not None else Environment({}, {}, {}, ())
    return Context(
        host.snapshot,
        env,
        expect=expect,
        bandwidth=measured.get("bandwidth"),
        view=host.view,
        fitness=measured.get("fitness"),
        baseline=baseline,
        collectives=answer.result if answer is not None else None,
        # why there is none (TD005 says it could not check): the pass's own word, or its error
        collectives_error=why,
    )


def evaluate(
    ctx: Context, select: Sequence[str] = (), ignore: Sequence[str] = (), tags: Sequence[str] = ()
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """(findings, incomplete): the one place that knows the rules engine's answer shape; the
    findings one NCCL setting explains are one (rules/one_cause.py)."""
    ev = rules.evaluate(ctx, select, ignore, tags)
    return tuple(one_per_setting(ev.findings)), ev.incomplete
