"""Fitness data of a snapshot: what holds a GPU or a NIC port back from full speed.

Clock-event reasons, temperatures and their thresholds, power and its limits, clocks, and
the health counters of the PCIe link and of each NIC port. Counters are read twice within
one check (``start`` and ``end``, timed by the kernel's uptime clock read through the same
recorded boundary), because several are narrow and saturate: a rule judges what they did
during the window, never the raw count alone.

Snapshots and recordings made before these were probed decode with every field
"not recorded" (a ``ProbeError``): the checks that need them say they could not check.
"""

from __future__ import annotations

from dataclasses import field, fields
from typing import Any

from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.core.records import Record

NOT_RECORDED = "NOT_RECORDED"

# nvmlClocksEventReason* bits (nvml.h), named as nvidia-smi -q -d PERFORMANCE lists them.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def reason_names(mask: int) -> list[str]:
    """The reasons set in a clock-event mask, lowest bit first."""
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]


def _not_recorded(what: str) -> ProbeError:
    return ProbeError(NOT_RECORDED, what)


def _unrecorded(cls: Any, what: str) -> Any:
    """An instance whose every probed field is "not recorded" (a snapshot from before it)."""
    return cls(**{f.name: _not_recorded(f"{what}.{f.name}") for f in fields(cls)})


class ViolationTimes(Record):
    """Nanoseconds each policy held the clocks down since the driver loaded
    (nvmlDeviceGetViolationStatus / NVML_FI_DEV_PERF_POLICY_*, NVML_FI_DEV_CLOCKS_EVENT_REASON_*)."""

    power: Probed[int]
    thermal: Probed[int]
    sync_boost: Probed[int]
    board_limit: Probed[int]
    low_utilization: Probed[int]
    reliability: Probed[int]
    sw_thermal: Probed[int]
    hw_thermal: Probed[int]
    hw_power_brake: Probed[int]


class PcieCounters(Record):
    """The GPU's PCIe link error counters (NVML_FI_DEV_PCIE_*), counted since the driver loaded."""

    replay: Probed[int]
    replay_rollover: Probed[int]
    correctable: Probed[int]
    naks_received: Probed[int]
    naks_sent: Probed[int]
    receiver_errors: Probed[int]
    bad_tlp: Probed[int]
    bad_dllp: Probed[int]
    non_fatal: Probed[int]
    fatal: Probed[int]
    unsupported_request: Probed[int]
    l0_to_recovery: Probed[int]


class CounterSample(Record):
    """One reading of a GPU's counters, at ``at_s`` seconds of kernel uptime."""

    at_s: Probed[float]
    violation_ns: ViolationTimes
    pcie: PcieCounters
    energy_mj: Probed[int]

    @staticmethod
    def unrecorded(what: str) -> CounterSample:
        """A sample whose every field is not recorded: how a recording made before these counters replays."""
        return CounterSample(
            _not_recorded(f"{what}.at_s"),
            _unrecorded(ViolationTimes, f"{what}.violation_ns"),
            _unrecorded(PcieCounters, f"{what}.pcie"),
            _not_recorded(f"{what}.energy_mj"),
        )


class GpuFitness(Record):
    """Clocks, power, temperatures and health counters of one GPU (nvidia-smi -q -d
    PERFORMANCE,POWER,TEMPERATURE,CLOCK, and the PCIe counters of nvidia-smi -q)."""

    clock_events: Probed[int]  # nvmlDeviceGetCurrentClocksEventReasons: a mask of CLOCK_EVENT_REASONS
    clock_events_supported: Probed[int]
    temperature_c: Probed[int]
    memory_temperature_c: Probed[int]
    slowdown_c: Probed[int]
    shutdown_c: Probed[int]
    gpu_max_c: Probed[int]
    memory_max_c: Probed[int]
    power_mw: Probed[int]
    power_limit_mw: Probed[int]  # enforced
    power_default_mw: Probed[int]
    power_min_mw: Probed[int]
    power_max_mw: Probed[int]
    sm_clock_mhz: Probed[int]
    sm_clock_max_mhz: Probed[int]
    memory_clock_mhz: Probed[int]
    memory_clock_max_mhz: Probed[int]
    app_sm_clock_mhz: Probed[int]
    app_memory_clock_mhz: Probed[int]
    pstate: Probed[int]
    memory_bus_width_bits: Probed[int]
    start: CounterSample
    end: CounterSample

    @staticmethod
    def unrecorded() -> GpuFitness:
        """A GPU's fitness data with every field not recorded (a recording made before fitness probing)."""
        values: dict[str, Any] = {f.name: _not_recorded(f"fitness.{f.name}") for f in fields(GpuFitness)}
        values["start"] = CounterSample.unrecorded("fitness.start")
        values["end"] = CounterSample.unrecorded("fitness.end")
        return GpuFitness(**values)

    @staticmethod
    def failed(err: ProbeError | Unsupported) -> GpuFitness:
        """Every field carries ``err``: a GPU that gave no handle, or a probe that did not ask
        (``Unsupported("NOT_ASKED")``: a topology-only probe)."""
        sample = CounterSample(
            err,
            ViolationTimes(*[err] * len(fields(ViolationTimes))),
            PcieCounters(*[err] * len(fields(PcieCounters))),
            err,
        )
        values: dict[str, Any] = {f.name: err for f in fields(GpuFitness)}
        values["start"] = values["end"] = sample
        return GpuFitness(**values)


# sysfs counters of an InfiniBand / RoCE port (ports/N/counters/*), all read where present.
NIC_PORT_COUNTERS = (
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)


class NicPort(Record):
    """One port of an RDMA device (/sys/class/infiniband/DEV/ports/N) and its net device."""

    port: int
    state: Probed[str]  # ACTIVE, DOWN, INIT, ARMED
    phys_state: Probed[str]  # LinkUp, Polling, Disabled, ...
    rate_gbps: Probed[float]
    link_layer: Probed[str]  # InfiniBand | Ethernet
    netdev: str | None
    netdev_state: Probed[str]  # operstate of the net device, for RoCE
    counters_start: dict[str, Probed[int]] = field(default_factory=dict)
    counters_end: dict[str, Probed[int]] = field(default_factory=dict)
    at_start_s: Probed[float] = field(default_factory=lambda: _not_recorded("at_start_s"))
    at_end_s: Probed[float] = field(default_factory=lambda: _not_recorded("at_end_s"))
