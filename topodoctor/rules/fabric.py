"""Fabric and GPU health rules (TD5xx): fabric manager, row remapping, ECC, persistence,
MIG, lost GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.pci import long_bus_id
from topodoctor.core.text import plural
from topodoctor.model.nvml_codes import GPU_GONE_CODES
from topodoctor.model.snapshot import ComputeProcess
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

# NVIDIA retires at most this many pages per GPU (dynamic page retirement); at the limit the
# GPU can retire no more bad memory and should be replaced (NVIDIA's page retirement guide).
RETIRED_PAGES_LIMIT = 64


@rule(
    "TD501",
    "fabric-not-ready",
    "error",
)
def fabric_not_ready(ctx: Context) -> Iterator[Issue]:
    """A GPU that belongs to an NVSwitch fabric is not registered with the fabric manager.

    The fabric manager has not started, is still working, or failed. The GPU's own fabric state says
    whether it belongs to a fabric (NVML answers "not supported" where it does not), so this holds
    even when no link is up yet: before the fabric manager starts, NVSwitch links are not trained
    and no switch is visible.

    Why it matters: until the GPU is registered, CUDA reports no P2P over NVLink, and jobs fail or
    fall back to PCIe.

    How to fix: start or restart nvidia-fabricmanager (`systemctl status nvidia-fabricmanager` says
    why it stopped) and wait for the GPUs to register.
    """
    for g in ctx.live_gpus:
        f = ctx.need(g.fabric, f"GPU{g.index}", "fabric")
        if f is None or f.state == "not_supported":
            continue
        if f.state != "completed" or f.status != "SUCCESS":
            message = _fabric_message(g.index, f.state, f.status)
            yield Issue(f"GPU{g.index}", message, {"state": f.state, "status": f.status})


def _fabric_message(index: int, state: str, status: str) -> str:
    """The fabric state in words: NVML's state names and a status of SUCCESS say little to a reader."""
    if state == "completed":
        return f"GPU{index}: fabric manager failed to register the GPU with the NVSwitch fabric: {status}"
    failed = f", {status}" if status != "SUCCESS" else ""
    return (
        f"GPU{index}: fabric manager not ready, the GPU is not registered with the NVSwitch fabric "
        f"(registration {state.replace('_', ' ')}{failed})"
    )


@rule(
    "TD502",
    "row-remap-pending",
    "warning",
)
def row_remap_pending(ctx: Context) -> Iterator[Issue]:
    """A GPU has a row remapping pending: it needs a reset to retire the bad memory rows.

    Why it matters: until the reset, the rows that failed stay in use, and the errors that marked
    them can come back in a job.

    How to fix: drain the node and reset the GPU so the pending row remapping takes effect.
    """
    for g in ctx.live_gpus:
        r = ctx.need(g.remapped_rows, f"GPU{g.index}", "remapped_rows")
        if r is not None and r.pending and not r.failed:
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} has a row remapping pending",
                {"correctable": r.correctable, "uncorrectable": r.uncorrectable},
            )


@rule(
    "TD503",
    "row-remap-failed",
    "error",
)
def row_remap_failed(ctx: Context) -> Iterator[Issue]:
    """A GPU's row remapping failed.

    Why it matters: the GPU has run out of spare rows: memory that goes bad from now on cannot be
    repaired, and its errors reach the jobs.

    How to fix: take the GPU out of service (RMA).
    """
    for g in ctx.live_gpus:
        r = ctx.need(g.remapped_rows, f"GPU{g.index}", "remapped_rows")
        if r is not None and r.failed:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} row remapping failed", {"uncorrectable": r.uncorrectable})


@rule(
    "TD504",
    "ecc-uncorrectable",
    "error",
)
def ecc_uncorrectable(ctx: Context) -> Iterator[Issue]:
    """A GPU reports uncorrectable ECC errors since its last reset (volatile counter).

    Why it matters: an uncorrectable error corrupted data the GPU held; the process that touched it
    was stopped, and the memory cannot be trusted until the GPU is reset.

    How to fix: drain the node and reset the GPU; if the errors return, service it.
    """
    for g in ctx.live_gpus:
        n = ctx.need(g.ecc_uncorrected_volatile, f"GPU{g.index}", "ecc_uncorrected_volatile")
        if n is not None and n > 0:
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} has {n} uncorrectable ECC errors since reset",
                {
                    "volatile": n,
                    "aggregate": g.ecc_uncorrected_aggregate if isinstance(g.ecc_uncorrected_aggregate, int) else None,
                },
            )


@rule(
    "TD505",
    "persistence-off",
    "warning",
)
def persistence_off(ctx: Context) -> Iterator[Issue]:
    """Persistence mode is off on a Linux host.

    Why it matters: without it the driver tears the GPUs down between jobs: each job start pays
    seconds of initialisation, and NVML readings reset.

    How to fix: run nvidia-persistenced (preferred, so the driver stays loaded between jobs), or
    `nvidia-smi -pm 1`.
    """
    for g in ctx.live_gpus:
        if ctx.need(g.persistence_mode, f"GPU{g.index}", "persistence_mode") is False:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} persistence mode is off", {})


@rule(
    "TD506",
    "mig-unexpected",
    "warning",
)
def mig_unexpected(ctx: Context) -> Iterator[Issue]:
    """MIG is enabled where it is not expected (by default, or per the expectations file).

    Why it matters: a MIG-enabled GPU has no NVLink P2P and exposes only its instances to CUDA: a
    multi-GPU job sees far less than it asked for.

    How to fix: disable MIG (`nvidia-smi -mig 0`, then reset the GPU) on nodes meant for whole-GPU
    jobs, or record it in the expectations file.
    """
    allowed = ctx.expect.mig_enabled if ctx.expect else False
    for g in ctx.live_gpus:
        if ctx.need(g.mig_mode, f"GPU{g.index}", "mig_mode") is True and not allowed:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} has MIG enabled", {})


@rule(
    "TD507",
    "gpu-lost",
    "critical",
)
def gpu_lost(ctx: Context) -> Iterator[Issue]:
    """A GPU stopped answering NVML (GPU_IS_LOST or RESET_REQUIRED, to a call or a field).

    A GPU that gave no handle for another reason (no permission, say) is not called lost: nothing
    about it could be checked, and that is reported as such (TD901).

    Why it matters: the GPU fell off the bus or needs a reset: every job placed on it fails until it
    is reset or the node rebooted.

    How to fix: drain the node, collect `nvidia-bug-report.sh`, reset the GPU or reboot; check the
    kernel log for Xid 79.
    """
    for g in ctx.snap.gpus:
        if g.lost is None:
            continue
        if g.lost.code not in GPU_GONE_CODES:
            ctx.missing(f"GPU{g.index}", "handle", g.lost.error, g.lost.call)
            continue
        yield Issue(
            f"GPU{g.index}",
            f"GPU{g.index} is lost: {g.lost.error} (at {g.lost.call})",
            {"error": g.lost.error, "call": g.lost.call, "bus_id": g.bus_id if isinstance(g.bus_id, str) else None},
        )


@rule(
    "TD508",
    "gpu-not-counted",
    "error",
)
def gpu_not_counted(ctx: Context) -> Iterator[Issue]:
    """An NVIDIA GPU is on the PCI bus (vendor 0x10de, display class 0x03xx) but NVML does not count it.

    Found from the bus itself (sysfs), so it needs no expectations file.

    Why it matters: the driver failed to initialise the GPU (it fell off the bus, failed to load its
    firmware, or was excluded): jobs see fewer GPUs than the node has.

    How to fix: check the kernel log (NVRM, Xid), `lspci -d 10de:` and `nvidia-smi -L`; reset or
    reseat the GPU.
    """
    on_bus = ctx.need(ctx.snap.pci_gpus, "host", "pci_gpus")
    if on_bus is None:
        return
    counted = {g.bus_id for g in ctx.snap.gpus if isinstance(g.bus_id, str)}
    unknown = len(ctx.snap.gpus) - len(counted)  # GPUs lost before their bus id was read
    missing = [bus for bus in on_bus if bus not in counted]
    if unknown and len(missing) > unknown:
        yield Issue(
            "host",
            f"{len(on_bus)} NVIDIA GPUs are on the PCI bus, NVML counts {len(ctx.snap.gpus)}",
            {"on_bus": list(on_bus), "nvml_count": len(ctx.snap.gpus)},
        )
    elif not unknown:
        for bus in missing:
            shown = long_bus_id(bus)  # as nvidia-smi and lspci -D name a GPU
            yield Issue(
                f"pci:{shown}",
                f"GPU at {shown} is on the PCI bus but NVML counts {plural(len(ctx.snap.gpus), 'GPU')} without it",
                {"bus_id": bus, "on_bus": len(on_bus), "nvml_count": len(ctx.snap.gpus)},
            )


@rule(
    "TD509",
    "retired-pages-pending",
    "warning",
)
def retired_pages_pending(ctx: Context) -> Iterator[Issue]:
    """A pre-Ampere GPU has a memory page retirement pending: it needs a reset to retire the page.

    Why it matters: until the reset, the bad page can still be handed out and hit again.

    How to fix: drain the node and reset the GPU so the pending page retirement takes effect.
    """
    for g in ctx.live_gpus:
        r = ctx.need(g.retired_pages, f"GPU{g.index}", "retired_pages")
        if r is not None and r.pending:
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} has a page retirement pending",
                {"single_bit": r.single_bit, "double_bit": r.double_bit},
            )


@rule(
    "TD510",
    "retired-pages-limit",
    "error",
)
def retired_pages_limit(ctx: Context) -> Iterator[Issue]:
    """A pre-Ampere GPU has retired the most pages it can (64): further bad memory cannot be retired.

    Why it matters: the next page that goes bad stays in use, and its errors reach the jobs.

    How to fix: take the GPU out of service (RMA).
    """
    for g in ctx.live_gpus:
        r = ctx.need(g.retired_pages, f"GPU{g.index}", "retired_pages")
        if r is not None and r.single_bit + r.double_bit >= RETIRED_PAGES_LIMIT:
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} has retired {r.single_bit + r.double_bit} pages (limit {RETIRED_PAGES_LIMIT})",
                {"single_bit": r.single_bit, "double_bit": r.double_bit, "limit": RETIRED_PAGES_LIMIT},
            )


@rule(
    "TD511",
    "foreign-compute-processes",
    "info",
    also=("error",),
    tags=("prolog",),
)
def foreign_compute_processes(ctx: Context) -> Iterator[Issue]:
    """A GPU runs compute processes of someone else: a previous job's leftovers.

    Someone else's means not topodoctor's own (the check and the ranks it starts) and not of the
    Slurm job the check runs in (the same `job_N` cgroup). In a prolog (`check --prolog`) or a check
    of a job's GPUs (`--scope job`, or a job's GPUs named by the environment) this is an error
    naming each process: pid, GPU memory, user and command line where readable ("unknown" where
    not). On a whole node outside a job it is information: a node shared by jobs runs other users'
    processes by design.

    Why it matters: before a job starts its GPUs should be idle; a process left by the previous job
    holds GPU memory and compute, and the new job runs slow or out of memory.

    How to fix: end the processes (`nvidia-smi --query-compute-apps=pid,used_memory --format=csv`,
    then kill the pids) or drain the node until they exit; make the epilog end what a job leaves
    behind (docs/examples/slurm-epilog.sh does, and drains the node for what it cannot end; the health
    check keeps an idle node with such a process drained until it is gone: docs/prolog.md).
    """
    for g in ctx.live_gpus:
        procs = ctx.need(g.compute_processes, f"GPU{g.index}", "compute_processes")
        foreign = [p for p in procs or () if not p.ours]
        if not foreign:
            continue
        shown = ", ".join(_process(p) for p in foreign)
        yield Issue(
            f"GPU{g.index}",
            f"GPU{g.index} runs {len(foreign)} compute process{'es' if len(foreign) > 1 else ''} of another job: "
            + shown,
            {
                "processes": [
                    {
                        "pid": p.pid,
                        "used_memory_bytes": p.used_memory_bytes,
                        "uid": p.uid if isinstance(p.uid, int) else None,
                        "cmdline": p.cmdline if isinstance(p.cmdline, str) else None,
                        "slurm_job": p.slurm_job,
                    }
                    for p in foreign
                ]
            },
            severity="error" if ctx.gates_job else None,
        )


def _process(p: ComputeProcess) -> str:
    mem = f"{p.used_memory_bytes / (1 << 30):.1f} GiB" if p.used_memory_bytes is not None else "memory unknown"
    user = f"uid {p.uid}" if isinstance(p.uid, int) else "user unknown"
    job = f"Slurm job {p.slurm_job}, " if p.slurm_job else ""
    cmd = p.cmdline if isinstance(p.cmdline, str) else "command unknown"
    return f"pid {p.pid} ({user}, {job}{mem}, {cmd[:120]})"
