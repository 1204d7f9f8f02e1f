"""The probe every command runs: the host (live, a recording or a snapshot) and the measurement
passes, in a killable child under the command's budget, brought back as a validated ``Host``.

A plain ``check`` or ``scan`` has its child forked by the console entry point before anything
else is imported (``start_early``, cli/plain.py); ``probe`` adopts it when it asks for the
same host, so the probe overlaps the parent's own start-up.

A topology-only source is the text scan's (``probe_scan_text``): its child also checks the snapshot
and sets out what the text shows (report.scan.scan_text), and sends that instead of the Host.
The parent then loads only what draws it (rich) while the child loads the model and the
topology: each side of the fork loads half of what a scan needs, not both the model."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from topodoctor.core.budget import FOREVER_S, Budget, Child, await_child, cancel, fork_work
from topodoctor.service import server
from topodoctor.service.passes import Pass, Source

if TYPE_CHECKING:
    from topodoctor.model.environment import ProcessEnvironment
    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.probe.api import NvmlApi
    from topodoctor.report.scan_text import ScanText
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


def decode(data: dict[str, Any], passes: Sequence[Pass], environment: bool = True) -> Host:
    """The Host a child sent, its snapshot and each pass's result checked as they are decoded;
    its process only where ``environment`` asks for it (else None, and not read)."""
    from topodoctor.core import codec
    from topodoctor.model.snapshot import snapshot_from_data

    proc = data["process"] if environment else None
    if proc is not None:
        from topodoctor.model.environment import ProcessEnvironment

        proc = codec.from_jsonable(ProcessEnvironment, proc, "process environment")
    return Host(
        snapshot_from_data(data["snapshot"], f"snapshot from {data['origin']}"),
        data["origin"],
        proc,
        {p.name: codec.from_jsonable(p.result, data["measured"][p.name], f"{p.name} result") for p in passes},
    )


def gather(source: Source, passes: Sequence[Pass], deadline: float, serve: bool = True) -> Host:
    """Probe ``source`` and run ``passes`` here (in the child, or in-process without a budget).
    A live host's NVML calls go to a server forked first (probe/nvml_server.py): it loads the
    binding and meets the driver while this process loads the probe. ``serve=False`` (no
    budget: ``--timeout 0`` promises no child process) asks NVML here."""
    nvml = None
    if source.live and serve:
        from topodoctor.probe import nvml_server

        nvml = nvml_server.adopt() or nvml_server.NvmlServer.start()
    try:
        return _gather(source, passes, deadline, nvml)
    finally:
        if nvml is not None:
            nvml.close()


def _gather(source: Source, passes: Sequence[Pass], deadline: float, nvml: NvmlApi | None) -> Host:
    from topodoctor.probe.sources import probe_host

    started = {ps.name: ps.start(deadline) for ps in passes if ps.start is not None}
    try:
        p = probe_host(source.replay, source.sysfs_root, source.topology_only, nvml)
    except BaseException:
        for ps in passes:
            if ps.stop is not None and ps.name in started:
                ps.stop(started[ps.name])
        raise
    # Loaded only here: a text scan's parent draws what its child sends and loads no model at all.
    from topodoctor.service.stamping import stamp

    measured = {}
    for ps in passes:
        at = time.time()
        result = ps.run(p.snapshot, source, deadline, started.get(ps.name))
        measured[ps.name] = stamp(result, p.snapshot, at, source.live)
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
    A topology-only source is ``probe_scan_text``'s.
    """
    if source.topology_only:
        raise ValueError("a topology-only source is the text scan's (probe_scan_text), not a Host's")
    early = take_early(source) if budget.limited and not passes and quiet else None
    if budget.limited:
        meanwhile = _ready_to_decode(passes, environment, meanwhile)
    if early is None:
        drop_early()
    if not budget.limited:
        if meanwhile is not None:
            meanwhile()
        host = gather(source, passes, budget.deadline, serve=False)
    else:
        with budget.guard():
            child = early or fork_work(_work(source, passes), budget.deadline, quiet)
            host = decode(await_child(child, budget, meanwhile), passes, environment)
    if not environment:
        host = replace(host, process=None)
    with budget.guard():
        from topodoctor.model.consistency import validate_snapshot

        validate_snapshot(host.snapshot, host.origin)
    return host


def _ready_to_decode(passes: Sequence[Pass], environment: bool, then: Callable[[], None] | None) -> Callable[[], None]:
    """The parent's work while its child probes: load the classes the answer decodes into and
    resolve their field types, and the snapshot's views (tenths of the parent's start-up, else
    spent after the answer), then the caller's own ``then``."""

    def ready() -> None:
        # What follows the answer: its validation and the snapshot's views (Host.view).
        import topodoctor.model.consistency
        import topodoctor.topology.view  # noqa: F401
        from topodoctor.core import codec
        from topodoctor.model.snapshot import HostSnapshot

        classes: list[type] = [HostSnapshot, *(p.result for p in passes)]
        if environment:
            from topodoctor.model.environment import ProcessEnvironment

            classes.append(ProcessEnvironment)
        for cls in classes:
            codec.resolve_types(cls)
        if then is not None:
            then()

    return ready


def probe_scan_text(source: Source, budget: Budget, meanwhile: Callable[[], None] | None = None) -> ScanText:
    """The text scan of a topology-only ``source``: probed, checked and set out as text in the
    child (``scan_text_of``), so this process only draws it; ``meanwhile`` loads what drawing
    needs while the child works. No budget: all of it here, as ``--timeout 0`` promises."""
    if not source.topology_only:
        raise ValueError("probe_scan_text reads a topology-only source")
    if not budget.limited:
        drop_early()
        if meanwhile is not None:
            meanwhile()
        return scan_text_of(gather(source, (), budget.deadline, serve=False))
    early = take_early(source)
    with budget.guard():
        child = early or fork_work(_work(source, ()), budget.deadline)
        return cast("ScanText", await_child(child, budget, meanwhile))


def scan_text_of(host: Host) -> ScanText:
    """What the text scan of ``host`` shows, its snapshot checked first as ``probe`` checks it."""
    from topodoctor.model.consistency import validate_snapshot
    from topodoctor.report.scan import scan_text

    validate_snapshot(host.snapshot, host.origin)
    return scan_text(host.snapshot, host.origin, host.view.graph)


def _work(source: Source, passes: Sequence[Pass]) -> Callable[[float], dict[str, Any]]:
    """What a child for ``source`` does by its deadline: the Host, encoded; for a topology-only
    source, the text scan (``scan_text_of``)."""
    if source.topology_only:

        def text(deadline: float) -> dict[str, Any]:
            # What sets the text out loads first: a live probe's first call then waits on the
            # NVML server's start (tens of ms), and these imports fill that wait.
            import topodoctor.model.consistency
            import topodoctor.report.scan
            import topodoctor.topology.view  # noqa: F401

            return dict(scan_text_of(gather(source, (), deadline)))

        return text
    return lambda deadline: encode(gather(source, passes, deadline))


_early: tuple[Source, Child] | None = None


def start_early(source: Source | None) -> None:
    """Fork the probe of ``source`` now, before the command line is parsed (cli/plain.py reads
    which host a plain ``check`` or ``scan`` asks for); None starts nothing. A live probe's
    child adopts the NVML server the entry point started (service/server.py); any other
    outcome kills that server."""
    global _early
    if source is not None:
        _early = (source, fork_work(_work(source, ()), FOREVER_S))
        if source.live:
            server.hand_to(_early[1].pid)
    server.drop()


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
    server.drop()
