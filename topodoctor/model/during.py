"""What NVML showed of the GPUs while a measurement ran, as plain data (JSON round-trip).

A thread beside the measurement reads every GPU a few times a second (``probe/during.py``): the
compute processes on it (kept as a union over the samples, so a process that started and ended
between two reads of the process list before and after the run is still seen), utilisation,
clock-event reasons, power and temperature; and, once before and once after, the link error
counters (PCIe replays, each NVLink's replay, recovery and CRC counters). Nothing here judges:
the cause engine (``diagnosis/during.py``) does. A result made before this was sampled has none
(``during`` is None) and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topodoctor.model.fitness import reason_names

# nvmlClocksEventReason bits that mean protection held the clocks down: HW slowdown, SW thermal,
# HW thermal, HW power brake. SW power cap (0x4) is the normal state of a GPU at full load.
SLOWDOWN_BITS = 0x8 | 0x20 | 0x40 | 0x80
SW_POWER_CAP = 0x4


@dataclass(frozen=True)
class SeenProcess:
    """A compute process that is not topodoctor's own, as the samples saw it on one GPU."""

    pid: int
    uid: int | None
    command: str | None
    memory_bytes: int | None  # the most GPU memory a sample listed it with
    first_s: float  # seconds after the sampling began when it was first listed
    last_s: float  # ... and last listed
    samples: int  # samples that listed it
    sm_util_pct: int | None = None  # its highest SM share in NVML's per-process samples; None unread

    def label(self) -> str:
        """``pid 2972 (uid 0, python3 train.py)``: how messages name it."""
        user = f"uid {self.uid}" if self.uid is not None else "user unknown"
        cmd = (self.command or "command unknown")[:60]
        return f"pid {self.pid} ({user}, {cmd})"


@dataclass(frozen=True)
class GpuDuring:
    """One GPU over the sampling."""

    index: int
    samples: int
    util_max_pct: int | None = None
    reasons: dict[str, int] = field(default_factory=dict)  # clock-event reason -> samples it was active in
    power_max_w: float | None = None
    power_limit_w: float | None = None
    temp_max_c: int | None = None
    sm_mhz_min: int | None = None
    sm_mhz_max: int | None = None  # the GPU's maximum SM clock, to read the lowest one against
    foreign: tuple[SeenProcess, ...] = ()
    own: int = 0  # topodoctor's own processes seen on it (the ranks, the copy timer)
    counters_before: dict[str, int] = field(default_factory=dict)  # pcie_replay, nvlink3_crc, ...
    counters_after: dict[str, int] = field(default_factory=dict)
    counters_error: str = ""  # why the counters could not be read, where they could not
    error: str = ""  # the NVML answer that stopped this GPU's sampling (GPU_IS_LOST, ...)

    def rose(self) -> dict[str, int]:
        """The counters that rose during the run, by how much."""
        out = {}
        for name, after in self.counters_after.items():
            before = self.counters_before.get(name)
            if before is not None and after > before:
                out[name] = after - before
        return out

    def slowdown(self) -> dict[str, int]:
        """The slowdown reasons (never SW power cap) seen, with the samples each was active in."""
        names = set(reason_names(SLOWDOWN_BITS))
        return {k: n for k, n in self.reasons.items() if k in names and n > 0}


@dataclass(frozen=True)
class RunSampling:
    """Every GPU of the run over ``ticks`` samples ``interval_s`` apart (longer runs stretch the
    interval, so the count stays bounded), and what one sample cost the sampling process."""

    interval_s: float
    duration_s: float
    ticks: int
    gpus: tuple[GpuDuring, ...]
    tick_ms: float | None = None  # mean wall time of one sample of every GPU
    error: str = ""  # why the sampling stopped early, where it did

    def gpu(self, index: int) -> GpuDuring | None:
        """The sampling of one GPU, or None where it was not sampled."""
        return next((g for g in self.gpus if g.index == index), None)
