"""What each measured path should reach, from the topology graph (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from topodoctor.model.snapshot import HostSnapshot
from topodoctor.topology.graph import BestPath, build_graph, connection, gpu_node, pcie_gbps, pcie_subgraph

if TYPE_CHECKING:
    from topodoctor.topology.hostgraph import HostGraph


@dataclass(frozen=True)
class Expected:
    """What a copy between two GPUs should reach: the path class, its nominal rate and the PCIe rate."""

    cls: str  # NV18, PIX, SYS, ...
    nominal_gbps: float | None  # per direction, the best path's signalling rate
    pcie_gbps: float | None  # the PCIe path's rate, for telling a fallback from a slow link


def expected_pairs(snap: HostSnapshot, g: HostGraph | None = None) -> dict[tuple[int, int], Expected]:
    """The expected path of every ordered pair of GPUs that answer, keyed by (source, destination)."""
    g = g if g is not None else build_graph(snap)
    sub = pcie_subgraph(g)
    out: dict[tuple[int, int], Expected] = {}
    idx = [x.index for x in snap.gpus if x.lost is None]
    for a in idx:
        for b in idx:
            if a != b:
                c: BestPath = connection(snap, g, gpu_node(a), gpu_node(b), sub)
                pcie = min(filter(None, (host_link_gbps(snap, a), host_link_gbps(snap, b))), default=None)
                out[(a, b)] = Expected(c.label, c.gbps, pcie)
    return out


def host_link_gbps(snap: HostSnapshot, index: int, full_width: bool = False) -> float | None:
    """A GPU's PCIe link rate per direction at its max generation and its current width (or,
    with ``full_width``, the width it should have trained to)."""
    p = snap.gpu(index).pcie
    gen = p.gen_max if isinstance(p.gen_max, int) else None
    w = p.width_max if full_width else p.width_current
    return pcie_gbps(gen, w if isinstance(w, int) else None)
