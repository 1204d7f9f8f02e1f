"""NVML read again and again while something else runs: the one sampler, for each of its uses.

- Under a load (the fitness GEMM stress): clocks, power, temperature and clock-event reasons on a
  thread beside the child doing the work (``Sampler(...).start()`` ... ``stop()``), and each GPU's
  own limits (the HBM peak from its bus width and maximum memory clock).
- Around a job that may be stalled (``job --live``): utilisation and power, a fixed number of
  times in the foreground (``Sampler(...).take(n)``), then who runs where (``activity``): a GPU
  spinning in a collective shows 100 % utilisation at near-idle power, the culprit does not.
- While a measurement runs (the collectives, the copies): on a thread, with the processes on
  each GPU and the link counters around it (``probe/during.py``'s ``RunWatch``).

Built on the probe's NVML boundary, so the live binding, a recorder or a fake answer alike: a
sampling is recorded like a probe (``live_activity(record=True)``) and replayed anywhere
(``replay_activity``). A reading that fails is None, never a guess; a GPU whose first metric
fails is read no more and keeps the error.

nvidia-smi equivalents: ``--query-gpu=utilization.gpu,clocks.sm,clocks.mem,power.draw,
temperature.gpu,clocks_event_reasons.active`` in a loop (``-lms 250``), ``-q -d CLOCK,POWER``
for limits, ``--query-compute-apps`` for the processes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from topodoctor.core.errors import InputError, ProbeUnavailable
from topodoctor.core.pci import short_bus_id
from topodoctor.core.probed import ProbeError
from topodoctor.model.activity import ActivitySample, GpuActivity
from topodoctor.model.nvml_codes import init_failure
from topodoctor.probe.api import NvmlApi
from topodoctor.probe.nvml import LiveNvml
from topodoctor.probe.query import Nvml
from topodoctor.probe.record import RecordingNvml
from topodoctor.probe.replay import FakeNvml

CLOCK_SM, CLOCK_MEM = 1, 2  # nvmlClockType_t: NVML_CLOCK_SM, NVML_CLOCK_MEM
TEMP_GPU = 0  # NVML_TEMPERATURE_GPU
ACTIVITY_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment (CLOCK_MONOTONIC seconds); a metric not asked or not answered is None."""

    index: int
    t: float
    sm_mhz: int | None
    mem_mhz: int | None
    power_w: float | None
    temp_c: int | None
    reasons: int | None  # nvmlClocksEventReasons bits
    util: int | None = None  # % of the last sample period a kernel ran


@dataclass(frozen=True)
class Limits:
    """What a GPU can do at most, from NVML."""

    index: int
    sm_mhz_max: int | None
    mem_mhz_max: int | None
    bus_width_bits: int | None
    power_limit_w: float | None
    sms: int | None = None

    @property
    def hbm_peak_gbps(self) -> float | None:
        """Memory traffic at most (reads and writes together): bus width x max clock x 2 (DDR)."""
        if self.bus_width_bits is None or self.mem_mhz_max is None:
            return None
        return self.bus_width_bits / 8 * self.mem_mhz_max * 1e6 * 2 / 1e9


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _reasons(nvml: Nvml, h: str) -> Any:
    got = nvml.ask("nvmlDeviceGetCurrentClocksEventReasons", h)
    return got if isinstance(got, int) else nvml.ask("nvmlDeviceGetCurrentClocksThrottleReasons", h)


# metric -> how to read it from a device handle (the older ...ThrottleReasons where the binding lacks
# ...ClocksEventReasons)
METRICS: dict[str, Callable[[Nvml, str], Any]] = {
    "util": lambda n, h: n.ask("nvmlDeviceGetUtilizationRates", h, convert=lambda r: int(r["gpu"])),
    "reasons": _reasons,
    "power_w": lambda n, h: n.ask("nvmlDeviceGetPowerUsage", h, convert=lambda mw: int(mw) / 1000.0),
    "sm_mhz": lambda n, h: n.ask("nvmlDeviceGetClockInfo", h, CLOCK_SM),
    "mem_mhz": lambda n, h: n.ask("nvmlDeviceGetClockInfo", h, CLOCK_MEM),
    "temp_c": lambda n, h: n.ask("nvmlDeviceGetTemperature", h, TEMP_GPU),
}
LOAD = ("reasons", "power_w", "sm_mhz", "mem_mhz", "temp_c")  # what holds a GPU back under a load
ACTIVITY = ("util", "power_w")  # busy or idle, and how hungry


def limits(api: NvmlApi, index: int) -> Limits:
    """``nvmlDeviceGetMaxClockInfo`` (SM, memory), ``nvmlDeviceGetMemoryBusWidth``,
    ``nvmlDeviceGetEnforcedPowerLimit`` (mW)."""
    nvml = Nvml(api)
    h = nvml.ask("nvmlDeviceGetHandleByIndex", index)
    if not isinstance(h, str):
        return Limits(index, None, None, None, None)
    sm = _int(nvml.ask("nvmlDeviceGetMaxClockInfo", h, CLOCK_SM))
    mem = _int(nvml.ask("nvmlDeviceGetMaxClockInfo", h, CLOCK_MEM))
    bus = _int(nvml.ask("nvmlDeviceGetMemoryBusWidth", h))
    power = _int(nvml.ask("nvmlDeviceGetEnforcedPowerLimit", h))
    return Limits(index, sm, mem, bus, None if power is None else power / 1000.0)


class Sampler:
    """Readings of ``metrics`` for GPUs ``indices``, every ``interval_s``: in the foreground
    (``take``) or on a daemon thread from ``start`` to ``stop``.

    NVML calls are short and release the interpreter lock, so sampling beside a process that
    does the work costs it nothing; the thread never outlives ``stop`` by more than a reading.
    """

    def __init__(
        self,
        api: NvmlApi,
        indices: list[int],
        interval_s: float = 0.25,
        metrics: tuple[str, ...] = LOAD,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        self.nvml, self.interval_s, self.metrics = Nvml(api), interval_s, metrics
        self.on_tick = on_tick  # more reads after each tick, on the same thread (``probe/during.py``)
        self.busy_s = 0.0  # wall time spent in ticks: what sampling costs the sampling process
        self.failure = ""  # what stopped the thread early, if anything did
        self.handles: dict[int, str] = {}
        self.errors: dict[int, str] = {}  # index -> the answer that stopped its sampling
        for i in indices:
            h = self.nvml.ask("nvmlDeviceGetHandleByIndex", i)
            if isinstance(h, str):
                self.handles[i] = h
            else:
                self.errors[i] = str(h)
        self.readings: list[GpuSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def tick(self) -> None:
        """One reading of every GPU still answering (``nvmlDeviceGetUtilizationRates``,
        ``nvmlDeviceGetCurrentClocksEventReasons``, ``nvmlDeviceGetPowerUsage``,
        ``nvmlDeviceGetClockInfo``, ``nvmlDeviceGetTemperature``: those of ``metrics``), then
        ``on_tick``."""
        t0 = time.monotonic()
        for i, h in self.handles.items():
            if i in self.errors:
                continue
            got: dict[str, Any] = {}
            for m in self.metrics:
                got[m] = METRICS[m](self.nvml, h)
                if m == self.metrics[0] and isinstance(got[m], ProbeError):
                    self.errors[i] = str(got[m])
                    break
            else:
                n = {k: _int(got.get(k)) for k in ("sm_mhz", "mem_mhz", "temp_c", "reasons", "util")}
                power = got.get("power_w")
                watts = power if isinstance(power, float) else None
                at = time.monotonic()
                self.readings.append(
                    GpuSample(i, at, n["sm_mhz"], n["mem_mhz"], watts, n["temp_c"], n["reasons"], n["util"])
                )
        if self.on_tick is not None:
            self.on_tick()
        self.busy_s += time.monotonic() - t0

    def take(self, samples: int, sleep: Callable[[float], None] = time.sleep) -> list[GpuSample]:
        """``samples`` readings of every GPU, ``interval_s`` apart, here and now."""
        for n in range(samples):
            if n:
                sleep(self.interval_s)
            self.tick()
        return list(self.readings)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as exc:  # a reading the boundary did not foresee ends the sampling, never the work
                self.failure = f"{type(exc).__name__}: {str(exc)[:120]}"
                return
            self._stop.wait(self.interval_s)

    def start(self) -> Sampler:
        """Start sampling on the thread; returns the sampler."""
        self._thread.start()
        return self

    def stop(self) -> list[GpuSample]:
        """Stop sampling and return the readings taken."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
            if self._thread.is_alive():  # an NVML call that does not return: leave it, say so
                self.failure = self.failure or "the sampling thread did not stop within 5 s"
        return list(self.readings)


def activity(
    api: NvmlApi, samples: int = 10, interval_s: float = 0.25, sleep: Callable[[float], None] = time.sleep
) -> ActivitySample:
    """Every GPU's utilisation and power ``samples`` times (nvidia-smi's GPU-Util and power draw),
    then its compute processes (``nvmlDeviceGetComputeRunningProcesses``); a GPU that stops
    answering keeps what it had."""
    nvml = Nvml(api)
    init = nvml.ask("nvmlInit")
    if isinstance(init, ProbeError):
        raise ProbeUnavailable(init_failure(init.error))
    count = nvml.ask("nvmlDeviceGetCount", convert=int)
    if not isinstance(count, int):
        raise ProbeUnavailable(f"NVML could not count the GPUs (nvmlDeviceGetCount: {count})")
    sampler = Sampler(api, list(range(count)), interval_s, ACTIVITY)
    static = {i: _identity(sampler.nvml, h) for i, h in sampler.handles.items()}
    readings = sampler.take(samples, sleep)
    out = []
    for i in range(count):
        mine = [r for r in readings if r.index == i]
        procs: tuple[tuple[int, int], ...] = ()
        if i not in sampler.errors:
            got = sampler.nvml.ask(
                "nvmlDeviceGetComputeRunningProcesses",
                sampler.handles[i],
                convert=lambda ps: tuple((int(p["pid"]), int(p.get("usedGpuMemory") or 0)) for p in ps),
            )
            procs = got if isinstance(got, tuple) else ()
        uuid, bus_id, power_limit = static.get(i, ("", "", None))
        util = tuple(r.util for r in mine if r.util is not None)
        power = tuple(r.power_w for r in mine if r.power_w is not None)
        out.append(GpuActivity(i, uuid, bus_id, util, power, power_limit, procs, sampler.errors.get(i, "")))
    return ActivitySample("live", samples, interval_s, tuple(out))


def _identity(nvml: Nvml, h: str) -> tuple[str, str, float | None]:
    """UUID, bus id and power limit of a GPU (``nvmlDeviceGetUUID``, ``...GetPciInfo``,
    ``...GetEnforcedPowerLimit``)."""
    uuid = nvml.ask("nvmlDeviceGetUUID", h, convert=str)
    bus = nvml.ask("nvmlDeviceGetPciInfo", h, convert=lambda p: short_bus_id(p["busId"]))
    limit = nvml.ask("nvmlDeviceGetEnforcedPowerLimit", h, convert=lambda mw: int(mw) / 1000.0)
    return (
        uuid if isinstance(uuid, str) else "",
        bus if isinstance(bus, str) else "",
        limit if isinstance(limit, float) else None,
    )


def activity_recording(calls: list[dict[str, Any]], samples: int, interval_s: float, label: str) -> dict[str, Any]:
    """A sampling's NVML calls as a document ``replay_activity`` answers from."""
    return {
        "kind": "activity-recording",
        "schema_version": ACTIVITY_SCHEMA_VERSION,
        "label": label,
        "samples": samples,
        "interval_s": interval_s,
        "nvml": calls,
    }


def replay_activity(doc: Any, name: str) -> ActivitySample:
    """Sample again from a recording (no waiting between samples)."""
    if not isinstance(doc, dict) or doc.get("kind") != "activity-recording" or not isinstance(doc.get("nvml"), list):
        raise InputError(f"{name} is not an activity recording (topodoctor job --live --record-live FILE)")
    samples, interval = doc.get("samples"), doc.get("interval_s")
    if not isinstance(samples, int) or not isinstance(interval, (int, float)) or samples < 1:
        raise InputError(f"{name}: samples and interval_s are missing or wrong")
    got = activity(FakeNvml(doc["nvml"], name), samples, float(interval), sleep=lambda s: None)
    return ActivitySample(f"replay {name}", got.samples, got.interval_s, got.gpus)


def live_activity(
    samples: int, interval_s: float, record: bool = False
) -> tuple[ActivitySample, dict[str, Any] | None]:
    """Sample this node's GPUs; with ``record``, also the recording of every NVML call made."""
    if not record:
        return activity(LiveNvml(), samples, interval_s), None
    recorder = RecordingNvml(LiveNvml())
    got = activity(recorder, samples, interval_s)
    return got, activity_recording(recorder.calls, samples, interval_s, "live")
