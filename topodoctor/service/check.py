"""The service layer: probe, check and measure a host under one wall-clock budget.

Each entry point returns plain outcome objects; the command line only parses arguments and
renders them. The probe (and any measurement pass) runs in a killable child under the
budget; decoding, validation and the rules run here, under the same budget's alarm.
Nothing here prints.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topodoctor.core.budget import Budget, run_with_budget
from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_OK, EXIT_UNHEALTHY, EXIT_USAGE, InputError
from topodoctor.model.findings import failing
from topodoctor.model.outcome import Meta, Outcome
from topodoctor.service.passes import Pass as Pass  # re-exported: every command builds its passes from here
from topodoctor.service.passes import Source as Source
from topodoctor.service.probing import Host as Host  # re-exported, as the probe every command runs
from topodoctor.service.probing import probe as probe

# Everything else is imported where it is used: what this module loads is spent before the
# probe child is forked, and every tenth of a second of it counts against a short --timeout.
if TYPE_CHECKING:
    from topodoctor.model.findings import Finding, Severity
    from topodoctor.rules.context import Context
    from topodoctor.topology.expect import Expectations
    from topodoctor.topology.nccl_topo_lint import TopoProblem
    from topodoctor.topology.scope import Scope


# ----------------------------------------------------------------------------- check


@dataclass(frozen=True)
class CheckOptions:
    """Everything ``check`` needs besides the budget: where the host comes from, which rules, the fail
    level, expectations, measurement passes, scope and baseline."""

    source: Source = field(default_factory=Source)
    timeout_s: float = 30.0
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # ("prolog",) for the fast subset
    fail_level: Severity = "error"
    expect: Path | None = None
    passes: tuple[Pass, ...] = ()  # measurements run after the probe: bandwidth_pass() and others
    scope: str = "auto"  # job | node | auto: the GPUs judged and measured (topodoctor.topology.scope)
    baseline: Path | None = None  # an earlier snapshot of this node: counters judged since then too


def make_context(host: Host, expect: Expectations | None = None) -> Context:
    """The rules' Context: the one place it is built. With no process (a saved result) no
    process is judged: no variables, and no affinity for TD403 to hold against the GPUs."""
    from topodoctor.model.environment import Environment
    from topodoctor.rules.context import Context

    measured = dict(host.measured)
    collectives = measured.pop("collectives", None)
    env = Environment.of(host.process) if host.process is not None else Environment({}, {}, {}, ())
    ctx = Context(
        host.snapshot, env, expect=expect, bandwidth=measured.pop("bandwidth", None), extra=measured, view=host.view
    )
    if collectives is not None:
        from topodoctor.service.collectives import attach

        attach(ctx, collectives)
    return ctx


def job_scope(host: Host, choice: str) -> Scope:
    """The GPUs a check judges: the job's, as the judged process's environment names them."""
    from topodoctor.topology.scope import resolve

    environ = host.process.environ if host.process is not None else {}
    return resolve(host.snapshot, environ, choice)  # type: ignore[arg-type]


def evaluate(
    ctx: Context, select: Sequence[str] = (), ignore: Sequence[str] = (), tags: Sequence[str] = ()
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """(findings, incomplete): the one place that knows the rules engine's answer shape."""
    from topodoctor import rules

    ev = rules.evaluate(ctx, select, ignore, tags)
    return ev.findings, ev.incomplete


@dataclass
class Inputs:
    """The files a check reads besides the host: expectations (or why they could not be used) and a
    baseline snapshot. Read while the probe child works (``check``), or before judging (``judge``)."""

    expect: Expectations | None = None
    baseline: Any = None
    unusable: str | None = None  # why the --expect file could not be used


def read_inputs(options: CheckOptions, budget: Budget) -> Inputs:
    """Load the rules and check ``--select`` / ``--ignore`` (a pattern matching no rule is a usage
    error), then read the expectations and the baseline. An unusable expectations file is kept as
    its reason, not raised (see ``check``)."""
    from topodoctor.rules.registry import check_patterns

    inputs = Inputs()
    check_patterns(options.select + options.ignore)  # imports every rule family
    if options.expect is not None:
        from topodoctor.topology.expect import load_expectations

        try:
            inputs.expect = load_expectations(options.expect, budget)
        except InputError as exc:
            inputs.unusable = str(exc)
    if options.baseline is not None:
        from topodoctor.topology.baseline import load_baseline

        inputs.baseline = load_baseline(options.baseline, budget)
    return inputs


def check(options: CheckOptions, budget: Budget | None = None) -> Outcome:
    """Probe, measure and judge the host within ``options.timeout_s`` (from process start).

    The probe child is forked first; the parent's own work (loading the rules, checking the
    patterns, reading --expect) runs while the child probes, so a short budget is not spent
    before the probe even starts. Everything runs under the budget's alarm.

    An expectations file that is missing or unusable does not stop the check: the host is
    judged without it (peers only), a real fault still fails (exit 1), and a host with none
    answers exit 2, "misconfigured", with the reason, instead of a plain healthy. One bad file
    pushed to every node must neither open the gate on faulty nodes nor drain healthy ones."""
    t0 = time.monotonic()
    budget = budget or Budget.start(options.timeout_s)
    read: list[Inputs] = []
    with budget.guard():
        host = probe(
            options.source,
            budget,
            options.passes,
            environment=True,
            meanwhile=lambda: read.append(read_inputs(options, budget)),
        )
        return judge(host, options, budget, read[0] if read else None, t0)


def judge(
    host: Host,
    options: CheckOptions,
    budget: Budget | None = None,
    inputs: Inputs | None = None,
    started: float | None = None,
) -> Outcome:
    """The verdict on a host already probed (by ``check``, or the Python API's ``scan``): its rules,
    scope, fail level and exit code, decided here for both. ``inputs`` None reads them now."""
    t0 = time.monotonic() if started is None else started
    budget = budget or Budget.start(options.timeout_s)
    with budget.guard():
        if inputs is None:
            inputs = read_inputs(options, budget)
        where = job_scope(host, options.scope)
        ctx = make_context(host, inputs.expect)
        if inputs.baseline is not None:
            ctx.extra["baseline"] = inputs.baseline
        ctx.gates_job = where.kind == "job" or "prolog" in options.tags
        findings, incomplete = evaluate(ctx, options.select, options.ignore, options.tags)
        from topodoctor.topology.scope import within

        mine, others = within(findings, where, host.snapshot)
        findings, incomplete = tuple(mine), tuple(within(incomplete, where, host.snapshot)[0])
    bad = failing(findings, options.fail_level)
    missed = not_measured(options.passes, host)
    meta = Meta(
        host.origin,
        host.snapshot.host.hostname,
        len(host.snapshot.gpus),
        round(time.monotonic() - t0, 3),
        tuple(host.measured),
        where.describe(),
        where.gpus,
        len(others),
        getattr(host.measured.get("bandwidth"), "timings", None),
        where.kind,
        inputs.unusable,
    )
    # A fault found stays exit 1 (drain the node) even when a pass could not run; otherwise a
    # measurement that was asked for and did not happen is "could not check", never a pass.
    # An unusable expectations file with no fault found is "misconfigured" (2), never a pass.
    code = EXIT_UNHEALTHY if bad else EXIT_CANNOT_CHECK if missed else EXIT_USAGE if inputs.unusable else EXIT_OK
    return Outcome(
        findings, incomplete, meta, options.fail_level, code, host.snapshot, missed, host.measured.get("fitness")
    )


def not_measured(passes: Sequence[Pass], host: Host) -> tuple[str, ...]:
    """One reason ("collectives not measured: ...") per pass whose measurement did not happen."""
    out = []
    for p in passes:
        why = p.missed(host.measured.get(p.name)) if p.missed is not None else None
        if why is not None:
            out.append(f"{p.name} not measured: {why}")
    return tuple(out)


# ----------------------------------------------------------------------------- expect


@dataclass(frozen=True)
class Baseline:
    """What ``expect`` writes, and the findings on the host that would make it a bad example to follow."""

    expectations: Expectations
    blocking: tuple[Finding, ...]  # error-level findings: a baseline from this host would bake them in


def baseline(source: Source, budget: Budget, passes: Sequence[Pass] = ()) -> Baseline:
    """Expectations from a host, with the findings that make it a bad baseline. A fitness pass
    among ``passes`` adds the measured figures (what TD714 holds other hosts of the type to)."""
    from topodoctor.topology.expect import from_snapshot, with_fitness

    host = probe(source, budget, passes, environment=True)
    with budget.guard():
        findings, _ = evaluate(make_context(host))
        expectations = from_snapshot(host.snapshot)
        fit = host.measured.get("fitness")
        if fit is not None:
            expectations = with_fitness(expectations, fit)
            if not expectations.fitness:  # asked to measure: a file without the figures would vouch for nothing
                from topodoctor.core.errors import BandwidthUnavailable

                why = "; ".join(fit.errors) or "; ".join(sorted({f.error for f in fit.figures if f.error}))
                raise BandwidthUnavailable(f"no fitness figure measured ({why or 'nothing to measure'})")
        return Baseline(expectations, failing(findings, "error"))


def record(label: str, scrub: bool, sysfs_root: str, budget: Budget) -> tuple[dict[str, Any], int]:
    """Record the live host under the budget; (recording document, GPU count)."""
    from topodoctor.probe.sources import record_host

    def work(deadline: float) -> dict[str, Any]:
        doc, snap = record_host(label, do_scrub=scrub, sysfs_root=sysfs_root)
        return {"doc": doc, "gpus": len(snap.gpus)}

    data = work(budget.deadline) if not budget.limited else run_with_budget(work, budget)
    return data["doc"], int(data["gpus"])


def lint_nccl_topo(host: Host, text: str) -> list[TopoProblem]:
    """An existing NCCL_TOPO_FILE's text, checked against the probed host as NCCL would read it."""
    from topodoctor.topology.nccl_topo_lint import lint_topo_file

    return lint_topo_file(text, host.snapshot, host.view.graph)


def bundled_recordings() -> list[str]:
    """The names of the recordings shipped with topodoctor (``--replay NAME``)."""
    from topodoctor.probe.replay import bundled_names

    return bundled_names()
