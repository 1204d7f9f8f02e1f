"""NUMA rules (TD4xx): unknown or split placement of GPUs and NICs, process affinity."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.cpulist import format_cpulist as fmt
from topodoctor.core.probed import Unsupported
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule


def _numa_known(ctx: Context) -> bool:
    """Whether the host's NUMA nodes could be listed; says could-not-check when not."""
    failed = ctx.host_errors("list /sys/devices/system/node") + ctx.host_errors("read /sys/devices/system/node")
    for err in failed:
        ctx.missing("host", "host.numa_nodes", err.error, err.call)
    return not failed


def _nodes_of(ctx: Context, cpus: tuple[int, ...]) -> list[int]:
    s = set(cpus)
    return [n.id for n in ctx.snap.host.numa_nodes if s & set(n.cpus)]


@rule(
    "TD401",
    "gpu-numa-unknown",
    "warning",
)
def gpu_numa_unknown(ctx: Context) -> Iterator[Issue]:
    """On a multi-NUMA host, a GPU's NUMA node is unknown, or its local CPUs span several nodes.

    Why it matters: launchers (Slurm, torchrun wrappers, NCCL itself) pin each rank near its GPU
    using this; unknown placement means ranks land on the far socket and every host copy crosses it.

    How to fix: enable NUMA reporting in the BIOS (ACPI SRAT / _PXM) so the kernel knows where each
    GPU hangs; until then bind processes by hand.
    """
    if not _numa_known(ctx) or len(ctx.snap.host.numa_nodes) < 2:
        return
    for g in ctx.live_gpus:
        subject = f"GPU{g.index}"
        node = ctx.need(g.sysfs_numa_node, subject, "sysfs_numa_node")
        if node is None and isinstance(g.sysfs_numa_node, Unsupported):
            yield Issue(
                subject,
                f"GPU{g.index} has no NUMA node (sysfs numa_node is -1)",
                {"numa_node": None, "numa_nodes": len(ctx.snap.host.numa_nodes)},
            )
            continue
        cpus = ctx.need(g.cpu_affinity, subject, "cpu_affinity")
        if node is not None and cpus is not None and len(_nodes_of(ctx, cpus)) > 1:
            yield Issue(
                subject,
                f"GPU{g.index}'s local CPUs span NUMA nodes {_nodes_of(ctx, cpus)}",
                {"cpu_affinity": format_cpulist(cpus), "numa_node": node},
            )


@rule(
    "TD402",
    "nic-numa-unknown",
    "warning",
)
def nic_numa_unknown(ctx: Context) -> Iterator[Issue]:
    """On a multi-NUMA host, an RDMA NIC's NUMA node is unknown.

    Why it matters: NCCL pairs each GPU with a NIC on its own socket by this; without it a GPU may
    send through a NIC across the socket link.

    How to fix: enable NUMA reporting in the BIOS (ACPI SRAT / _PXM) so NCCL can pair each GPU with
    the NIC on its own socket.
    """
    for err in ctx.host_errors("list /sys/class/infiniband"):
        ctx.missing("host", "nics", err.error, err.call)
    if not _numa_known(ctx) or len(ctx.snap.host.numa_nodes) < 2:
        return
    for nic in ctx.snap.nics:
        if nic.kind not in ("infiniband", "roce"):
            continue
        node = ctx.need(nic.numa_node, f"nic:{nic.name}", "numa_node")
        if node is None and isinstance(nic.numa_node, Unsupported):
            yield Issue(f"nic:{nic.name}", f"NIC {nic.name} has no NUMA node", {"bus_id": str(nic.bus_id)})


@rule(
    "TD403",
    "process-affinity-far",
    "warning",
    tags=("prolog",),
)
def process_affinity_far(ctx: Context) -> Iterator[Issue]:
    """This process may run only on CPUs that are not local to a GPU.

    A replay judges the recorded process's affinity.

    Why it matters: in a prolog the process affinity is the job's: host-to-GPU copies and kernel
    launches then cross the socket link for the whole job.

    How to fix: bind the job near its GPUs (srun --cpu-bind, numactl --cpunodebind, or taskset with
    the GPU's CPU affinity from `topodoctor scan`).
    """
    cpus = ctx.environment.process_cpus
    cpus = ctx.need(cpus, "process", "process.cpu_affinity") if cpus is not None else None
    online = ctx.need(ctx.snap.host.online_cpus, "host", "host.online_cpus")
    if not isinstance(cpus, tuple) or not cpus or online is None:
        return
    for g in ctx.live_gpus:
        local = ctx.need(g.cpu_affinity, f"GPU{g.index}", "cpu_affinity")
        if not local or set(local) >= set(online):
            continue  # the GPU is local to every CPU: nothing to be far from
        if not set(cpus) & set(local):
            yield Issue(
                f"GPU{g.index}",
                f"this process runs on CPUs {format_cpulist(cpus)}, none local to "
                f"GPU{g.index} ({format_cpulist(local)})",
                {"process_cpus": format_cpulist(cpus), "gpu_cpus": format_cpulist(local)},
            )


def format_cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """CPUs as nvidia-smi lists them; the probe's formatter, loaded only when a finding needs it
    (importing the probe package costs the rules' start-up a twentieth of a second)."""
    return fmt(cpus)
