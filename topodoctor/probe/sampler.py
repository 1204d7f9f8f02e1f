"""NVML readings during a load: clocks, power, temperature and clock-event reasons, sampled on a
thread while a measurement runs in another process, and each GPU's own limits (the HBM peak
from its bus width and maximum memory clock). Built on the probe's NVML boundary, so the live
binding, a recorder or a fake answer alike; a reading that fails is None, never a guess.

nvidia-smi equivalents: ``--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,
clocks_event_reasons.active`` in a loop (``-lms 250``), and ``-q -d CLOCK,POWER`` for limits.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from topodoctor.probe.api import NvmlApi
from topodoctor.probe.query import Nvml

CLOCK_SM, CLOCK_MEM = 1, 2  # nvmlClockType_t: NVML_CLOCK_SM, NVML_CLOCK_MEM
TEMP_GPU = 0  # NVML_TEMPERATURE_GPU


@dataclass(frozen=True)
class Reading:
    """One GPU at one moment (CLOCK_MONOTONIC seconds)."""

    index: int
    t: float
    sm_mhz: int | None
    mem_mhz: int | None
    power_w: float | None
    temp_c: int | None
    reasons: int | None  # nvmlClocksEventReasons bits


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


def _handle(nvml: Nvml, index: int) -> str | None:
    h = nvml.ask("nvmlDeviceGetHandleByIndex", index)
    return h if isinstance(h, str) else None


def limits(api: NvmlApi, index: int) -> Limits:
    """``nvmlDeviceGetMaxClockInfo`` (SM, memory), ``nvmlDeviceGetMemoryBusWidth``,
    ``nvmlDeviceGetEnforcedPowerLimit`` (mW)."""
    nvml = Nvml(api)
    h = _handle(nvml, index)
    if h is None:
        return Limits(index, None, None, None, None)
    sm = _int(nvml.ask("nvmlDeviceGetMaxClockInfo", h, CLOCK_SM))
    mem = _int(nvml.ask("nvmlDeviceGetMaxClockInfo", h, CLOCK_MEM))
    bus = _int(nvml.ask("nvmlDeviceGetMemoryBusWidth", h))
    power = _int(nvml.ask("nvmlDeviceGetEnforcedPowerLimit", h))
    return Limits(index, sm, mem, bus, None if power is None else power / 1000.0)


def read(api: NvmlApi, index: int, handle: str) -> Reading:
    """One reading: ``nvmlDeviceGetClockInfo``, ``nvmlDeviceGetPowerUsage``,
    ``nvmlDeviceGetTemperature``, ``nvmlDeviceGetCurrentClocksEventReasons`` (the older
    ``...ThrottleReasons`` where the binding lacks it)."""
    nvml = Nvml(api)
    reasons = nvml.ask("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if not isinstance(reasons, int):
        reasons = nvml.ask("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    power = _int(nvml.ask("nvmlDeviceGetPowerUsage", handle))
    return Reading(
        index,
        time.monotonic(),
        _int(nvml.ask("nvmlDeviceGetClockInfo", handle, CLOCK_SM)),
        _int(nvml.ask("nvmlDeviceGetClockInfo", handle, CLOCK_MEM)),
        None if power is None else power / 1000.0,
        _int(nvml.ask("nvmlDeviceGetTemperature", handle, TEMP_GPU)),
        _int(reasons),
    )


class Sampler:
    """Readings of ``indices`` every ``interval_s`` on a daemon thread, from ``start`` to ``stop``.

    NVML calls are short and release the interpreter lock, so sampling beside a process that
    does the work costs it nothing; the thread never outlives ``stop`` by more than a reading.
    """

    def __init__(self, api: NvmlApi, indices: list[int], interval_s: float = 0.25) -> None:
        self.api, self.interval_s = api, interval_s
        nvml = Nvml(api)
        self.handles = {i: h for i in indices if (h := _handle(nvml, i)) is not None}
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for i, h in self.handles.items():
                self.readings.append(read(self.api, i, h))
            self._stop.wait(self.interval_s)

    def start(self) -> Sampler:
        """Start sampling on the thread; returns the sampler."""
        self._thread.start()
        return self

    def stop(self) -> list[Reading]:
        """Stop sampling and return the readings taken."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        return list(self.readings)
