"""Copies as the service layer runs them: the quick pass of ``check --bandwidth`` and the
``bandwidth`` command, each in the budgeted probe child with the copy timer started first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topodoctor.core.budget import Budget
from topodoctor.core.errors import BandwidthUnavailable, InputError
from topodoctor.measure.copies.session import MiB, Worker, default_worker_cmd, run
from topodoctor.measure.copies.tasks import Settings
from topodoctor.model.consistency import validate_snapshot
from topodoctor.model.copies import BandwidthResult
from topodoctor.model.findings import Severity, failing
from topodoctor.model.outcome import exit_code
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.environment import capture_process
from topodoctor.probe.sources import live_nvml
from topodoctor.service.check import Host, Pass, Source, evaluate, make_context, probe
from topodoctor.topology.scope import resolve

if TYPE_CHECKING:
    from topodoctor.model.findings import Finding


def _start_worker(deadline: float) -> Any:
    """The copy timer, started before the probe so that its start-up overlaps it."""
    worker = Worker(default_worker_cmd(), Settings().start_timeout_s)
    worker.spawn()
    return worker


def _stop_worker(worker: Any) -> None:
    worker.stop()


def bandwidth_pass(scope: str = "auto") -> Pass:
    """The quick copy pass of ``check --bandwidth``, on the GPUs of ``scope`` only."""

    def copies(snap: HostSnapshot, source: Source, deadline: float, worker: Any) -> BandwidthResult:

        # Copies only ever run live: the job's GPUs come from this process's environment.
        where = resolve(snap, capture_process().environ, scope)  # type: ignore[arg-type]
        nvml = live_nvml() if source.live else None
        return run(snap, Settings.quick(), nvml=nvml, deadline=deadline, worker=worker, scope=where)

    return Pass("bandwidth", copies, BandwidthResult, _start_worker, _stop_worker)


def measure(
    settings: Settings,
    source: Source,
    budget: Budget,
    progress: Callable[[int, int, str], None] | None = None,
) -> BandwidthResult:
    """``topodoctor bandwidth``: the copy timer starts first (torch's start-up overlaps the
    probe), then the probe, then the copies; all in the budgeted child."""

    def timed(snap: HostSnapshot, src: Source, deadline: float, worker: Any) -> BandwidthResult:

        return run(
            snap,
            settings,
            nvml=live_nvml() if src.live else None,
            worker=worker,
            deadline=deadline,
            progress=progress,
        )

    copies = Pass("bandwidth", timed, BandwidthResult, _start_worker, _stop_worker)
    host = probe(source, budget, (copies,), quiet=progress is None)
    if "bandwidth" in host.missed:  # the measurement is the command: not made, it is the error
        raise BandwidthUnavailable(host.missed["bandwidth"])
    result: BandwidthResult = host.measured["bandwidth"]
    return result


def bandwidth_settings(
    modes: Sequence[str],
    quick: bool,
    size_mib: int | None,
    iters: int | None,
    samples: int | None,
    devices: str | None,
    pair_timeout_s: float,
) -> Settings:
    """Settings from the command's options; ``host`` means both host directions, ``all`` everything."""
    from dataclasses import replace

    chosen = _devices(devices)
    settings = Settings.quick(chosen) if quick else Settings(devices=chosen)
    expand = {"all": ["oneway", "bidir", "latency", "h2d", "d2h"], "host": ["h2d", "d2h"]}
    picked = [x for m in modes for x in expand.get(m, [m])]
    if picked:
        settings = replace(settings, modes=tuple(dict.fromkeys(picked)))  # type: ignore[arg-type]
    if size_mib is not None:
        settings = replace(settings, size_bytes=size_mib * MiB)
    return replace(
        settings, iters=iters or settings.iters, samples=samples or settings.samples, pair_timeout_s=pair_timeout_s
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
    """The bandwidth rules (TD7xx) on a result, against the host it was measured on."""
    if result.snapshot is None:
        return ()
    validate_snapshot(result.snapshot, "bandwidth result")
    host = Host(result.snapshot, "bandwidth result", measured={"bandwidth": result})
    return evaluate(make_context(host), select=["TD7"])[0]


@dataclass(frozen=True)
class BandwidthOutcome:
    """``bandwidth``'s answer: the result measured (or read), and what the TD7xx rules found in it."""

    result: BandwidthResult
    findings: tuple[Finding, ...]
    fail_level: Severity = "error"
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()

    @property
    def failing(self) -> tuple[Finding, ...]:
        """The findings at or above the fail level."""
        return failing(self.findings, self.fail_level)

    @property
    def exit_code(self) -> int:
        """0 measured and fine, 1 a finding at the fail level (``model.outcome.exit_code``)."""
        return exit_code(self)


def judged(result: BandwidthResult, fail_level: Severity = "error") -> BandwidthOutcome:
    """A bandwidth result and what the rules find in it."""
    return BandwidthOutcome(result, bandwidth_findings(result), fail_level)
