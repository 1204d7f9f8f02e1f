"""Per-GPU fitness queries: clock-event reasons, violation times, temperatures and their
thresholds, power and its limits, clocks, performance state, and the PCIe and energy counters.

Counters are read twice (``counter_sample`` at the GPU's probe and again when the probe ends),
each time with the kernel's uptime, so the rules can judge what a counter did during the
check rather than a raw count that may have saturated long ago.
"""

from __future__ import annotations

from topodoctor.core.probed import Probed, Unsupported
from topodoctor.model.fitness import CounterSample, GpuFitness, PcieCounters, ViolationTimes
from topodoctor.probe.gpu import field_values
from topodoctor.probe.query import Nvml, sys_read
from topodoctor.probe.sysfs import Sysfs

# nvmlPerfPolicyType_t, in ViolationTimes' field order.
_POLICIES = (0, 1, 2, 3, 4, 5)  # POWER THERMAL SYNC_BOOST BOARD_LIMIT LOW_UTILIZATION RELIABILITY
# NVML_FI_DEV_CLOCKS_EVENT_REASON_{SW_THERM,HW_THERM,HW_POWER_BRAKE}_SLOWDOWN: ns spent in each.
_REASON_TIME_FIELDS = (269, 270, 271)
# NVML_FI_DEV_PCIE_*, in PcieCounters' field order: nvidia-ml-py has a call for the replay
# counter only, so the whole set comes in one field batch.
_PCIE_FIELDS = (94, 95, 173, 174, 177, 175, 176, 178, 179, 180, 181, 169)
FI_MEMORY_TEMP = 82
FI_TOTAL_ENERGY = 83
_SAMPLE_FIELDS = (*_REASON_TIME_FIELDS, *_PCIE_FIELDS, FI_TOTAL_ENERGY)
UPTIME = "/proc/uptime"
# nvmlTemperatureThresholds_t
_SHUTDOWN, _SLOWDOWN, _MEM_MAX, _GPU_MAX = 0, 1, 2, 3
CLOCK_SM, CLOCK_MEM = 1, 2  # nvmlClockType_t
TEMPERATURE_GPU = 0  # nvmlTemperatureSensors_t


def _uptime(text: str) -> float:
    return float(text.split()[0])


def _violation_ns(v: dict[str, int]) -> int:
    return int(v["violationTime"])


def counter_sample(nvml: Nvml, fs: Sysfs, h: str) -> CounterSample:
    """One reading of the counters: nvmlDeviceGetViolationStatus per policy (nvidia-smi -q -d
    PERFORMANCE), the clock-event reason times, PCIe error counters and the energy counter in
    one nvmlDeviceGetFieldValues batch, and /proc/uptime for when."""
    at = sys_read(fs, UPTIME, _uptime)
    fields = [[fid, 0] for fid in _SAMPLE_FIELDS]
    violations = [nvml.ask("nvmlDeviceGetViolationStatus", h, p, convert=_violation_ns) for p in _POLICIES]
    f = field_values(nvml, h, fields)
    return CounterSample(
        at_s=at,
        violation_ns=ViolationTimes(*violations, *(f[(fid, 0)] for fid in _REASON_TIME_FIELDS)),
        pcie=PcieCounters(*(f[(fid, 0)] for fid in _PCIE_FIELDS)),
        energy_mj=f[(FI_TOTAL_ENERGY, 0)],
    )


def _reasons(nvml: Nvml, h: str, which: str) -> Probed[int]:
    """nvmlDeviceGet{which}ClocksEventReasons; drivers and bindings before the rename know
    only nvmlDeviceGet{which}ClocksThrottleReasons (the same mask)."""
    got: Probed[int] = nvml.ask(f"nvmlDeviceGet{which}ClocksEventReasons", h, convert=int)
    if isinstance(got, Unsupported) and got.reason != "NOT_SUPPORTED":
        got = nvml.ask(f"nvmlDeviceGet{which}ClocksThrottleReasons", h, convert=int)
    return got


def probe_fitness(nvml: Nvml, fs: Sysfs, h: str) -> GpuFitness:
    """Clocks, power, temperatures (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE,CLOCK) and
    the first counter sample; ``end`` is filled in when the probe ends (``with_end``)."""
    start = counter_sample(nvml, fs, h)
    memory_temp = field_values(nvml, h, [[FI_MEMORY_TEMP, 0]])[(FI_MEMORY_TEMP, 0)]
    limits = nvml.ask("nvmlDeviceGetPowerManagementLimitConstraints", h, convert=lambda c: (int(c[0]), int(c[1])))
    return GpuFitness(
        clock_events=_reasons(nvml, h, "Current"),
        clock_events_supported=_reasons(nvml, h, "Supported"),
        temperature_c=nvml.ask("nvmlDeviceGetTemperature", h, TEMPERATURE_GPU, convert=int),
        memory_temperature_c=memory_temp,
        slowdown_c=nvml.ask("nvmlDeviceGetTemperatureThreshold", h, _SLOWDOWN, convert=int),
        shutdown_c=nvml.ask("nvmlDeviceGetTemperatureThreshold", h, _SHUTDOWN, convert=int),
        gpu_max_c=nvml.ask("nvmlDeviceGetTemperatureThreshold", h, _GPU_MAX, convert=int),
        memory_max_c=nvml.ask("nvmlDeviceGetTemperatureThreshold", h, _MEM_MAX, convert=int),
        power_mw=nvml.ask("nvmlDeviceGetPowerUsage", h, convert=int),
        power_limit_mw=nvml.ask("nvmlDeviceGetEnforcedPowerLimit", h, convert=int),
        power_default_mw=nvml.ask("nvmlDeviceGetPowerManagementDefaultLimit", h, convert=int),
        power_min_mw=limits[0] if isinstance(limits, tuple) else limits,
        power_max_mw=limits[1] if isinstance(limits, tuple) else limits,
        sm_clock_mhz=nvml.ask("nvmlDeviceGetClockInfo", h, CLOCK_SM, convert=int),
        sm_clock_max_mhz=nvml.ask("nvmlDeviceGetMaxClockInfo", h, CLOCK_SM, convert=int),
        memory_clock_mhz=nvml.ask("nvmlDeviceGetClockInfo", h, CLOCK_MEM, convert=int),
        memory_clock_max_mhz=nvml.ask("nvmlDeviceGetMaxClockInfo", h, CLOCK_MEM, convert=int),
        app_sm_clock_mhz=nvml.ask("nvmlDeviceGetApplicationsClock", h, CLOCK_SM, convert=int),
        app_memory_clock_mhz=nvml.ask("nvmlDeviceGetApplicationsClock", h, CLOCK_MEM, convert=int),
        pstate=nvml.ask("nvmlDeviceGetPerformanceState", h, convert=int),
        memory_bus_width_bits=nvml.ask("nvmlDeviceGetMemoryBusWidth", h, convert=int),
        start=start,
        end=start,
    )
