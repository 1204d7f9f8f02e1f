"""GPU-NIC paths (TD2xx, the PCIe family): where NCCL cannot use GPUDirect RDMA."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.nccl.values import read_level
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.nics import NCCL_GDR_DEFAULT, gdr_allowed, nearest_nics


@rule(
    "TD210",
    "gpu-nic-no-gdr",
    "warning",
    tags=("prolog", "multinode"),
)
def gpu_nic_no_gdr(ctx: Context) -> Iterator[Issue]:
    """A GPU's nearest RDMA NIC is farther than a shared PCIe switch, so NCCL will not use GPUDirect RDMA for it.

    NCCL gives each GPU its closest NIC and reads and writes GPU memory from the NIC directly only
    when their PCIe path is at most ``NCCL_NET_GDR_LEVEL`` (PXB by default: under one PCIe switch
    tree). Hosts without RDMA NICs are not judged; a level set in the environment or nccl.conf moves
    the limit as NCCL would.

    Why it matters: farther (PHB, NODE, SYS), every byte this GPU sends to or receives from another
    node is staged through host memory: inter-node bandwidth drops and CPU memory traffic rises.

    How to fix: put a NIC under the same PCIe switch as the GPU (or move the GPU), or accept staged
    traffic; NCCL_NET_GDR_LEVEL can raise NCCL's limit where the platform's PCIe peer traffic is
    known to be fast.
    """
    paths = nearest_nics(ctx.snap, ctx.graph)
    if not paths:
        return
    raw = ctx.environment.get("NCCL_NET_GDR_LEVEL")
    level = (read_level(raw) if raw is not None else None) or NCCL_GDR_DEFAULT
    for gpu, p in sorted(paths.items()):
        if gdr_allowed(p.path, level):
            continue
        yield Issue(
            f"GPU{gpu}",
            f"GPU{gpu}'s nearest RDMA NIC {p.nic} is {p.path} away (beyond {level}): NCCL stages its "
            "inter-node traffic through host memory (no GPUDirect RDMA)",
            {"nic": p.nic, "path": p.path, "gdr_level": level, "nic_rate_gbps": p.rate_gbps},
        )
