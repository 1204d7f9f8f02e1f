"""The probe every command runs: the host (live, a recording or a snapshot) and the measurement
passes, in a killable child under the command's budget, brought back as a validated ``ProbedHost``.

A ``check`` or ``scan`` has its child forked by the console entry point before anything else
is imported (service/early.py; the entry point reads the command line by its options spec);
``probe`` adopts it when it asks for the same host, so the probe overlaps the parent's own
start-up. Two processes: the command and its one budgeted probe child.

A topology-only source is the text scan's (``probe_scan_text``): its child also checks the snapshot
and sets out what the text shows (report.scan.scan_text), and sends that instead of the ProbedHost;
the command only draws it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import is_dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from topodoctor.core.budget import Budget, Child, await_child, fork_work
from topodoctor.core.errors import EXIT_USAGE, TopodoctorError
from topodoctor.model.consistency import validate_snapshot
from topodoctor.service import early
from topodoctor.service.early import child_work
from topodoctor.service.host import ProbedHost, decode, resolve_types
from topodoctor.service.passes import Pass, Source

if TYPE_CHECKING:
    from topodoctor.report.scan_text import ScanText


def probe(
    source: Source,
    budget: Budget,
    passes: Sequence[Pass] = (),
    environment: bool = False,
    quiet: bool = True,
    meanwhile: Callable[[], None] | None = None,
) -> ProbedHost:
    """Probe the host (and run ``passes``) in a child under ``budget``; a validated ProbedHost.

    A budget without a limit runs everything in this process (no fork), as ``--timeout 0``
    promises. ``quiet`` silences the child's stdout/stderr (a progress bar needs them).
    ``meanwhile`` is the parent's own work (imports, reading files), done while the child
    probes; what it raises kills the child and is raised here. ``environment`` keeps the
    probed process's environment (the rules judge it; a picture of the topology does not).
    A topology-only source is ``probe_scan_text``'s.
    """
    if source.topology_only:
        raise ValueError("a topology-only source is the text scan's (probe_scan_text), not a ProbedHost's")
    adopted = early.take(source) if budget.limited and not passes and quiet else None
    if adopted is None:
        early.drop()
    if not budget.limited:
        if meanwhile is not None:
            meanwhile()
        host = _gathered(source, passes, budget.deadline)
    else:
        with budget.guard():
            host = _await_host(
                adopted, source, passes, budget, environment, quiet, _ready(passes, environment, meanwhile)
            )
    if not environment:
        host = replace(host, process=None)
    with budget.guard():
        validate_snapshot(host.snapshot, host.origin)
    return host


def _gathered(source: Source, passes: Sequence[Pass], deadline: float) -> ProbedHost:
    """The probe's work in this process (no budget: ``--timeout 0`` promises no child)."""
    from topodoctor.service.gather import gather  # the probe child's work (probe/, the binding): loaded where it runs

    return gather(source, passes, deadline)


def judging_reserve_s(budget: Budget) -> float:
    """What the parent keeps of the budget to judge what the probe found when the measurements
    after it overrun: a fifth of it, at most a second. The rules take tens of ms, but decoding the probe's
    answer on a loaded machine (a node's other jobs, a CI runner) can take several times that."""
    return min(1.0, 0.2 * (budget.timeout_s or 0.0))


def _await_host(
    adopted: Child | None,
    source: Source,
    passes: Sequence[Pass],
    budget: Budget,
    environment: bool,
    quiet: bool,
    meanwhile: Callable[[], None],
) -> ProbedHost:
    """The child's ProbedHost by the deadline. With measurement passes the child stops them a little
    before it (``judging_reserve_s``), and should they fail, overrun or take the child down, the
    probe it sent first is judged with each unfinished pass not measured, and why."""
    if not passes:
        child = adopted or fork_work(child_work(source), budget.deadline, quiet)
        return decode(await_child(child, budget, meanwhile), passes, environment)
    measuring = Budget(budget.timeout_s, budget.deadline - judging_reserve_s(budget))
    child = fork_work(child_work(source, passes), measuring.deadline, quiet)
    try:
        return decode(await_child(child, measuring, meanwhile), passes, environment)
    except TopodoctorError as exc:
        if exc.part is None or exc.exit_code == EXIT_USAGE:
            raise
        why = str(exc).removeprefix("could not check: ")
        probed = decode(exc.part, passes, environment)  # with each pass that sent its result first
        measured = {name: _cut_short(result, why) for name, result in probed.measured.items()}
        return replace(probed, measured=measured, missed={p.name: why for p in passes if p.name not in measured})


def _cut_short(result: Any, why: str) -> Any:
    """A pass's result sent before its last readings, by a child that then ended (``why``): its
    sampling of the run says so."""
    during = getattr(result, "during", None)  # a RunSampling (model/during.py: not loaded for this)
    if not is_dataclass(during) or isinstance(during, type) or not hasattr(during, "error"):
        return result
    return replace(result, during=replace(during, error=f"the measuring process ended before its closing read: {why}"))


def _ready(passes: Sequence[Pass], environment: bool, then: Callable[[], None] | None) -> Callable[[], None]:
    """The parent's work while its child probes: resolve the field types the answer decodes into
    (else spent after the answer), then the caller's own ``then``."""

    def ready() -> None:
        resolve_types(passes, environment)
        if then is not None:
            then()

    return ready


def probe_scan_text(source: Source, budget: Budget, meanwhile: Callable[[], None] | None = None) -> ScanText:
    """The text scan of a topology-only ``source``: probed, checked and set out as text in the
    child, so this process only draws it; ``meanwhile`` is the command's own work while the
    child works. No budget: all of it here, as ``--timeout 0`` promises."""
    if not source.topology_only:
        raise ValueError("probe_scan_text reads a topology-only source")
    if not budget.limited:
        early.drop()
        if meanwhile is not None:
            meanwhile()
        from topodoctor.service.gather import scan_text_of  # the probe child's work: loaded where it runs

        return scan_text_of(_gathered(source, (), budget.deadline))
    adopted = early.take(source)
    with budget.guard():
        child = adopted or fork_work(child_work(source), budget.deadline)
        return cast("ScanText", await_child(child, budget, meanwhile))
