"""Each GPU's way out of the node: its nearest RDMA NIC, whether NCCL would use GPUDirect RDMA
through it, and what inter-node busbw that allows. A derived view of a snapshot (no I/O).

NCCL gives each GPU the NIC or NICs with the best PCIe path to it (``ncclTopoGetLocalNet``: the
closest path type, then the highest bandwidth), and uses GPUDirect RDMA only when that path
is no farther than ``NCCL_NET_GDR_LEVEL``, PXB by default (``ncclTopoCheckGdr``: the NIC and
the GPU share a PCIe switch). Farther, NCCL stages every byte through host memory.

Rates: a NIC's ``rate_gbps`` is its link rate in Gb/s (sysfs ``ports/N/rate``); busbw is GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from topodoctor.model.snapshot import HostSnapshot, Nic
from topodoctor.topology.graph import PathClass, build_graph, connection, gpu_node, nic_node, pcie_subgraph, rdma_nics

if TYPE_CHECKING:
    from topodoctor.topology.hostgraph import HostGraph

# Path classes from near to far, as NCCL orders its path types.
PATH_ORDER: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS")
NCCL_GDR_DEFAULT = "PXB"
# NCCL's level names (NCCL_NET_GDR_LEVEL) for the classes the graph gives; P2C and PXN sit
# between PXB and PHB, and C2C on Grace hosts: not told apart here.
LEVEL_RANK = {"LOC": 0, "PIX": 1, "PXB": 2, "P2C": 2, "PXN": 2, "PHB": 3, "NODE": 3, "SYS": 4}


@dataclass(frozen=True)
class NicPath:
    """A GPU's nearest RDMA NIC as NCCL would pick it: the path between them and how many GPUs share it."""

    gpu: int
    nic: str  # the RDMA device, mlx5_0
    path: PathClass
    rate_gbps: float | None  # the NIC's link rate, Gb/s
    sharing: int  # GPUs whose nearest NIC this is (they split its rate when all send at once)


def nearest_nics(snap: HostSnapshot, g: HostGraph | None = None) -> dict[int, NicPath]:
    """Each live GPU's nearest RDMA NIC (empty when the host has none); ties go to the faster."""
    nics = rdma_nics(snap)
    if not nics:
        return {}
    g = g if g is not None else build_graph(snap)
    sub = pcie_subgraph(g)
    best: dict[int, tuple[Nic, PathClass]] = {}
    for gpu in snap.gpus:
        if gpu.lost is not None:
            continue
        options = []
        for k, nic in enumerate(nics):
            cls = connection(snap, g, gpu_node(gpu.index), nic_node(k), sub).cls
            rate = nic.rate_gbps if isinstance(nic.rate_gbps, float | int) else 0.0
            options.append((PATH_ORDER.index(cls) if cls in PATH_ORDER else len(PATH_ORDER), -rate, k, cls))
        _, _, k, cls = min(options)
        best[gpu.index] = (nics[k], cls)
    share: dict[str, int] = {}
    for nic, _ in best.values():
        share[nic.name] = share.get(nic.name, 0) + 1
    return {
        i: NicPath(
            i,
            nic.name,
            cls,
            float(nic.rate_gbps) if isinstance(nic.rate_gbps, float | int) else None,
            share[nic.name],
        )
        for i, (nic, cls) in best.items()
    }


def gdr_allowed(path: str, level: str = NCCL_GDR_DEFAULT) -> bool:
    """NCCL's rule: GPUDirect RDMA when the GPU-NIC path is no farther than ``level``."""
    return LEVEL_RANK.get(path, 99) <= LEVEL_RANK.get(level, LEVEL_RANK[NCCL_GDR_DEFAULT])


def expected_rail_gbps(paths: dict[int, NicPath], gpus: list[int]) -> float | None:
    """busbw a collective between nodes can reach when each of ``gpus`` sends through its
    nearest NIC at once with the other GPUs of its node: its share of the NIC's line rate,
    the slowest GPU's. None when a GPU has no NIC or no known rate."""
    shares = []
    for i in gpus:
        p = paths.get(i)
        if p is None or p.rate_gbps is None:
            return None
        shares.append(p.rate_gbps / 8.0 / max(p.sharing, 1))
    return min(shares) if shares else None
