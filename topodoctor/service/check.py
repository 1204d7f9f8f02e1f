"""The service layer: probe, check and measure a host under one wall-clock budget.

Each entry point returns plain outcome objects; the command line only parses arguments and
renders them. The probe (and any measurement pass) runs in a killable child under the
budget; decoding, validation and the rules run here, under the same budget's alarm.
Nothing here prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from topodoctor.core.budget import Budget, run_with_budget
from topodoctor.core.errors import EXIT_OK, EXIT_UNHEALTHY

# Everything else is imported where it is used: what this module loads is spent before the
# probe child is forked, and every tenth of a second of it counts against a short --timeout.
if TYPE_CHECKING:
    from topodoctor.model.environment import ProcessEnvironment
    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.rules.context import Context
    from topodoctor.rules.registry import Finding, Severity
    from topodoctor.topology.expect import Expectations
    from topodoctor.topology.scope import Scope


@dataclass(frozen=True)
class Source:
    """Where the host comes from: the live host (``replay`` None) or a recording / snapshot."""

    replay: str | None = None
    sysfs_root: str = "/"

    @property
    def live(self) -> bool:
        return self.replay is None


@dataclass(frozen=True)
class Pass:
    """A measurement run after the probe, in the budgeted child (copies, collectives...).

    ``run(snapshot, source, deadline, started)`` returns a plain dataclass of type ``result``;
    it travels to the parent as JSON and lands in the rules' Context (``bandwidth`` in
    ``Context.bandwidth``, any other name in ``Context.extra[name]``). ``start(deadline)``
    (optional) runs before the probe, so a worker's start-up overlaps it; what it returns is
    ``started``, and ``stop(started)`` releases it when the probe fails.
    """

    name: str
    run: Callable[[HostSnapshot, Source, float, Any], Any]
    result: type
    start: Callable[[float], Any] | None = None
    stop: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class Host:
    """What the probe child brought back: the snapshot, the process judged, measurements."""

    snapshot: HostSnapshot
    origin: str  # "live", "replay NAME", "snapshot NAME"
    process: ProcessEnvironment | None = None  # None where no process is judged (a saved result)
    measured: dict[str, Any] = field(default_factory=dict)


def _encode(host: Host) -> dict[str, Any]:
    from topodoctor.core import codec

    return {
        "snapshot": codec.to_jsonable(host.snapshot),
        "origin": host.origin,
        "process": None if host.process is None else codec.to_jsonable(host.process),
        "measured": {k: codec.to_jsonable(v) for k, v in host.measured.items()},
    }


def _decode(data: dict[str, Any], passes: Sequence[Pass]) -> Host:
    from topodoctor.core import codec
    from topodoctor.model.environment import ProcessEnvironment
    from topodoctor.model.snapshot import snapshot_from_data

    proc = data["process"]
    return Host(
        snapshot_from_data(data["snapshot"], f"snapshot from {data['origin']}"),
        data["origin"],
        None if proc is None else codec.from_jsonable(ProcessEnvironment, proc, "process environment"),
        {p.name: codec.from_jsonable(p.result, data["measured"][p.name], f"{p.name} result") for p in passes},
    )


PRELOAD_MIN_BUDGET_S = 3.0


def _preload_graph() -> None:
    """Import networkx on a thread while the child waits on the driver: on a host whose
    site-packages carry no bytecode, the import costs about as long as the probe itself.

    Only with a budget longer than the import: an import still running at the deadline holds
    the interpreter lock and delays killing the child by tenths of a second on a busy host."""
    import importlib
    import threading

    threading.Thread(target=importlib.import_module, args=("networkx",), daemon=True).start()


def probe(
    source: Source,
    budget: Budget,
    passes: Sequence[Pass] = (),
    environment: bool = False,
    quiet: bool = True,
    meanwhile: Callable[[], None] | None = None,
) -> Host:
    """Probe the host (and run ``passes``) in a child under ``budget``; a validated Host.

    A budget without a limit runs everything in this process (no fork), as ``--timeout 0``
    promises. ``quiet`` silences the child's stdout/stderr (a progress bar needs them).
    ``meanwhile`` is the parent's own work (imports, reading files), done while the child
    probes; what it raises kills the child and is raised here.
    """

    def gather(deadline: float) -> Host:
        from topodoctor.probe import probe_host

        started = {ps.name: ps.start(deadline) for ps in passes if ps.start is not None}
        try:
            p = probe_host(source.replay, source.sysfs_root)
        except BaseException:
            for ps in passes:
                if ps.stop is not None and ps.name in started:
                    ps.stop(started[ps.name])
            raise
        measured = {ps.name: ps.run(p.snapshot, source, deadline, started.get(ps.name)) for ps in passes}
        return Host(p.snapshot, p.origin, p.process if environment else None, measured)

    if not budget.limited:
        if meanwhile is not None:
            meanwhile()
        host = gather(budget.deadline)
    else:
        preload = budget.left() > PRELOAD_MIN_BUDGET_S

        def parent() -> None:
            if meanwhile is not None:
                meanwhile()
            if preload:
                _preload_graph()

        with budget.guard():
            data = run_with_budget(lambda d: _encode(gather(d)), budget, meanwhile=parent, quiet=quiet)
            host = _decode(data, passes)
    with budget.guard():
        from topodoctor.model.consistency import validate_snapshot

        validate_snapshot(host.snapshot, host.origin)
    return host


# ----------------------------------------------------------------------------- check


@dataclass(frozen=True)
class CheckOptions:
    source: Source = Source()
    timeout_s: float = 30.0
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # ("prolog",) for the fast subset
    fail_level: Severity = "error"
    expect: Path | None = None
    passes: tuple[Pass, ...] = ()  # measurements run after the probe: bandwidth_pass() and others
    scope: str = "auto"  # job | node | auto: the GPUs judged and measured (topodoctor.topology.scope)


@dataclass(frozen=True)
class Meta:
    origin: str
    host: str
    gpus: int
    elapsed_s: float
    measured: tuple[str, ...]  # names of the passes that ran
    scope: str = ""  # which GPUs were judged, and why
    scope_gpus: tuple[int, ...] = ()
    findings_outside_scope: int = 0  # findings about GPUs of other jobs, left out
    bandwidth_timings: dict[str, float] | None = None  # where the copy pass spent its time, by phase


@dataclass(frozen=True)
class Outcome:
    findings: tuple[Finding, ...]  # worst first
    incomplete: tuple[Finding, ...]  # checks that could not read their input, whatever the selection
    meta: Meta
    fail_level: Severity
    exit_code: int
    snapshot: HostSnapshot | None = None  # what was judged (metrics label GPUs from it)

    @property
    def failing(self) -> tuple[Finding, ...]:
        return failing(self.findings, self.fail_level)

    @property
    def verdict(self) -> Literal["healthy", "unhealthy"]:
        return "unhealthy" if self.exit_code == EXIT_UNHEALTHY else "healthy"


def failing(findings: Sequence[Finding], fail_level: str) -> tuple[Finding, ...]:
    from topodoctor.rules.registry import SEVERITY_ORDER

    return tuple(f for f in findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[fail_level])


def make_context(host: Host, expect: Expectations | None = None) -> Context:
    """The rules' Context: the one place it is built. With no process (a saved result) no
    process is judged: no variables, and no affinity for TD403 to hold against the GPUs."""
    from topodoctor.model.environment import Environment
    from topodoctor.rules.context import Context

    measured = dict(host.measured)
    collectives = measured.pop("collectives", None)
    env = Environment.of(host.process) if host.process is not None else Environment({}, {}, {}, ())
    ctx = Context(host.snapshot, env, expect=expect, bandwidth=measured.pop("bandwidth", None), extra=measured)
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


def check(options: CheckOptions, budget: Budget | None = None) -> Outcome:
    """Probe, measure and judge the host within ``options.timeout_s`` (from process start).

    The probe child is forked first; the parent's own work (loading the rules, checking the
    patterns, reading --expect) runs while the child probes, so a short budget is not spent
    before the probe even starts. Everything runs under the budget's alarm."""
    t0 = time.monotonic()
    budget = budget or Budget.start(options.timeout_s)
    loaded: dict[str, Expectations] = {}

    def prepare() -> None:
        from topodoctor.rules.registry import check_patterns

        check_patterns(options.select + options.ignore)  # imports every rule family
        if options.expect is not None:
            from topodoctor.topology.expect import load_expectations

            loaded["expect"] = load_expectations(options.expect, budget)

    with budget.guard():
        host = probe(options.source, budget, options.passes, environment=True, meanwhile=prepare)
        ctx = make_context(host, loaded.get("expect"))
        findings, incomplete = evaluate(ctx, options.select, options.ignore, options.tags)
        from topodoctor.topology.scope import within

        where = job_scope(host, options.scope)
        mine, others = within(findings, where, host.snapshot)
        findings, incomplete = tuple(mine), tuple(within(incomplete, where, host.snapshot)[0])
    bad = failing(findings, options.fail_level)
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
    )
    return Outcome(findings, incomplete, meta, options.fail_level, EXIT_UNHEALTHY if bad else EXIT_OK, host.snapshot)


# ----------------------------------------------------------------------------- expect


@dataclass(frozen=True)
class Baseline:
    expectations: Expectations
    blocking: tuple[Finding, ...]  # error-level findings: a baseline from this host would bake them in


def baseline(source: Source, budget: Budget) -> Baseline:
    """Expectations from a host, with the findings that make it a bad baseline."""
    from topodoctor.topology.expect import from_snapshot

    host = probe(source, budget, environment=True)
    with budget.guard():
        findings, _ = evaluate(make_context(host))
        return Baseline(from_snapshot(host.snapshot), failing(findings, "error"))


def record(label: str, scrub: bool, sysfs_root: str, budget: Budget) -> tuple[dict[str, Any], int]:
    """Record the live host under the budget; (recording document, GPU count)."""
    from topodoctor.probe import record_host

    def work(deadline: float) -> dict[str, Any]:
        doc, snap = record_host(label, do_scrub=scrub, sysfs_root=sysfs_root)
        return {"doc": doc, "gpus": len(snap.gpus)}

    data = work(budget.deadline) if not budget.limited else run_with_budget(work, budget)
    return data["doc"], int(data["gpus"])
