"""The probe every command runs: the host (live, a recording or a snapshot) and the measurement
passes, in a killable child under the command's budget, brought back as a validated ``Host``.

A plain ``check`` or ``scan`` has its child forked by the console entry point before anything
else is imported (``start_early``, cli/plain.py); ``probe`` adopts it when it asks for the
same host, so the probe overlaps the parent's own start-up."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from topodoctor.core.budget import FOREVER_S, Budget, Child, await_child, cancel, fork_work
from topodoctor.service.passes import Pass, Source

if TYPE_CHECKING:
    from topodoctor.model.environment import ProcessEnvironment
    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.topology.view import HostView


@dataclass(frozen=True)
class Host:
    """What the probe child brought back: the snapshot, the process judged, measurements."""

    snapshot: HostSnapshot
    origin: str  # "live", "replay NAME", "snapshot NAME"
    process: ProcessEnvironment | None = None  # None where no process is judged (a saved result)
    measured: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def view(self) -> HostView:
        """The snapshot's derived views (graph, pair connections, host tree), built once."""
        from topodoctor.topology.view import HostView

        return HostView(self.snapshot)


def encode(host: Host) -> dict[str, Any]:
    """A Host as the child sends it through its pipe (JSON-able)."""
    from topodoctor.core import codec

    return {
        "snapshot": codec.to_jsonable(host.snapshot),
        "origin": host.origin,
        "process": None if host.process is None else codec.to_jsonable(host.process),
        "measured": {k: codec.to_jsonable(v) for k, v in host.measured.items()},
    }


def decode(data: dict[str, Any], passes: Sequence[Pass]) -> Host:
    """The Host a child sent, its snapshot and each pass's result checked as they are decoded."""
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


def gather(source: Source, passes: Sequence[Pass], deadline: float) -> Host:
    """Probe ``source`` and run ``passes`` here (in the child, or in-process without a budget)."""
    warm_up = None
    if source.live:  # the driver's first answers come while the probe's modules load
        from topodoctor.probe.nvml import WarmUp

        warm_up = WarmUp()
    from topodoctor.probe.sources import probe_host

    if warm_up is not None:
        warm_up.join()
    started = {ps.name: ps.start(deadline) for ps in passes if ps.start is not None}
    try:
        p = probe_host(source.replay, source.sysfs_root, fitness=not source.topology_only)
    except BaseException:
        for ps in passes:
            if ps.stop is not None and ps.name in started:
                ps.stop(started[ps.name])
        raise
    measured = {ps.name: ps.run(p.snapshot, source, deadline, started.get(ps.name)) for ps in passes}
    return Host(p.snapshot, p.origin, p.process, measured)


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
    probes; what it raises kills the child and is raised here. ``environment`` keeps the
    probed process's environment (the rules judge it; a picture of the topology does not).
    """
    early = take_early(source) if budget.limited and not passes and quiet else None
    if budget.limited:
        meanwhile = _ready_to_decode(passes, meanwhile)
    if early is None:
        drop_early()
    if not budget.limited:
        if meanwhile is not None:
            meanwhile()
        host = gather(source, passes, budget.deadline)
    else:
        with budget.guard():
            child = early or fork_work(lambda d: encode(gather(source, passes, d)), budget.deadline, quiet)
            host = decode(await_child(child, budget, meanwhile), passes)
    if not environment:
        host = replace(host, process=None)
    with budget.guard():
        from topodoctor.model.consistency import validate_snapshot

        validate_snapshot(host.snapshot, host.origin)
    return host


def _ready_to_decode(passes: Sequence[Pass], then: Callable[[], None] | None) -> Callable[[], None]:
    """The parent's work while its child probes: load the classes the answer decodes into and
    resolve their field types, and the snapshot's views (tenths of the parent's start-up, else
    spent after the answer), then the caller's own ``then``."""

    def ready() -> None:
        # What follows the answer: its validation and the snapshot's views (Host.view).
        import topodoctor.model.consistency
        import topodoctor.topology.view  # noqa: F401
        from topodoctor.core import codec
        from topodoctor.model.environment import ProcessEnvironment
        from topodoctor.model.snapshot import HostSnapshot

        for cls in (HostSnapshot, ProcessEnvironment, *(p.result for p in passes)):
            codec.resolve_types(cls)
        if then is not None:
            then()

    return ready


_early: tuple[Source, Child] | None = None


def start_early(source: Source | None) -> None:
    """Fork the probe of ``source`` now, before the command line is parsed (cli/plain.py reads
    which host a plain ``check`` or ``scan`` asks for); None starts nothing."""
    global _early
    if source is not None:
        _early = (source, fork_work(lambda deadline: encode(gather(source, (), deadline)), FOREVER_S))


def take_early(source: Source) -> Child | None:
    """The early probe's child if it probes ``source``, else None (and it is killed)."""
    global _early
    if _early is not None and _early[0] == source:
        child, _early = _early[1], None
        return child
    drop_early()
    return None


def drop_early() -> None:
    """Kill an early probe nobody adopted (a usage error, a help request, another command)."""
    global _early
    started, _early = _early, None
    if started is not None:
        cancel(started[1])
