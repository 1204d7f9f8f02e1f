"""The service layer: probe, check and measure a host under one wall-clock budget.

Each entry point returns plain outcome objects; the command line only parses arguments and
renders them. The probe (and any measurement pass) runs in a killable child under the
budget; decoding, validation and the rules run here, under the same budget's alarm.
Nothing here prints.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from topodoctor.core.budget import Budget
from topodoctor.core.errors import BandwidthUnavailable, InputError
from topodoctor.core.text import plural
from topodoctor.model.findings import failing
from topodoctor.model.outcome import CheckOutcome, CommandOutcome, Meta
from topodoctor.model.stamp import node_name, utc_iso
from topodoctor.rules.registry import check_patterns
from topodoctor.service.host import ProbedHost as ProbedHost  # re-exported, as the probe every command runs
from topodoctor.service.judging import evaluate, make_context
from topodoctor.service.passes import Pass as Pass  # re-exported: every command builds its passes from here
from topodoctor.service.passes import Source as Source
from topodoctor.service.probing import probe as probe
from topodoctor.service.request_check import CheckRequest as CheckRequest  # re-exported: what a check runs
from topodoctor.topology.baseline import load_baseline
from topodoctor.topology.expect import from_snapshot, load_expectations, with_fitness
from topodoctor.topology.scope import asked_label, resolve, within

if TYPE_CHECKING:
    from topodoctor.model.findings import Finding
    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.topology.expect import Expectations
    from topodoctor.topology.scope import Scope


# ----------------------------------------------------------------------------- check


def job_scope(host: ProbedHost, choice: str) -> Scope:
    """The GPUs a check judges: the job's, as the judged process's environment names them."""
    environ = host.process.environ if host.process is not None else {}
    return resolve(host.snapshot, environ, choice)  # type: ignore[arg-type]


def unseen_scope(choice: str, environ: Mapping[str, str]) -> str:
    """The metrics' ``scope`` label of a check that never saw the GPUs (it could not check):
    the job's where the check runs for one, as a check that saw them would say."""
    return asked_label(environ, choice)  # type: ignore[arg-type]


@dataclass
class Inputs:
    """The files a check reads besides the host: expectations (or why they could not be used) and a
    baseline snapshot. Read while the probe child works (``check``), or before judging (``judge``)."""

    expect: Expectations | None = None
    baseline: HostSnapshot | None = None
    unusable: str | None = None  # why the --expect file could not be used


def read_inputs(request: CheckRequest, budget: Budget) -> Inputs:
    """Load the rules and check ``--select`` / ``--ignore`` (a pattern matching no rule is a usage
    error), then read the expectations and the baseline. An unusable expectations file is kept as
    its reason, not raised (see ``check``)."""
    inputs = Inputs()
    check_patterns(request.select + request.ignore)  # imports every rule family
    if request.expect is not None:
        try:
            inputs.expect = load_expectations(request.expect, budget)
        except InputError as exc:
            inputs.unusable = str(exc)
    if request.baseline is not None:
        inputs.baseline = load_baseline(request.baseline, budget)
    return inputs


def check_passes(request: CheckRequest) -> tuple[Pass, ...]:
    """The measurements a check adds (service/measuring.py); a static check adds none."""
    if not request.measures:
        return ()
    from topodoctor.service.measuring import check_passes as passes  # the measuring code: no static check loads it

    return passes(request.bandwidth, request.collectives, request.scope, request.level)


def check(request: CheckRequest, budget: Budget | None = None, passes: Sequence[Pass] | None = None) -> CheckOutcome:
    """Probe, measure and judge the host within the request's budget (from process start), with
    the measurements it asks for (``passes`` None; else these).

    The probe child is forked first; the parent's own work (loading the rules, checking the
    patterns, reading --expect) runs while the child probes, so a short budget is not spent
    before the probe even starts. Everything runs under the budget's alarm.

    An expectations file that is missing or unusable does not stop the check: the host is
    judged without it (peers only), a real fault still fails (exit 1), and a host with none
    answers exit 2, "misconfigured", with the reason, instead of a plain healthy. One bad file
    pushed to every node must neither open the gate on faulty nodes nor drain healthy ones."""
    started = time.monotonic(), time.time()
    budget = budget or Budget.start(request.budget_s)
    asked = check_passes(request) if passes is None else tuple(passes)
    read: list[Inputs] = []
    with budget.guard():
        host = probe(
            request.source(),
            budget,
            asked,
            environment=True,
            meanwhile=lambda: read.append(read_inputs(request, budget)),
        )
        return judge(host, request, budget, read[0] if read else None, started, asked)


def judge(
    host: ProbedHost,
    request: CheckRequest,
    budget: Budget | None = None,
    inputs: Inputs | None = None,
    started: tuple[float, float] | None = None,
    passes: Sequence[Pass] = (),
) -> CheckOutcome:
    """The verdict on a host already probed (by ``check`` with ``passes``, or the Python API's
    ``scan``): its rules, scope, fail level and outcome, decided here for both. ``inputs`` None
    reads them now; ``started`` is when the check began (monotonic, wall clock), now when None."""
    t0, started_at = started if started is not None else (time.monotonic(), time.time())
    budget = budget or Budget.start(request.budget_s)
    with budget.guard():
        if inputs is None:
            inputs = read_inputs(request, budget)
        where = job_scope(host, request.scope)
        ctx = make_context(host, inputs.expect, inputs.baseline)
        ctx.gates_job = where.kind == "job" or "prolog" in request.tags
        findings, incomplete = evaluate(ctx, request.select, request.ignore, request.tags)

        mine, others = within(findings, where, host.snapshot)
        findings, incomplete = tuple(mine), tuple(within(incomplete, where, host.snapshot)[0])
    missed = not_measured(passes, host) + gone_from_job(where, len(host.snapshot.gpus))
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
        where.job,
        where.label,
    )
    # The exit code is the CheckOutcome's (model.outcome.exit_code): a fault found stays exit 1 even
    # when a pass could not run or the expectations file could not be used. A replay names no
    # node: no node measured it (its host is the recording's).
    node = node_name(os.environ, host.snapshot.host.hostname) if request.replay is None else None
    fitness = host.measured.get("fitness")
    return CheckOutcome(
        findings, incomplete, meta, request.fails_from, host.snapshot, missed, fitness, utc_iso(started_at), node
    )


def gone_from_job(where: Scope, gpus: int) -> tuple[str, ...]:
    """A GPU Slurm gave the job that the node does not have (it fell off the bus, or gres.conf
    names a device that is not there): the job's GPUs cannot all be judged, so the check cannot
    pass. CUDA_VISIBLE_DEVICES's entries past the first unknown one are ignored, as CUDA does."""
    if where.kind != "job" or not where.unresolved or where.source == "CUDA_VISIBLE_DEVICES":
        return ()
    ids, many = ",".join(where.unresolved), len(where.unresolved) > 1
    named = f"the job's GPU{'s' if many else ''} {ids} ({where.source}={where.value})"
    return (f"{named} {'are' if many else 'is'} not among the node's {plural(gpus, 'GPU')}",)


def not_measured(passes: Sequence[Pass], host: ProbedHost) -> tuple[str, ...]:
    """One reason ("collectives not measured: ...") per pass whose measurement did not happen."""
    out = []
    for p in passes:
        why = host.missed.get(p.name)
        if why is None and p.missed is not None:
            why = p.missed(host.measured.get(p.name))
        if why is not None:
            out.append(f"{p.name} not measured: {why}")
    return tuple(out)


# ----------------------------------------------------------------------------- expect


@dataclass(frozen=True)
class ExpectOutcome(CommandOutcome):
    """What ``expect`` writes, and the findings on the host that would make it a bad example to
    follow: unless forced, they refuse the file (they fail the command)."""

    expectations: Expectations
    blocking: tuple[Finding, ...]  # error-level findings: a baseline from this host would bake them in
    forced: bool = False  # written all the same (--force)
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()

    @property
    def failing(self) -> tuple[Finding, ...]:
        """The findings that refuse the file: the blocking ones, unless forced."""
        return () if self.forced else self.blocking


def baseline(source: Source, budget: Budget, passes: Sequence[Pass] = (), force: bool = False) -> ExpectOutcome:
    """Expectations from a host, with the findings that make it a bad baseline. A fitness pass
    among ``passes`` adds the measured figures (what TD714 holds other hosts of the type to)."""
    host = probe(source, budget, passes, environment=True)
    if host.missed:  # asked to measure: a file without the figures would vouch for nothing
        raise BandwidthUnavailable("; ".join(f"{name} not measured: {why}" for name, why in host.missed.items()))
    with budget.guard():
        findings, _ = evaluate(make_context(host))
        expectations = from_snapshot(host.snapshot)
        fit = host.measured.get("fitness")
        if fit is not None:
            expectations = with_fitness(expectations, fit)
            if not expectations.fitness:  # asked to measure: a file without the figures would vouch for nothing
                why = "; ".join(fit.errors) or "; ".join(sorted({f.error for f in fit.figures if f.error}))
                raise BandwidthUnavailable(f"no fitness figure measured ({why or 'nothing to measure'})")
        return ExpectOutcome(expectations, failing(findings, "error"), force)
