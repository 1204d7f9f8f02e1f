"""Prometheus series of GPU and NIC fitness for `check --format prometheus` / `--metrics`.

Clock-event reasons as dcgm-exporter exports them (the bit mask, DCGM_FI_DEV_CLOCKS_EVENT_REASONS)
and one 0/1 series per reason; temperatures, power and clocks; and what the PCIe, violation
and NIC port counters did during the check (their rise between the probe's two readings,
with the window it was taken over). Raw counters are not exported: they count since boot
and saturate, and a textfile gauge of a raw count invites exactly the wrong alert.

The families join ``report/prometheus.py``'s one table; values the probe could not read
are left out (no series), never written as 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from topodoctor.model.fitness import CLOCK_EVENT_REASONS

if TYPE_CHECKING:
    from topodoctor.model.snapshot import HostSnapshot

# ``scope``: a job's check and the node's write files of their own, whose series must differ.
_GPU = ("Hostname", "scope", "gpu", "UUID", "pci_bus_id")
_PORT = ("Hostname", "scope", "nic", "port")

FITNESS_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "topodoctor_gpu_clocks_event_reasons": (
        "Active clock-event reasons as NVML's bit mask (DCGM_FI_DEV_CLOCKS_EVENT_REASONS).",
        _GPU,
    ),
    "topodoctor_gpu_clocks_event_reason": ("1 when the clock-event reason is active, 0 when not.", (*_GPU, "reason")),
    "topodoctor_gpu_temperature_celsius": ("GPU or memory temperature.", (*_GPU, "sensor")),
    "topodoctor_gpu_slowdown_temperature_celsius": ("Temperature at which the GPU slows down.", _GPU),
    "topodoctor_gpu_power_usage_watts": ("Power draw when probed.", _GPU),
    "topodoctor_gpu_power_limit_watts": ("Power limit: the enforced one and the default.", (*_GPU, "limit")),
    "topodoctor_gpu_clock_hertz": (
        "SM or memory clock: current, maximum, or applications clock.",
        (*_GPU, "clock", "kind"),
    ),
    "topodoctor_gpu_counter_window_seconds": ("Time between the probe's two counter readings.", _GPU),
    "topodoctor_gpu_violation_during_check_seconds": (
        "Time a policy held the clocks down during the check (rise of its violation counter).",
        (*_GPU, "policy"),
    ),
    "topodoctor_gpu_pcie_errors_during_check": ("Rise of a PCIe error counter during the check.", (*_GPU, "counter")),
    "topodoctor_nic_port_up": ("1 when the RDMA port is ACTIVE and LinkUp, 0 when not.", _PORT),
    "topodoctor_nic_port_rate_bytes_per_second": ("Rate the RDMA port trained to.", _PORT),
    "topodoctor_nic_port_errors_during_check": (
        "Rise of a port error counter (counters/ and hw_counters/) during the check.",
        (*_PORT, "counter"),
    ),
}

Add = Callable[..., None]


def _rise(a: object, b: object) -> int | None:
    """What a counter did between the readings; None when either is unread or it went back
    (a counter reset by a driver reload between the readings is no rise)."""
    return b - a if isinstance(a, int) and isinstance(b, int) and b >= a else None


def fitness_series(
    add: Add, host: str, gpu: Callable[[int], dict[str, str]], snap: HostSnapshot, only: Collection[int] | None = None
) -> None:
    """Add every fitness series of ``snap`` (of the GPUs in ``only``, where given); ``gpu`` gives
    a GPU index's dcgm labels. The run's ``scope`` label is the collector's to fill in."""
    for g in snap.gpus:
        if g.lost is not None or (only is not None and g.index not in only):
            continue
        labels = {"Hostname": host, **gpu(g.index)}
        f = g.fitness
        if isinstance(f.clock_events, int):
            add("topodoctor_gpu_clocks_event_reasons", f.clock_events, **labels)
            for bit, name in CLOCK_EVENT_REASONS.items():
                add("topodoctor_gpu_clocks_event_reason", 1 if f.clock_events & bit else 0, reason=name, **labels)
        for sensor, temp in (("gpu", f.temperature_c), ("memory", f.memory_temperature_c)):
            if isinstance(temp, int):
                add("topodoctor_gpu_temperature_celsius", temp, sensor=sensor, **labels)
        if isinstance(f.slowdown_c, int):
            add("topodoctor_gpu_slowdown_temperature_celsius", f.slowdown_c, **labels)
        if isinstance(f.power_mw, int):
            add("topodoctor_gpu_power_usage_watts", f.power_mw / 1000, **labels)
        for limit, mw in (("enforced", f.power_limit_mw), ("default", f.power_default_mw)):
            if isinstance(mw, int):
                add("topodoctor_gpu_power_limit_watts", mw / 1000, limit=limit, **labels)
        for clock, kind, mhz in (
            ("sm", "current", f.sm_clock_mhz),
            ("sm", "max", f.sm_clock_max_mhz),
            ("sm", "applications", f.app_sm_clock_mhz),
            ("memory", "current", f.memory_clock_mhz),
            ("memory", "max", f.memory_clock_max_mhz),
            ("memory", "applications", f.app_memory_clock_mhz),
        ):
            if isinstance(mhz, int):
                add("topodoctor_gpu_clock_hertz", mhz * 1e6, clock=clock, kind=kind, **labels)
        window = _rise_f(f.start.at_s, f.end.at_s)
        if window is not None:
            add("topodoctor_gpu_counter_window_seconds", window, **labels)
        for fld in dataclasses.fields(f.start.violation_ns):
            ns = _rise(getattr(f.start.violation_ns, fld.name), getattr(f.end.violation_ns, fld.name))
            if ns is not None:
                add("topodoctor_gpu_violation_during_check_seconds", ns / 1e9, policy=fld.name, **labels)
        for fld in dataclasses.fields(f.start.pcie):
            n = _rise(getattr(f.start.pcie, fld.name), getattr(f.end.pcie, fld.name))
            if n is not None:
                add("topodoctor_gpu_pcie_errors_during_check", n, counter=fld.name, **labels)
    for nic in snap.nics:
        for p in nic.ports:
            where = {"Hostname": host, "nic": nic.name, "port": str(p.port)}
            if isinstance(p.state, str) and isinstance(p.phys_state, str):
                add("topodoctor_nic_port_up", 1 if (p.state, p.phys_state) == ("ACTIVE", "LinkUp") else 0, **where)
            if isinstance(p.rate_gbps, float):
                add("topodoctor_nic_port_rate_bytes_per_second", p.rate_gbps * 1e9 / 8, **where)
            for name, start in p.counters_start.items():
                n = _rise(start, p.counters_end.get(name))
                if n is not None:
                    add("topodoctor_nic_port_errors_during_check", n, counter=name, **where)


def _rise_f(a: object, b: object) -> float | None:
    return round(b - a, 6) if isinstance(a, float) and isinstance(b, float) else None
