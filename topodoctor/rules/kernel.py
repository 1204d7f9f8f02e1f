"""Kernel log rules (TD52x, fabric and health): the NVIDIA driver's XID events, by family.

Each rule gathers one family's events per GPU (matched by PCI bus id) and reports them once,
with how many, the codes, how long ago the last one was logged and its text. An event logged
more than a day before the check is reported as a warning at most: the log keeps every event
since boot, and a GPU reset since then does not clear it. A kernel log that could not be read
makes every rule here say it could not check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from topodoctor.core.pci import long_bus_id
from topodoctor.core.probed import Unsupported
from topodoctor.model.findings import SEVERITY_ORDER, Severity
from topodoctor.model.snapshot import KernelEvents, XidEvent
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

RECENT_S = 24 * 3600.0
NVLINK = {74, *range(144, 151)}
ECC = {48, 94, 95}
ROW_REMAP = {63, 64}
GSP = {119, 120}
APPLICATION = {13, 31, 43, 45}
FALLEN_OFF = {79}
KNOWN = NVLINK | ECC | ROW_REMAP | GSP | APPLICATION | FALLEN_OFF

Grade = Callable[[XidEvent], Severity]


def _log(ctx: Context) -> KernelEvents | None:
    ke = ctx.snap.kernel_events
    if isinstance(ke, Unsupported) and ke.reason == "NOT_PROBED":
        return None  # a snapshot from before kernel events were read: it says nothing either way
    if isinstance(ke, Unsupported):  # no kernel log to read is not "no events"
        ctx.missing("kernel-log", "kernel_events", f"KERNEL_LOG_{ke.reason}", "read /dev/kmsg")
        return None
    return ctx.need(ke, "kernel-log", "kernel_events")


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "at an unknown time"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago" if seconds < 7200 else f"{seconds / 3600:.1f} h ago"


def _report(ctx: Context, codes: Callable[[int], bool], what: str, grade: Grade) -> Iterator[Issue]:
    log = _log(ctx)
    if log is None:
        return
    index = {g.bus_id: g.index for g in ctx.snap.gpus if isinstance(g.bus_id, str)}
    groups: dict[str, list[XidEvent]] = {}
    for e in log.xids:
        if codes(e.code):
            who = f"GPU{index[e.bus_id]}" if e.bus_id in index else f"pci:{long_bus_id(e.bus_id)}"
            groups.setdefault(who, []).append(e)
    for who, events in sorted(groups.items()):
        last = max(events, key=lambda e: -1.0 if e.boot_s is None else e.boot_s)
        age = log.uptime_s - last.boot_s if log.uptime_s is not None and last.boot_s is not None else None
        worst = max((grade(e) for e in events), key=lambda s: SEVERITY_ORDER[s])
        if age is not None and age > RECENT_S and SEVERITY_ORDER[worst] > SEVERITY_ORDER["warning"]:
            worst = "warning"
        seen = sorted({e.code for e in events})
        yield Issue(
            who,
            f"{who}: {what}, Xid {'/'.join(map(str, seen))} x{len(events)}, last {_ago(age)}: {last.text[:120]}",
            {
                "codes": seen,
                "count": len(events),
                "last_age_s": None if age is None else round(age, 1),
                "last": last.text,
                "bus_id": last.bus_id,
            },
            severity=worst,
        )


@rule(
    "TD520",
    "xid-fallen-off-bus",
    "critical",
    also=("warning",),
)
def xid_fallen_off_bus(ctx: Context) -> Iterator[Issue]:
    """The driver logged Xid 79: a GPU fell off the bus.

    Events older than a day are reported as warnings, as for every Xid rule.

    Why it matters: the GPU stopped answering on PCIe (power, thermal, a failing card or riser).
    Until it is reset or the node rebooted, every job placed on it fails.

    How to fix: drain the node; collect nvidia-bug-report.sh; check the GPU's power, cooling and
    seating; reset the GPU or reboot, and replace it if it falls off again.
    """
    yield from _report(ctx, FALLEN_OFF.__contains__, "fell off the bus", lambda e: "critical")


def _nvlink(e: XidEvent) -> Severity:
    # 144-150 name their own fatality ("... Nonfatal XC0 ..." / "... Fatal XC0 ...")
    return "warning" if e.code != 74 and "nonfatal" in e.text.lower() else "error"


@rule(
    "TD521",
    "xid-nvlink-error",
    "error",
    also=("warning",),
)
def xid_nvlink_error(ctx: Context) -> Iterator[Issue]:
    """The driver logged an NVLink error: Xid 74, or 144-150 (NVLink 5 units: SAW, RLW, TLW, NETIR ...).

    144-150 lines that name themselves "Nonfatal" are reported as warnings.

    Why it matters: a fatal NVLink error takes the link down until the GPU is reset, and collectives
    that use it hang or fail; the GPU at the other end often logs one too.

    How to fix: drain the node and reset the GPUs (or reboot) to retrain the links; check
    `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e`; if the same link fails again, reseat or
    service the GPU or NVSwitch tray.
    """
    yield from _report(ctx, NVLINK.__contains__, "NVLink error", _nvlink)


def _ecc(e: XidEvent) -> Severity:
    # 94: contained, only the process that touched the memory was stopped; 95: uncontained
    return "warning" if e.code == 94 else "error"


@rule(
    "TD522",
    "xid-ecc-error",
    "error",
    also=("warning",),
)
def xid_ecc_error(ctx: Context) -> Iterator[Issue]:
    """The driver logged an uncorrectable memory error: Xid 48 (double-bit ECC), 94 (contained), 95 (uncontained).

    Why it matters: after 48 or 95 the GPU's memory cannot be trusted until a reset; 94 stopped only
    the process that touched the bad memory and is a warning, but the row waits for a reset to be
    remapped (see TD502).

    How to fix: drain the node and reset the GPU so the faulty memory rows are remapped; check
    `nvidia-smi -q -d ECC,ROW_REMAPPER`; replace the GPU if uncorrectable errors return.
    """
    yield from _report(ctx, ECC.__contains__, "uncorrectable memory error", _ecc)


@rule(
    "TD523",
    "xid-row-remap",
    "warning",
    also=("error",),
)
def xid_row_remap(ctx: Context) -> Iterator[Issue]:
    """The driver logged row remapping: Xid 63 (a row marked for remapping) or 64 (remapping failed).

    Why it matters: 63 is the GPU repairing its memory, and the repair takes effect only at the next
    reset. 64 means it could not, and is an error: the GPU is out of spare rows.

    How to fix: reset the GPU (drain the node first) to activate the remapping; after Xid 64, take
    the GPU out of service.
    """
    yield from _report(ctx, ROW_REMAP.__contains__, "row remapping", lambda e: "error" if e.code == 64 else "warning")


@rule(
    "TD524",
    "xid-gsp-error",
    "error",
    also=("warning",),
)
def xid_gsp_error(ctx: Context) -> Iterator[Issue]:
    """The driver logged a GSP error: Xid 119 (RPC timeout) or 120 (GSP exception).

    Why it matters: the GPU System Processor runs the driver's firmware; when it stops answering,
    the GPU often hangs or answers NVML slowly until it is reset.

    How to fix: drain the node and reset the GPU; if it recurs, update the driver (the GSP firmware
    ships with it) and report it with nvidia-bug-report.sh.
    """
    yield from _report(ctx, GSP.__contains__, "GSP firmware error", lambda e: "error")


@rule(
    "TD525",
    "xid-application-fault",
    "info",
)
def xid_application_fault(ctx: Context) -> Iterator[Issue]:
    """The driver logged an application fault: Xid 13, 31, 43 or 45.

    Graphics engine exception (13), memory page fault (31), GPU stopped processing (43), preemptive
    cleanup (45).

    Why it matters: these stop the faulting process, not the GPU. They are reported for the record
    and never drain a node.

    How to fix: nothing on the node: the application faulted (a bad address, an illegal instruction,
    a kill). If one GPU keeps faulting under different applications, run the GPU diagnostics.
    """
    yield from _report(ctx, APPLICATION.__contains__, "application fault", lambda e: "info")


def _other(e: XidEvent) -> Severity:
    # 154 says what the driver needs: "GPU recovery action changed ... (GPU Reset Required)"
    needs = e.code == 154 and ("reset required" in e.text.lower() or "reboot required" in e.text.lower())
    return "error" if needs else "warning"


@rule(
    "TD526",
    "xid-other",
    "warning",
    also=("error",),
)
def xid_other(ctx: Context) -> Iterator[Issue]:
    """The driver logged an Xid this tool does not classify.

    Why it matters: an Xid is the driver reporting a fault it saw, and one topodoctor does not know
    may still be serious; it is reported as a warning so it is seen, and Xid 154, which asks for a
    GPU reset or a node reboot, as an error.

    How to fix: look the code up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) and
    follow its resolution; drain the node if the GPU misbehaves.
    """
    yield from _report(ctx, lambda code: code not in KNOWN, "driver event", _other)
