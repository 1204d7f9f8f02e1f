"""The rule cases of fabric and health (TD5xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from dataclasses import replace

from rule_case_kit import NA, Case, both, gpu
from rule_case_kit_disagreeing import _expecting
from rule_case_kit_edges_counts import ONE_FOREIGN
from rule_case_kit_fitness import X1, fitness, sample
from rule_case_kit_more import _KERNEL, _OLD, DAY_S, _kernel_log, _xid
from rule_case_kit_variants import fabric

from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.snapshot import ComputeProcess, RemappedRows, RetiredPages

CASES = [
    # fabric and health
    Case("TD501", False, "h100-x1", "fabric state not supported (no NVSwitch)"),
    Case(
        "TD502",
        False,
        "h200-x4",
        "GPU0 remap pending and failed (TD503)",
        gpu(0, remapped_rows=RemappedRows(0, 1, True, True)),
    ),
    Case(
        "TD503",
        False,
        "h200-x4",
        "GPU0 remap pending, not failed",
        gpu(0, remapped_rows=RemappedRows(0, 1, True, False)),
    ),
    Case(
        "TD504",
        False,
        "h200-x4",
        "GPU2 5 aggregate uncorrectable errors, 0 since reset",
        gpu(2, ecc_uncorrected_aggregate=5),
    ),
    Case("TD504", True, "h200-x4", "GPU2 1 uncorrectable error since reset", gpu(2, ecc_uncorrected_volatile=1)),
    Case("TD505", False, "h200-x4", "GPU3 persistence mode not supported", gpu(3, persistence_mode=NA)),
    Case(
        "TD508",
        False,
        "h200-x4",
        "GPU3 gave no handle: its bus id unknown, 4 GPUs on the bus",
        gpu(
            3,
            lost=ProbeError("GPU_IS_LOST", "nvmlDeviceGetHandleByIndex", 15),
            bus_id=ProbeError("GPU_IS_LOST", "x", 15),
        ),
    ),
    Case(
        "TD508",
        True,
        "x4-gpu-not-counted",
        "3 counted (one bus id unknown), 4 on the bus",
        gpu(
            2,
            lost=ProbeError("GPU_IS_LOST", "nvmlDeviceGetHandleByIndex", 15),
            bus_id=ProbeError("GPU_IS_LOST", "x", 15),
        ),
        subjects=("host",),
    ),
    Case("TD506", False, "x4-gpu-health", "MIG on where the expectations allow it", expect_from="x4-gpu-health"),
    Case(
        "TD507",
        False,
        "h200-x4",
        "GPU1 gave no handle: no permission (TD901)",
        gpu(1, lost=ProbeError("NO_PERMISSION", "nvmlDeviceGetHandleByIndex", 4)),
    ),
    Case(
        "TD508",
        False,
        "h200-x4",
        "no PCI listing (a container without /sys/bus/pci)",
        lambda s: replace(s, pci_gpus=Unsupported("ABSENT")),
    ),
    Case(
        "TD509", False, "h200-x4", "GPU2 3 retired pages, none pending", gpu(2, retired_pages=RetiredPages(2, 1, False))
    ),
    Case("TD511", True, "x4-foreign-processes", "a previous job on GPU1", subjects=("GPU1",), severity="info"),
    Case("TD511", False, "h200-x4", "no compute process on any GPU"),
    Case(
        "TD511",
        False,
        "x4-foreign-processes",
        "both processes are the check's own (its ranks, children of the probing process)",
        gpu(1, compute_processes=(ComputeProcess(3121, 1 << 30, 0, 3120, "python -m rank", True),)),
    ),
    Case(
        "TD511",
        False,
        "h200-x4",
        "GPU1's process list unreadable (TD901)",
        gpu(1, compute_processes=ProbeError("NO_PERMISSION", "nvmlDeviceGetComputeRunningProcesses", 4)),
    ),
    # MIG: an explicit "not enabled" in the file, and an explicit "enabled"
    Case(
        "TD506",
        True,
        "h200-x4",
        "MIG on where the file says mig_enabled: false",
        gpu(2, mig_mode=True),
        expect_from="h200-x4",
        context=_expecting(mig_enabled=False),
        subjects=("GPU2",),
    ),
    Case(
        "TD506",
        False,
        "h200-x4",
        "MIG on where the file says mig_enabled: true",
        gpu(2, mig_mode=True),
        expect_from="h200-x4",
        context=_expecting(mig_enabled=True),
    ),
    # retired pages: 64 is the limit
    *(
        Case(
            "TD510",
            n >= 64,
            "h200-x4",
            f"GPU2 {n} retired pages",
            gpu(2, retired_pages=RetiredPages(40, n - 40, False)),
            at="RETIRED_PAGES_LIMIT",
        )
        for n in (63, 64)
    ),
    # TD52x: an Xid's age in seconds up to two minutes, in minutes up to two hours, then in hours
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 119.0),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 120.0),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 3000.0),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 7199.0),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 7200.0),
    # TD511: one process of another job, said in the singular
    Case(
        "TD511",
        True,
        "h200-x4",
        "one process of another job on GPU2",
        gpu(2, compute_processes=(ONE_FOREIGN,)),
        subjects=("GPU2",),
        severity="info",
    ),
    # TD530: reasons active now
    Case(
        "TD530",
        False,
        X1,
        "SW power cap and idle set (0x5): the normal state at the power limit",
        fitness(clock_events=0x5),
    ),
    Case("TD530", False, X1, "applications clocks setting and sync boost (0x12)", fitness(clock_events=0x12)),
    Case("TD530", True, X1, "HW power brake slowdown (0x80)", fitness(clock_events=0x80), subjects=("GPU0",)),
    # TD531: violation time rising
    Case(
        "TD531",
        False,
        X1,
        "the power policy's violation time rises by 5 s (SW power cap at full load)",
        sample("end", "violation_ns", power=5_000_000_000),
    ),
    Case(
        "TD531",
        False,
        X1,
        "HW thermal slowdown time is 9 s at both readings (a slowdown long ago)",
        both(
            sample("start", "violation_ns", hw_thermal=9_000_000_000),
            sample("end", "violation_ns", hw_thermal=9_000_000_000),
        ),
    ),
    Case(
        "TD531",
        True,
        X1,
        "HW power brake time rises by 1 ms",
        sample("end", "violation_ns", hw_power_brake=1_000_000),
        subjects=("GPU0",),
    ),
    # TD532: applications clocks
    Case("TD532", False, X1, "as recorded: applications clocks at max (1980 / 3201 MHz)"),
    Case(
        "TD532",
        True,
        X1,
        "SM applications clock 1755 MHz (max 1980)",
        fitness(app_sm_clock_mhz=1755),
        subjects=("GPU0",),
    ),
    Case("TD532", True, X1, "memory applications clock 2619 MHz (max 3201)", fitness(app_memory_clock_mhz=2619)),
    # TD533: power limit
    Case("TD533", False, X1, "as recorded: 700 W enforced, 700 W default"),
    Case(
        "TD533",
        False,
        "x1-power-capped",
        "capped to 500 W on a node type whose expectations say 500 W",
        expect_from="x1-power-capped",
    ),
    Case(
        "TD533",
        True,
        X1,
        "700 W on a node type whose expectations say 700 W, enforced 699 W",
        fitness(power_limit_mw=699000),
        expect_from=X1,
    ),
    # TD534: idle temperature
    Case(
        "TD534",
        False,
        X1,
        "idle at 73 C, 16 C below slowdown at 89 C",
        fitness(temperature_c=73),
        at="IDLE_SLOWDOWN_MARGIN_C",
    ),
    Case("TD534", False, X1, "busy (no idle reason) at 85 C", fitness(temperature_c=85, clock_events=0x4)),
    Case(
        "TD534",
        True,
        X1,
        "idle at 74 C, 15 C below slowdown",
        fitness(temperature_c=74),
        subjects=("GPU0",),
        at="IDLE_SLOWDOWN_MARGIN_C",
    ),
    _xid("TD520", "fallen-off-bus.log", 79, "critical"),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", DAY_S, at="RECENT_S"),  # a day to the second: still recent
    _xid("TD520", "fallen-off-bus.log", 79, "warning", DAY_S + 1, at="RECENT_S"),  # a second older: a warning
    _xid("TD521", "nvlink.log", 74, "error"),
    _xid("TD521", "nvlink.log", 149, "error"),  # "Fatal" in its text
    _xid("TD521", "nvlink.log", 144, "warning"),  # "Nonfatal"
    _xid("TD521", "nvlink.log", 144, "error", sub=("Nonfatal", "Fatal")),
    Case(
        "TD521",
        True,
        "h200-x4",
        "kernel log: all of nvlink.log, recent",
        _kernel_log("nvlink.log", age_s=60.0),
        severity="error",
    ),
    _xid("TD522", "ecc.log", 48, "error"),
    _xid("TD522", "ecc.log", 94, "warning"),  # contained
    _xid("TD522", "ecc.log", 95, "error"),
    _xid("TD523", "row-remap.log", 63, "warning"),
    _xid("TD523", "row-remap.log", 64, "error"),
    _xid("TD524", "gsp.log", 119, "error"),
    _xid("TD524", "gsp.log", 120, "warning", DAY_S + 1),
    _xid("TD525", "application.log", 31, "info"),
    _xid("TD526", "other.log", 154, "error"),  # "(GPU Reset Required)"
    _xid("TD526", "other.log", 154, "error", sub=("GPU Reset Required", "Node Reboot Required")),
    _xid("TD526", "other.log", 154, "warning", sub=("GPU Reset Required", "None")),
    _xid("TD526", "other.log", 62, "warning"),
    Case("TD526", False, "h200-x4", "kernel log: only known Xids, recent", _kernel_log("ecc.log", age_s=60.0)),
    Case("TD521", False, "h200-x4", "kernel log: Xid 94 and 95, recent (TD522)", _kernel_log("ecc.log", age_s=60.0)),
    *(
        Case(code, True, "h200-x4", f"kernel log: {log} on GPU2", _kernel_log(log), severity=_OLD[code])
        for code, log in _KERNEL.items()
    ),
    Case(
        "TD511",
        True,
        "x4-foreign-processes",
        "a previous job's processes on GPU1, in a check that gates a job",
        gates_job=True,
        severity="error",
        subjects=("GPU1",),
    ),
    *(
        Case(code, False, "h200-x4", "kernel log: NVRM lines that are not Xid events", _kernel_log("not-xid.log"))
        for code in _KERNEL
    ),
    # the fabric's states in words: registered but failed, and not yet registered
    Case("TD501", True, "h200-x4", "GPU1 registered with the fabric, status failed", fabric(1, status="NVML_ERROR")),
    Case("TD501", True, "h200-x4", "GPU1's registration in progress", fabric(1, state="in_progress")),
    Case("TD501", False, "h200-x4", "GPU1's fabric state not supported", fabric(1, state="not_supported")),
]

# an Xid whose age cannot be told (the host's uptime unreadable): said so, and kept at its severity
CASES.append(
    Case(
        "TD520",
        True,
        "h200-x4",
        "kernel log: Xid 79, the host's uptime unknown",
        both(
            _kernel_log("fallen-off-bus.log", only="): 79,", age_s=60.0),
            lambda s: replace(s, kernel_events=replace(s.kernel_events, uptime_s=None)),
        ),
        severity="critical",
    )
)

# Xid 74 is an NVLink error whatever its text says; 144-150 name their own fatality
CASES.append(_xid("TD521", "nvlink.log", 74, "error", sub=("fatal error", "Nonfatal error")))
