"""What NVML showed of a node's GPUs over a few seconds (``job --live``): per GPU, how busy and how
hungry it was and who ran on it, as plain data the job doctor judges."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.core.stats import median


@dataclass(frozen=True)
class GpuActivity:
    """One GPU over the sampling: per-sample utilisation (%) and power (W); what failed, if anything."""

    index: int
    uuid: str
    bus_id: str
    util: tuple[int, ...]
    power_w: tuple[float, ...]
    power_limit_w: float | None
    processes: tuple[tuple[int, int], ...]  # (pid, bytes of GPU memory it uses)
    error: str = ""  # an NVML answer that stopped the sampling of this GPU (GPU_IS_LOST, ...)

    @property
    def median_util(self) -> float | None:
        """Median utilisation over the samples; None without any."""
        return median(self.util) if self.util else None

    @property
    def median_power_w(self) -> float | None:
        """Median power over the samples; None without any."""
        return median(self.power_w) if self.power_w else None


@dataclass(frozen=True)
class ActivitySample:
    """Every GPU of a node over ``samples`` readings ``interval_s`` apart."""

    origin: str  # "live" or "replay NAME"
    samples: int
    interval_s: float
    gpus: tuple[GpuActivity, ...]
