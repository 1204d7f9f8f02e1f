"""Fabric and GPU health rules (TD5xx): fabric manager, row remapping, ECC, persistence,
MIG, lost GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.model import FabricInfo, RemappedRows
from topodoctor.probed import ProbeError
from topodoctor.rules.context import Context
from topodoctor.rules.registry import CannotCheck, Issue, rule


@rule(
    "TD501",
    "fabric-not-ready",
    "error",
    fix="Start or restart nvidia-fabricmanager (systemctl status nvidia-fabricmanager) and wait for the GPUs "
    "to register; NVSwitch P2P does not work until they have.",
)
def fabric_not_ready(ctx: Context) -> Iterator[Issue | CannotCheck]:
    """On an NVSwitch host, a GPU's fabric registration is not completed or did not succeed.

    Until the fabric manager has trained the switches and registered the GPU, CUDA reports
    no P2P over NVLink and jobs fail or fall back to PCIe.
    """
    if not ctx.has_nvswitch:
        return
    for g in ctx.live_gpus:
        f = g.fabric
        if isinstance(f, ProbeError):
            yield CannotCheck(f"GPU{g.index}", f)
        elif isinstance(f, FabricInfo) and (f.state != "completed" or f.status != "SUCCESS"):
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} fabric state is {f.state} ({f.status})",
                {"state": f.state, "status": f.status},
            )


@rule(
    "TD502",
    "row-remap-pending",
    "warning",
    fix="Reset the GPU (drain the node first) so the pending row remapping takes effect.",
)
def row_remap_pending(ctx: Context) -> Iterator[Issue]:
    """A GPU has a row remapping pending: it needs a reset to retire the bad memory rows."""
    for g in ctx.live_gpus:
        r = g.remapped_rows
        if isinstance(r, RemappedRows) and r.pending and not r.failed:
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} has a row remapping pending",
                {"correctable": r.correctable, "uncorrectable": r.uncorrectable},
            )


@rule(
    "TD503",
    "row-remap-failed",
    "error",
    fix="Row remapping failed: the GPU has run out of spare rows. Take it out of service (RMA).",
)
def row_remap_failed(ctx: Context) -> Iterator[Issue]:
    """A GPU's row remapping failed."""
    for g in ctx.live_gpus:
        r = g.remapped_rows
        if isinstance(r, RemappedRows) and r.failed:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} row remapping failed", {"uncorrectable": r.uncorrectable})


@rule(
    "TD504",
    "ecc-uncorrectable",
    "error",
    fix="Uncorrectable ECC errors since the last reset: drain the node and reset the GPU; if they return, service it.",
)
def ecc_uncorrectable(ctx: Context) -> Iterator[Issue]:
    """A GPU reports uncorrectable ECC errors since its last reset (volatile counter)."""
    for g in ctx.live_gpus:
        n = g.ecc_uncorrected_volatile
        if isinstance(n, int) and n > 0:
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
    fix="Run nvidia-persistenced (preferred) so the driver stays loaded between jobs.",
)
def persistence_off(ctx: Context) -> Iterator[Issue]:
    """Persistence mode is off on a Linux host.

    Without it the driver tears the GPUs down between jobs: each job start pays seconds of
    initialisation and NVML readings reset.
    """
    for g in ctx.live_gpus:
        if g.persistence_mode is False:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} persistence mode is off", {})


@rule(
    "TD506",
    "mig-unexpected",
    "warning",
    fix="Disable MIG (nvidia-smi -mig 0, then reset) on nodes meant for whole-GPU jobs, or record it in the "
    "expectations file.",
)
def mig_unexpected(ctx: Context) -> Iterator[Issue]:
    """MIG is enabled where it is not expected (by default, or per the expectations file).

    A MIG-enabled GPU has no NVLink P2P and exposes only its instances to CUDA: a multi-GPU
    job sees far less than it asked for.
    """
    allowed = ctx.expect.mig_enabled if ctx.expect else False
    for g in ctx.live_gpus:
        if g.mig_mode is True and not allowed:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} has MIG enabled", {})


@rule(
    "TD507",
    "gpu-lost",
    "critical",
    fix="The GPU fell off the bus or needs a reset: drain the node, collect `nvidia-bug-report.sh`, reset or "
    "reboot; check dmesg for Xid 79.",
)
def gpu_lost(ctx: Context) -> Iterator[Issue]:
    """A GPU stopped answering NVML (GPU_IS_LOST, RESET_REQUIRED, or no handle)."""
    for g in ctx.snap.gpus:
        if g.lost is not None:
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} is lost: {g.lost.error} (at {g.lost.call})",
                {"error": g.lost.error, "call": g.lost.call, "bus_id": g.bus_id if isinstance(g.bus_id, str) else None},
            )
