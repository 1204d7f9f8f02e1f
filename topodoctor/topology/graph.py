"""The host as a graph (topology/hostgraph.py: networkx's API and orders, without importing it),
derived from a HostSnapshot (never stored).

Nodes (attribute ``kind``): gpu, nvswitch, pcie_bridge, host_bridge, numa, cpu, nic.
Edges (attribute ``kind``):
  nvlink  GPU-GPU or GPU-NVSwitch; ``links`` (active link count), ``link_gbps`` (per link,
          per direction), ``gbps`` (links x link_gbps)
  pcie    device or bridge to its parent; ``gen``, ``width`` (trained now), ``gen_max``,
          ``width_max``, ``gbps`` (per direction at the max generation and current width:
          idle GPUs drop their PCIe generation to save power, width does not move)
  attach  host bridge to its NUMA node
  smp     NUMA node to NUMA node (the inter-socket or inter-die link)
  cpu     NUMA node to its CPU socket
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

from topodoctor.core.probed import ok
from topodoctor.model.snapshot import Gpu, HostSnapshot, Nic, nvlink_generation
from topodoctor.topology.hostgraph import HostGraph, NoPath, shortest_path

PathClass = Literal["X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"]

# Per-lane, per-direction payload rate after line coding, GB/s (1e9 bytes/s).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# Per-link, per-direction signalling rate by NVLink generation, GB/s (as nvidia-smi nvlink -s).
NVLINK_LINK_GBPS = {1.0: 20.0, 2.0: 25.0, 2.2: 25.0, 3.0: 25.0, 3.1: 25.0, 4.0: 26.5625, 5.0: 53.125}
_SPEED_GTS = {"2.5": 1, "5.0": 2, "5": 2, "8.0": 3, "8": 3, "16.0": 4, "16": 4, "32.0": 5, "32": 5, "64.0": 6, "64": 6}
# nvidia-smi's names for NVML's common-ancestor levels.
NVML_LEVEL_CLASS: dict[str, PathClass] = {
    "INTERNAL": "PIX",
    "SINGLE": "PIX",
    "MULTIPLE": "PXB",
    "HOSTBRIDGE": "PHB",
    "NODE": "NODE",
    "SYSTEM": "SYS",
}


def gpu_node(index: int) -> str:
    """The graph node name of the GPU with this NVML index."""
    return f"GPU{index}"


def nic_node(i: int) -> str:
    """The graph node name of the i-th RDMA NIC, as nvidia-smi topo -m numbers them."""
    return f"NIC{i}"


def pcie_gen_of(speed: str) -> int | None:
    """'32.0 GT/s PCIe' -> 5."""
    m = re.match(r"\s*([\d.]+)\s*GT/s", speed)
    return _SPEED_GTS.get(m.group(1)) if m else None


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """The per-direction payload rate of a PCIe link (GB/s), or None where generation or width is unknown."""
    if gen is None or width is None or gen not in PCIE_LANE_GBPS or width <= 0:
        return None
    return round(PCIE_LANE_GBPS[gen] * width, 3)


def nvlink_link_gbps(gpu: Gpu) -> float | None:
    """Per-link, per-direction rate of a GPU's active links, from their NVLink version."""
    for link in gpu.nvlinks:
        if link.is_up is True and isinstance(link.version, int):
            gen = nvlink_generation(link.version)
            if gen is not None:
                return NVLINK_LINK_GBPS.get(gen)
    return None


def rdma_nics(snap: HostSnapshot) -> list[Nic]:
    """The NICs nvidia-smi topo -m lists: RDMA devices, in name order."""
    return sorted((n for n in snap.nics if n.kind in ("infiniband", "roce")), key=lambda n: n.name)


def build_graph(snap: HostSnapshot) -> HostGraph:
    """The host as a graph: GPUs, NVSwitches, PCIe bridges, host bridges, NUMA nodes, CPUs and
    NICs, with the links between them (see the module's docstring for the attributes)."""
    g = HostGraph()
    numa_ids = [n.id for n in snap.host.numa_nodes]
    for n in snap.host.numa_nodes:
        g.add_node(f"numa:{n.id}", kind="numa", id=n.id, cpus=n.cpus)
        if isinstance(n.socket, int):
            g.add_node(f"socket:{n.socket}", kind="cpu", id=n.socket)
            g.add_edge(f"numa:{n.id}", f"socket:{n.socket}", kind="cpu")
    for i, a in enumerate(numa_ids):
        for b in numa_ids[i + 1 :]:
            g.add_edge(f"numa:{a}", f"numa:{b}", kind="smp")
    for gpu in snap.gpus:
        g.add_node(
            gpu_node(gpu.index),
            kind="gpu",
            index=gpu.index,
            bus_id=gpu.bus_id,
            name=gpu.name,
            lost=gpu.lost is not None,
        )
    for sw in snap.nvswitches:
        g.add_node(sw.id, kind="nvswitch", inferred=sw.inferred)
    for k, nic in enumerate(rdma_nics(snap)):
        g.add_node(nic_node(k), kind="nic", name=nic.name, nic_kind=nic.kind)
    _add_nvlinks(g, snap)
    _add_pcie(g, snap, numa_ids)
    return g


def _add_nvlinks(g: HostGraph, snap: HostSnapshot) -> None:
    by_bus = {gpu.bus_id: gpu.index for gpu in snap.gpus if isinstance(gpu.bus_id, str)}
    switch_of_link = {(gi, li): sw.id for sw in snap.nvswitches for gi, li in sw.gpu_links}
    # A direct link carries traffic only where both of its ends are up: each end counts its own up
    # links to the other, and the pair has the fewer (an end whose GPU lists no links at all, not
    # read, leaves the other end's count standing).
    ends: dict[tuple[int, int], int] = {}
    for gpu in snap.gpus:
        for link in gpu.nvlinks:
            if link.is_up is True and link.remote_type == "gpu" and isinstance(link.remote_bus_id, str):
                peer = by_bus.get(link.remote_bus_id)
                if peer is not None and peer != gpu.index:
                    ends[(gpu.index, peer)] = ends.get((gpu.index, peer), 0) + 1
    listed = {gpu.index for gpu in snap.gpus if gpu.nvlinks}
    for gpu in snap.gpus:
        rate = nvlink_link_gbps(gpu)
        for link in gpu.nvlinks:
            if link.is_up is not True:
                continue
            if link.remote_type == "gpu" and isinstance(link.remote_bus_id, str):
                peer = by_bus.get(link.remote_bus_id)
                if peer is None or peer <= gpu.index:  # each GPU-GPU pair once, from the lower index
                    continue
                a, other = gpu_node(gpu.index), gpu_node(peer)
                mine = ends.get((gpu.index, peer), 0)
                n = min(mine, ends.get((peer, gpu.index), 0)) if peer in listed else mine
                if n and not g.has_edge(a, other):
                    g.add_edge(
                        a, other, kind="nvlink", links=n, link_gbps=rate, gbps=round(n * rate, 3) if rate else None
                    )
                continue
            elif (gpu.index, link.link) in switch_of_link:
                other = switch_of_link[(gpu.index, link.link)]
            else:
                continue
            a = gpu_node(gpu.index)
            if g.has_edge(a, other):
                g.edges[a, other]["links"] += 1
            else:
                g.add_edge(a, other, kind="nvlink", links=1, link_gbps=rate)
            e = g.edges[a, other]
            e["gbps"] = round(e["links"] * rate, 3) if rate else None


def _add_pcie(g: HostGraph, snap: HostSnapshot, numa_ids: list[int]) -> None:
    def attach_chain(
        node: str, path: tuple[str, ...], gen: int | None, gen_max: int | None, width: int | None, width_max: int | None
    ) -> None:
        child, up = node, list(reversed(path[:-1]))
        link = (gen, gen_max, width, width_max)
        for bdf in up:
            parent = f"hostbridge:{bdf}" if bdf.startswith("pci") else f"pci:{bdf}"
            if not g.has_node(parent):
                _add_bridge_node(g, snap, bdf, parent, numa_ids)
            if not g.has_edge(child, parent):
                cur, cmax, w, wmax = link
                g.add_edge(
                    child,
                    parent,
                    kind="pcie",
                    gen=cur,
                    gen_max=cmax,
                    width=w,
                    width_max=wmax,
                    gbps=pcie_gbps(cmax or cur, w),
                )
            br = snap.bridge(bdf)
            if br is None:
                link = (None, None, None, None)
            else:
                ls, ms = br.link_speed, br.max_link_speed
                link = (
                    pcie_gen_of(ls) if isinstance(ls, str) else None,
                    pcie_gen_of(ms) if isinstance(ms, str) else None,
                    br.link_width if isinstance(br.link_width, int) else None,
                    br.max_link_width if isinstance(br.max_link_width, int) else None,
                )
            child = parent

    for gpu in snap.gpus:
        if isinstance(gpu.pcie_path, tuple):
            p = gpu.pcie
            attach_chain(
                gpu_node(gpu.index),
                gpu.pcie_path,
                *(v if isinstance(v, int) else None for v in (p.gen_current, p.gen_max, p.width_current, p.width_max)),
            )
    for k, nic in enumerate(rdma_nics(snap)):
        if isinstance(nic.pcie_path, tuple):
            attach_chain(nic_node(k), nic.pcie_path, None, None, None, None)


def _add_bridge_node(g: HostGraph, snap: HostSnapshot, bdf: str, node: str, numa_ids: list[int]) -> None:
    if node.startswith("hostbridge:"):
        g.add_node(node, kind="host_bridge", domain=bdf)
        numa = _root_complex_numa(snap, bdf)
        if numa is None and len(numa_ids) == 1:
            numa = numa_ids[0]  # one NUMA node: every host bridge hangs off it
        if numa is not None and g.has_node(f"numa:{numa}"):
            g.add_edge(node, f"numa:{numa}", kind="attach")
        return
    br = snap.bridge(bdf)
    g.add_node(node, kind="pcie_bridge", bus_id=bdf, port_type=br.port_type if br else "unknown")


def _root_complex_numa(snap: HostSnapshot, root: str) -> int | None:
    """A root complex's NUMA node: that of any bridge or device directly below it."""
    paths = [gpu.pcie_path for gpu in snap.gpus] + [nic.pcie_path for nic in snap.nics]
    for path in paths:
        if isinstance(path, tuple) and path and path[0] == root and len(path) > 1:
            br = snap.bridge(path[1])
            if br is not None and isinstance(br.numa_node, int):
                return br.numa_node
    for gpu in snap.gpus:
        if isinstance(gpu.pcie_path, tuple) and gpu.pcie_path[0] == root and isinstance(gpu.sysfs_numa_node, int):
            return gpu.sysfs_numa_node
    for nic in snap.nics:
        if isinstance(nic.pcie_path, tuple) and nic.pcie_path[0] == root and isinstance(nic.numa_node, int):
            return nic.numa_node
    return None


@dataclass(frozen=True)
class BestPath:
    """The best path between two endpoints, as nvidia-smi topo -m would name it."""

    cls: PathClass
    nvlinks: int  # bonded NVLinks for NV#, else 0
    gbps: float | None  # nominal per-direction bandwidth of the best path
    pcie_cls: PathClass | None  # the PCIe class even where NVLink wins

    @property
    def label(self) -> str:
        """The class as the matrix prints it: ``NV18`` for bonded NVLinks, else the PCIe class."""
        return f"NV{self.nvlinks}" if self.cls == "NV" else self.cls


def nvlink_count(g: HostGraph, a: str, b: str) -> tuple[int, float | None]:
    """Bonded NVLinks between two GPUs: direct links, else through NVSwitches the smaller side."""
    if g.has_edge(a, b) and g.edges[a, b]["kind"] == "nvlink":
        e = g.edges[a, b]
        return e["links"], e["gbps"]
    via = 0
    best_rate = None
    for sw in set(g.neighbors(a)) & set(g.neighbors(b)):
        if g.nodes[sw]["kind"] != "nvswitch":
            continue
        ea, eb = g.edges[a, sw], g.edges[b, sw]
        via += min(ea["links"], eb["links"])
        rates = [r for r in (ea["link_gbps"], eb["link_gbps"]) if r]
        best_rate = min(rates) if rates else best_rate
    if via == 0:
        # Switches seen separately: links from each GPU into the switch plane.
        return 0, None
    return via, round(via * best_rate, 3) if best_rate else None


def pcie_subgraph(g: HostGraph) -> HostGraph:
    """The PCIe part of the graph (PCIe, device attachment and inter-socket edges): where the PCIe
    classes of nvidia-smi topo -m are found."""
    keep = [(u, v) for u, v, k in g.edges(data="kind") if k in ("pcie", "attach", "smp")]
    return g.edge_subgraph(keep)


def pcie_class(g: HostGraph, a: str, b: str, sub: HostGraph | None = None) -> tuple[PathClass | None, float | None]:
    """The nvidia-smi class of the PCIe path between two endpoints, and its bottleneck GB/s."""
    sub = sub if sub is not None else pcie_subgraph(g)
    if a not in sub or b not in sub:
        return None, None
    try:
        path = shortest_path(sub, a, b)
    except NoPath:
        return None, None
    kinds = [sub.nodes[n]["kind"] for n in path]
    edges = [sub.edges[u, v] for u, v in itertools.pairwise(path)]
    rates = [e["gbps"] for e in edges if e["kind"] == "pcie" and e.get("gbps")]
    gbps = min(rates) if rates else None
    if any(e["kind"] == "smp" for e in edges):
        return "SYS", gbps
    hbs = kinds.count("host_bridge")
    if hbs >= 2:
        return "NODE", gbps
    if hbs == 1:
        return "PHB", gbps
    switches = sum(1 for n in path if sub.nodes[n].get("port_type") == "upstream")
    return ("PXB" if switches > 1 else "PIX"), gbps


def connection(snap: HostSnapshot, g: HostGraph, a: str, b: str, sub: HostGraph | None = None) -> BestPath:
    """Best path between two endpoints (GPU or NIC node names)."""
    if a == b:
        return BestPath("X", 0, None, None)
    pcls, pgbps = pcie_class(g, a, b, sub)
    na, nb = g.nodes[a], g.nodes[b]
    if na["kind"] == nb["kind"] == "gpu":
        pair_level = _nvml_level(snap, na["index"], nb["index"])
        if pair_level is not None:
            pcls = pair_level
        links, ngbps = nvlink_count(g, a, b)
        if links:
            return BestPath("NV", links, ngbps, pcls)
    return BestPath(pcls or "SYS", 0, pgbps, pcls)


def _nvml_level(snap: HostSnapshot, ia: int, ib: int) -> PathClass | None:
    """NVML's own common-ancestor answer, which is what nvidia-smi prints for GPU pairs."""
    try:
        level = snap.pair(ia, ib).common_ancestor
    except KeyError:
        return None
    return NVML_LEVEL_CLASS.get(level) if ok(level) and isinstance(level, str) else None


def connection_matrix(
    snap: HostSnapshot, g: HostGraph | None = None
) -> tuple[list[str], dict[tuple[str, str], BestPath]]:
    """Every GPU and RDMA NIC against every other, nvidia-smi topo -m's rows and columns."""
    g = g if g is not None else build_graph(snap)
    sub = pcie_subgraph(g)
    names = [gpu_node(gpu.index) for gpu in snap.gpus] + [nic_node(k) for k in range(len(rdma_nics(snap)))]
    cells = {(a, b): connection(snap, g, a, b, sub) for a in names for b in names}
    return names, cells
