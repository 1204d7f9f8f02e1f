"""Copies as the service layer runs them: the quick pass of ``check --bandwidth`` and the
``bandwidth`` command, each in the budgeted probe child with the copy timer started first."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from topodoctor.core import decode, fileio
from topodoctor.core.budget import Budget, command_start
from topodoctor.core.errors import BandwidthUnavailable, InputError
from topodoctor.core.guarded import bounded
from topodoctor.evidence import inputs as evidence
from topodoctor.measure.copies.session import run
from topodoctor.measure.copies.tasks import CopySettings
from topodoctor.measure.copies.worker import START_TIMEOUT_S, Worker, default_worker_cmd, hello_extra
from topodoctor.measure.timer.copy_kernels import BASE_SM, parse
from topodoctor.model.consistency import validate_snapshot
from topodoctor.model.copies import PAIR_MODES, BandwidthResult, load_result
from topodoctor.model.copy_modes import expand_modes
from topodoctor.model.findings import Severity
from topodoctor.model.outcome import CommandOutcome
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.counters import WarmReadings
from topodoctor.probe.environment import capture_process
from topodoctor.probe.sources import live_nvml
from topodoctor.rules.bandwidth_posted import posted_result
from topodoctor.service import early_copies
from topodoctor.service.host import ProbedHost
from topodoctor.service.judging import evaluate, make_context
from topodoctor.service.passes import Pass, Source
from topodoctor.service.probing import probe
from topodoctor.service.request_bandwidth import BandwidthRequest
from topodoctor.topology.scope import resolve

if TYPE_CHECKING:
    from topodoctor.model.findings import Finding

# The longest a probe waits for the CUDA start of a timer forked at the entry point (worker.py
# ``wait_started``): above what cuInit, the contexts and peer access took on the GPU hosts, counted
# from the command's exec, less the probe child's own later start (docs/benchmarks.md, "The figures
# behind constants").
START_WAIT_S = 1.0


def _starter(chosen: CopySettings | None, unscoped: bool, peers: bool = True) -> Callable[[float], Any]:
    """What starts the copy timer before the probe, so that its start overlaps it: the one the
    command's entry point started (service/early_copies.py), else a new one, told at once to open
    every GPU where nothing narrows them (``unscoped``, and no job variable names GPUs). A timer
    so told is also asked to make the pass's buffers while the probe runs (``prepare``) for the
    ``chosen`` settings (None: the quick pass's)."""

    def start(deadline: float) -> Any:
        import os

        settings = chosen or CopySettings.quick()

        worker = adopted = early_copies.adopt()
        if worker is None:
            worker = Worker(default_worker_cmd(), START_TIMEOUT_S, extra=hello_extra(settings.sm_kernel))
            worker.peers = peers
            worker.spawn()
            if unscoped and not any(name in os.environ for name in early_copies.SCOPE_VARIABLES):
                worker.hello_now()
        worker.prepare_now(settings.ahead())
        if adopted is not None:
            # A timer forked at the entry point is a few tenths of a second from its CUDA start by
            # now: the probe's NVML readings wait for it (beside it they slowed its cuInit).
            worker.wait_started(min(START_WAIT_S, max(0.0, deadline - time.monotonic())))
        return worker

    return start


def _stop_worker(worker: Any) -> None:
    worker.release()


def bandwidth_pass(scope: str = "auto") -> Pass:
    """The quick copy pass of ``check --bandwidth``, on the GPUs of ``scope`` only."""

    def copies(
        snap: HostSnapshot, source: Source, deadline: float, worker: Any, interim: Callable[[Any], None] | None = None
    ) -> BandwidthResult:

        # Copies only ever run live: the job's GPUs come from this process's environment.
        where = resolve(snap, capture_process().environ, scope)  # type: ignore[arg-type]
        nvml = live_nvml() if source.live else None
        return run(
            snap, CopySettings.quick(), nvml=nvml, deadline=deadline, worker=worker, scope=where, interim=interim
        )

    return Pass("bandwidth", copies, BandwidthResult, _starter(None, scope != "job"), _stop_worker, interim=True)


def measure(
    request: BandwidthRequest,
    budget: Budget,
    progress: Callable[[int, int, str], None] | None = None,
    meanwhile: Callable[[], None] | None = None,
    source: Source | None = None,
) -> BandwidthResult:
    """``topodoctor bandwidth``: the copy timer starts first (its CUDA start overlaps the probe),
    then the probe, then the copies; all in the budgeted child. ``meanwhile`` is the caller's own
    work while the child runs (loading what renders the result), after the rules' loading;
    ``source`` the host where it is not the request's (the Python API's scanned host)."""
    settings = settings_for(request)
    source = source or Source(request.replay)

    warm: list[Any] = []  # the live readings' binding, made while the probe runs (in the child)

    def timed(
        snap: HostSnapshot, src: Source, deadline: float, worker: Any, interim: Callable[[Any], None] | None = None
    ) -> BandwidthResult:

        nvml = warm[0].api() if warm else live_nvml() if src.live else None
        result = run(snap, settings, nvml=nvml, worker=worker, deadline=deadline, progress=progress, interim=interim)
        return _marked(result, "nvml_readings_ready", warm[0].ready_at if warm else 0.0)

    peers = any(m in PAIR_MODES for m in settings.modes)
    start = _starter(settings, settings.devices is None, peers)

    def begin(deadline: float) -> Any:
        worker = start(deadline)
        if source.live:  # after the timer's spawn: no process is forked here once a thread runs
            warm.append(WarmReadings(live_nvml))
        return worker

    def ready() -> None:
        # What follows the answer: the rules bandwidth_findings runs, loaded while the child measures.

        if meanwhile is not None:
            meanwhile()

    copies = Pass("bandwidth", timed, BandwidthResult, begin, _stop_worker, interim=True)
    try:
        host = probe(source, budget, (copies,), quiet=progress is None, meanwhile=ready)
    finally:
        early_copies.hand_over()  # the probe's child adopted it (or it is killed at the command's end)
    if "bandwidth" in host.missed:  # the measurement is the command: not made, it is the error
        raise BandwidthUnavailable(host.missed["bandwidth"])
    result: BandwidthResult = host.measured["bandwidth"]
    return _marked(result, "result_back", time.monotonic())


def _marked(result: BandwidthResult, step: str, at: float) -> BandwidthResult:
    """``result`` with ``step`` on its timeline (seconds since the command's exec), where it has one."""
    start = command_start()
    if not result.timeline or start is None or at <= 0:
        return result
    return replace(result, timeline={**result.timeline, step: round(at - start, 4)})


def settings_for(request: BandwidthRequest) -> CopySettings:
    """What the copy timer measures for ``request``; its modes as ``model.copy_modes`` names them
    (``host`` means both host directions, ``sm`` the SM kernels' three, ``all`` everything)."""
    chosen = _devices(request.devices)
    settings = CopySettings.quick(chosen) if request.quick else CopySettings(devices=chosen)
    try:
        picked = expand_modes(request.mode)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if picked:
        settings = replace(settings, modes=picked)  # type: ignore[arg-type]
    if request.size_bytes is not None:
        settings = replace(settings, size_bytes=request.size_bytes)
    if request.sm_kernel is not None:
        try:
            kernel = parse(request.sm_kernel)
        except ValueError as exc:
            raise InputError(f"--sm-kernel: {exc}") from None
        if kernel.style == "bulk" or kernel.needs[1] > BASE_SM:
            raise InputError(f"--sm-kernel: {request.sm_kernel!r} needs a newer GPU than the SM copies' module targets")
        settings = replace(settings, sm_kernel=kernel.name)
    return replace(
        settings,
        iters=request.iters or settings.iters,
        samples=request.samples or settings.samples,
        pair_timeout_s=request.pair_timeout,
    )


def _devices(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        picked = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise InputError(f"--devices takes NVML indices such as 0,1,3; got {text!r}") from None
    if any(i < 0 for i in picked):
        raise InputError(f"--devices takes NVML indices (0 or more); got {text!r}")
    return picked


def bandwidth_findings(result: BandwidthResult) -> tuple[Finding, ...]:
    """The bandwidth rules (TD7xx) and the data path's (TD306, TD307) on a result, against the host it
    was measured on."""

    if result.snapshot is None:
        return ()
    validate_snapshot(result.snapshot, "bandwidth result")
    host = ProbedHost(result.snapshot, "bandwidth result", measured={"bandwidth": result})
    # the measured rules, and the data path's verdict, which reads the copies beside the host's layers
    return evaluate(make_context(host), select=["TD7", "TD306", "TD307"])[0]


@dataclass(frozen=True)
class BandwidthOutcome(CommandOutcome):
    """``bandwidth``'s answer: the result measured (or read), and what the rules found in it."""

    result: BandwidthResult
    findings: tuple[Finding, ...]
    fail_level: Severity = "error"
    unusable: tuple[str, ...] = ()

    @property
    def not_measured(self) -> tuple[str, ...]:  # type: ignore[override]  # a property over the base's field
        """Every copy asked for that could not run here: never a pass."""
        ms = self.result.measurements
        return ("no copy asked for could run here",) if ms and all(m.skipped for m in ms) else ()


def judged(result: BandwidthResult, fail_level: Severity = "error") -> BandwidthOutcome:
    """A bandwidth result and what the rules find in it."""
    return BandwidthOutcome(result, bandwidth_findings(result), fail_level)


MAX_SAVED_BYTES = 64 << 20


def load_saved(path: str, host: Source | None = None, budget: Budget | None = None) -> BandwidthResult:
    """A saved bandwidth result (``bandwidth -o``), or another tool's copy matrices
    (p2pBandwidthLatencyTest, nvbandwidth) judged against ``host``, the host they were measured on
    (``--replay``): they carry no topology of their own, and without one the error says so."""
    try:
        return load_result(path)
    except InputError:
        limit = budget if budget is not None else Budget.start(0)
        left = limit.left() if limit.limited else fileio.DEFAULT_TIMEOUT_S
        data = fileio.read_bytes(path, "bandwidth result", MAX_SAVED_BYTES, left)
        found = decode.texts(data, fileio.shown(path), MAX_SAVED_BYTES)
        if len(found) != 1 or found[0].why or not found[0].text.strip():
            why = found[0].why or "empty" if len(found) == 1 else f"an archive of {len(found)} files, not one result"
            raise InputError(f"bandwidth result {fileio.shown(path)} is {why}") from None
        if decode.json_like(found[0].text):
            raise  # JSON, but not a result: the reader's own words say what is wrong with it
        text = found[0].text
        got = bounded(limit, f"reading {fileio.shown(path)}", lambda: evidence.read_input(path, text))
        kinds = {p.kind for p in got.pieces} & {"p2p-bandwidth-latency", "nvbandwidth"}
        if not kinds:
            other = sorted({p.kind for p in got.pieces})
            read_as = f" (it reads as {', '.join(other)}: `topodoctor diagnose {fileio.shown(path)}`)" if other else ""
            raise InputError(
                f"{fileio.shown(path)} is neither a bandwidth result (bandwidth -o) nor p2pBandwidthLatencyTest "
                f"or nvbandwidth output{read_as}"
            ) from None
        tool = "p2pBandwidthLatencyTest" if "p2p-bandwidth-latency" in kinds else "nvbandwidth"
        if host is None:
            raise InputError(
                f"{fileio.shown(path)} is {tool} output, which carries no topology to judge a pair by: give the "
                f"host it ran on with --replay NAME|FILE, or `topodoctor diagnose {fileio.shown(path)}` with its "
                "`nvidia-smi topo -m`"
            ) from None
        snap = probe(host, budget or Budget.start(0)).snapshot
        posted = posted_result(evidence.join([got]), snap, fileio.shown(path))
        if posted.result is None:
            raise InputError(posted.why_not) from None
        return posted.result
