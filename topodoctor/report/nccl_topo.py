"""An ``NCCL_TOPO_FILE`` for this host, written from the snapshot (NCCL's topology XML, version 1).

What goes in is what NCCL cannot detect or detects wrong: the PCIe tree (CPU -> switches ->
GPUs and NICs) with link speeds and widths, each GPU's NVLinks, and the CPU affinity of each
NUMA node. What stays out is what NCCL fills in per process and must stay live: a GPU's
``rank`` and ``gdr``, a NIC's ports, speed, GUID and ``gdr`` (NCCL keeps any value the file
gives for those, and a stale ``gdr="0"`` would turn GPUDirect RDMA off), the CPU's vendor and
model ids, and the PCI ids of devices that exist (NCCL reads them from sysfs).

In a VM whose PCIe tree is flat, each GPU and the NICs that belong with it go under a
switch with a bus id the VM does not use (domain ffff), as NCCL's maintainers advise for
VMs: NCCL then sees the GPU-NIC affinity of the host and enables GPUDirect RDMA. GPU and NIC
are paired in bus order within their NUMA node, the order in which hypervisors pass them.

Each device goes under the CPU of the NUMA node its own sysfs entry names, which is what NCCL
reads; where that is -1 (most VMs) the CPU is numaid -1 with no affinity, as NCCL writes it.

The output depends on the snapshot alone (no host name, no time), so a replayed recording
writes the same bytes as the live host it was recorded from.
"""

from __future__ import annotations

from collections import Counter

from topodoctor.core.pci import short_bus_id
from topodoctor.core.text import escape_controls, xml_quoteattr
from topodoctor.model.snapshot import Gpu, HostSnapshot
from topodoctor.topology.graph import build_graph
from topodoctor.topology.hostgraph import HostGraph
from topodoctor.topology.hosttree import TreeNode, build_tree
from topodoctor.topology.ncclxml import (
    CLASS_BRIDGE,
    CLASS_CPU,
    CLASS_GPU,
    CLASS_NIC,
    CLASS_NVSWITCH,
    GEN_SPEED,
    INVISIBLE_TARGET,
    TOPO_XML_VERSION,
    cpumask,
)


class _Xml:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def open(self, depth: int, tag: str, attrs: list[tuple[str, object]], leaf: bool = False) -> None:
        text = " ".join(f"{k}={xml_quoteattr(escape_controls(str(v)))}" for k, v in attrs if v is not None)
        self.lines.append(f"{'  ' * depth}<{tag}{' ' + text if text else ''}{'/' if leaf else ''}>")

    def close(self, depth: int, tag: str) -> None:
        self.lines.append(f"{'  ' * depth}</{tag}>")


def _speed(gen: int | None) -> str | None:
    return GEN_SPEED.get(gen) if gen is not None else None


def _sm(gpu: Gpu) -> int | None:
    cc = gpu.compute_capability
    if not isinstance(cc, str):
        return None
    major, _, minor = cc.partition(".")
    try:
        return int(major) * 10 + int(minor or 0)
    except ValueError:
        return None


def _all_f(bus: str) -> bool:
    digits = bus.replace(":", "").replace(".", "").lower()
    return bool(digits) and set(digits) == {"f"}


def _nvlinks(snap: HostSnapshot, gpu: Gpu) -> list[tuple[str, int, str]]:
    """(target, count, tclass) per NVLink peer, as ncclTopoGetXmlFromGpu groups them."""
    peers: Counter[tuple[str, str]] = Counter()
    inferred = {gl for sw in snap.nvswitches if sw.inferred for gl in sw.gpu_links}
    for link in gpu.nvlinks:
        if link.is_up is not True:
            continue
        remote = link.remote_bus_id if isinstance(link.remote_bus_id, str) else ""
        if link.remote_type == "gpu" and remote:
            peers[(short_bus_id(remote), CLASS_GPU)] += 1
        elif link.remote_type == "switch":
            hidden = (gpu.index, link.link) in inferred or not remote or _all_f(remote)
            peers[(INVISIBLE_TARGET if hidden else short_bus_id(remote), CLASS_NVSWITCH)] += 1
        elif link.remote_type == "ibmnpu" and remote:
            peers[(short_bus_id(remote), CLASS_CPU)] += 1
    return [(t, n, c) for (t, c), n in sorted(peers.items())]


def _bridge_ids(snap: HostSnapshot, node: TreeNode) -> tuple[str | None, str | None]:
    br = snap.bridge(node.bus_id) if node.bus_id and not node.synthetic else None
    if br is None:
        return None, None
    vendor = br.vendor_id if isinstance(br.vendor_id, str) else None
    device = br.device_id if isinstance(br.device_id, str) else None
    return vendor, device


def _write(out: _Xml, snap: HostSnapshot, node: TreeNode, depth: int) -> None:
    if node.kind == "hostbridge":  # NCCL has no host bridge: its children hang off the CPU
        for c in node.children:
            _write(out, snap, c, depth)
        return
    link = node.link
    if node.kind == "switch":
        vendor, device = _bridge_ids(snap, node)
        out.open(
            depth,
            "pci",
            [
                ("busid", node.bus_id),
                ("class", CLASS_BRIDGE),
                ("vendor", vendor),
                ("device", device),
                ("link_speed", _speed(link.gen_max or link.gen)),
                ("link_width", link.width_max or link.width),
            ],
        )
        for c in node.children:
            _write(out, snap, c, depth + 1)
        out.close(depth, "pci")
    elif node.kind == "gpu":
        gpu = snap.gpu(int(node.key[3:]))
        if gpu.lost is not None:
            return
        out.open(
            depth,
            "pci",
            [
                ("busid", node.bus_id),
                ("class", CLASS_GPU),
                # Idle GPUs drop their PCIe generation to save power: write what the link trains to.
                ("link_speed", _speed(link.gen_max or link.gen)),
                ("link_width", link.width or link.width_max),
            ],
        )
        links = _nvlinks(snap, gpu)
        out.open(depth + 1, "gpu", [("dev", gpu.index), ("sm", _sm(gpu))], leaf=not links)
        for target, count, tclass in links:
            out.open(depth + 2, "nvlink", [("target", target), ("count", count), ("tclass", tclass)], leaf=True)
        if links:
            out.close(depth + 1, "gpu")
        out.close(depth, "pci")
    elif node.kind == "nic":
        out.open(depth, "pci", [("busid", node.bus_id), ("class", CLASS_NIC)])
        out.open(depth + 1, "nic", [])
        out.open(depth + 2, "net", [("name", node.label)], leaf=True)
        out.close(depth + 1, "nic")
        out.close(depth, "pci")


def nccl_topology_xml(snap: HostSnapshot, g: HostGraph | None = None, group_flat: bool = True) -> str:
    """The topology file as text (UTF-8, one element per line, NCCL's own layout)."""
    g = g if g is not None else build_graph(snap)
    tree = build_tree(snap, g, group_flat=group_flat, numa_from="sysfs")
    out = _Xml()
    out.open(0, "system", [("version", TOPO_XML_VERSION)])
    cpus = {n.id: n.cpus for n in snap.host.numa_nodes}
    for root in tree.roots:
        if not any(n.kind in ("gpu", "nic") and n.bus_id for n in root.walk()):
            continue
        numa = root.numa
        affinity = cpumask(cpus[numa]) if numa is not None and cpus.get(numa) else None
        out.open(1, "cpu", [("numaid", numa if numa is not None else -1), ("affinity", affinity)])
        for c in root.children:
            _write(out, snap, c, 2)
        out.close(1, "cpu")
    out.close(0, "system")
    return "\n".join(out.lines) + "\n"
