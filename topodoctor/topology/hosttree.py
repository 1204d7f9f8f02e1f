"""The host as a tree, the way NCCL models it: NUMA node -> host bridge -> PCIe switches -> GPUs and NICs.

A PCIe switch is drawn and written once, by its upstream port; the ports NCCL folds away
(root ports under a host bridge, downstream ports under a switch) are kept on the node they
fold into, so a finding about one of them (ACS on a downstream port) still has a place.
NCCL walks the sysfs path of a device two levels at a time (``ncclTopoGetXmlFromSys``):
the element two steps up is the parent switch, and the first name that is not a PCI
address ends the walk at the CPU. This module follows the same walk on the recorded
``pcie_path``, so the NCCL topology file and the drawing agree with what NCCL detects.

Derived from a snapshot and its graph; never stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from topodoctor.core.pci import is_bdf, short_bus_id
from topodoctor.model.snapshot import HostSnapshot, PcieBridge
from topodoctor.topology.graph import gpu_node, nic_node, pcie_gen_of, rdma_nics
from topodoctor.topology.hostgraph import HostGraph

NodeKind = Literal["numa", "hostbridge", "switch", "gpu", "nic"]
NumaSource = Literal["graph", "sysfs"]
SYNTHETIC_DOMAIN = "ffff"  # bus ids the VM's own PCI tree never uses (NCCL's VM topology files use it)


@dataclass(frozen=True)
class Link:
    """The PCIe link from a node up to its parent; None where unknown."""

    gen: int | None = None
    width: int | None = None
    gen_max: int | None = None
    width_max: int | None = None


@dataclass
class TreeNode:
    """One node of the host tree (a NUMA node, host bridge, PCIe switch, GPU or NIC) and its children."""

    key: str  # numa:0, hostbridge:pci0000:15, pci:0000:16:00.0, GPU3, NIC0
    kind: NodeKind
    label: str
    bus_id: str | None = None
    link: Link = field(default_factory=Link)  # to the parent
    ports: list[str] = field(default_factory=list)  # bridges folded into this node
    synthetic: bool = False  # a switch written for a VM whose PCIe tree is flat
    numa: int | None = None
    children: list[TreeNode] = field(default_factory=list)

    def walk(self) -> list[TreeNode]:
        """This node and every node under it, depth first."""
        out = [self]
        for c in self.children:
            out += c.walk()
        return out


@dataclass(frozen=True)
class HostTree:
    """The host as NCCL models it: one tree per NUMA node, and the devices it could not place."""

    roots: tuple[TreeNode, ...]  # one per NUMA node (numa None: the node is unknown)
    unplaced: tuple[TreeNode, ...]  # GPUs / NICs with no PCIe path (lost, or no sysfs)
    flat: bool  # every device sits right on a host bridge (typical of VMs)

    def nodes(self) -> list[TreeNode]:
        """Every node of the tree, the unplaced ones last."""
        return [n for r in self.roots for n in r.walk()] + list(self.unplaced)

    def find(self, key: str) -> TreeNode | None:
        """The node with this key, or None."""
        return next((n for n in self.nodes() if n.key == key), None)


def _bridge_link(up: PcieBridge | None, above: PcieBridge | None) -> Link:
    """A switch's upstream link: its own port's speed, capped by the port above as NCCL does."""

    def gen(s: object) -> int | None:
        return pcie_gen_of(s) if isinstance(s, str) else None

    def num(v: object) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    if up is None:
        return Link()
    cur, width = gen(up.link_speed), num(up.link_width)
    gmax, wmax = gen(up.max_link_speed), num(up.max_link_width)
    if above is not None:
        pmax, pw = gen(above.max_link_speed), num(above.max_link_width)
        gmax = min(x for x in (gmax, pmax) if x is not None) if (gmax or pmax) else None
        wmax = min(x for x in (wmax, pw) if x is not None) if (wmax or pw) else None
    return Link(cur, width, gmax, wmax)


def device_numa(g: HostGraph, node: str) -> int | None:
    """The NUMA node a device hangs off, through its host bridge in the graph."""
    if node not in g:
        return None
    seen = {node}
    frontier = [node]
    while frontier:
        nxt = []
        for n in frontier:
            for m in g.neighbors(n):
                if m in seen or g.edges[n, m]["kind"] not in ("pcie", "attach"):
                    continue
                if g.nodes[m]["kind"] == "numa":
                    return int(g.nodes[m]["id"])
                seen.add(m)
                nxt.append(m)
        frontier = nxt
    return None


def sysfs_numa(snap: HostSnapshot, key: str) -> int | None:
    """A GPU's or NIC's own NUMA node as sysfs gives it (what NCCL reads); None where it says -1."""
    if key.startswith("GPU"):
        v = snap.gpu(int(key[3:])).sysfs_numa_node
    else:
        v = rdma_nics(snap)[int(key[3:])].numa_node
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def build_tree(snap: HostSnapshot, g: HostGraph, group_flat: bool = False, numa_from: NumaSource = "graph") -> HostTree:
    """The host tree. Devices go under their NUMA node as the graph places them (``numa_from="graph"``:
    a host with one node puts everything there), or as NCCL will (``"sysfs"``: the device's own
    numa_node, unknown where it is -1, as in most VMs).

    With ``group_flat``, a VM's flat tree with RDMA NICs gets one synthetic switch per GPU holding
    that GPU and its NICs, paired in bus order within each NUMA node, so NCCL sees the GPU-NIC
    affinity of the host the VM runs on."""

    def numa_of(key: str) -> int | None:
        return device_numa(g, key) if numa_from == "graph" else sysfs_numa(snap, key)

    roots: dict[int | None, TreeNode] = {}
    by_key: dict[str, TreeNode] = {}
    unplaced: list[TreeNode] = []

    def numa_root(numa: int | None) -> TreeNode:
        if numa not in roots:
            label = f"NUMA {numa}" if numa is not None else "NUMA ?"
            node = next((n for n in snap.host.numa_nodes if n.id == numa), None)
            if node is not None and isinstance(node.socket, int):
                label = f"Socket {node.socket} · {label}"
            roots[numa] = TreeNode(f"numa:{numa}", "numa", label, numa=numa)
        return roots[numa]

    def child(parent: TreeNode, node: TreeNode) -> TreeNode:
        existing = by_key.get(node.key)
        if existing is not None:
            return existing
        by_key[node.key] = node
        parent.children.append(node)
        return node

    def place(leaf: TreeNode, path: tuple[str, ...]) -> None:
        numa = leaf.numa
        root = numa_root(numa)
        hb = child(root, _host_bridge(path[0], numa))
        # NCCL's walk: two steps up per level; a name that is not a PCI address is the CPU.
        chain: list[tuple[int, str]] = []
        i = len(path) - 1
        while i - 2 >= 0 and is_bdf(path[i - 1]) and is_bdf(path[i - 2]):
            i -= 2
            chain.append((i, path[i]))
        parent = hb
        top_port = chain[-1][0] if chain else len(path) - 1
        for bdf in path[1:top_port]:
            if bdf not in hb.ports:
                hb.ports.append(bdf)
        for idx, bdf in reversed(chain):
            up, above = snap.bridge(bdf), snap.bridge(path[idx - 1])
            sw = child(
                parent,
                TreeNode(f"pci:{bdf}", "switch", "PCIe switch", bus_id=bdf, link=_bridge_link(up, above), numa=numa),
            )
            port = path[idx + 1]
            if port not in sw.ports:
                sw.ports.append(port)
            parent = sw
        parent.children.append(leaf)

    leaves: list[tuple[TreeNode, tuple[str, ...] | None]] = []
    for gpu in snap.gpus:
        p = gpu.pcie
        link = Link(
            *(v if isinstance(v, int) else None for v in (p.gen_current, p.width_current, p.gen_max, p.width_max))
        )
        bus = short_bus_id(gpu.bus_id) if isinstance(gpu.bus_id, str) else None
        name = gpu.name if isinstance(gpu.name, str) else "GPU"
        leaf = TreeNode(gpu_node(gpu.index), "gpu", name, bus, link, numa=numa_of(gpu_node(gpu.index)))
        leaves.append((leaf, gpu.pcie_path if isinstance(gpu.pcie_path, tuple) and gpu.pcie_path else None))
    for k, nic in enumerate(rdma_nics(snap)):
        bus = short_bus_id(nic.bus_id) if isinstance(nic.bus_id, str) else None
        leaf = TreeNode(nic_node(k), "nic", nic.name, bus, numa=numa_of(nic_node(k)))
        leaves.append((leaf, nic.pcie_path if isinstance(nic.pcie_path, tuple) and nic.pcie_path else None))

    placed = [(leaf, path) for leaf, path in leaves if path is not None]
    flat = bool(placed) and all(len(path) <= 3 for _, path in placed)
    # Only a VM hides the host's switches; on bare metal a flat tree is the truth, and a switch
    # invented there would claim a GPU-NIC path the hardware does not have.
    regroup = group_flat and flat and snap.host.virtualization == "vm" and any(x.kind == "nic" for x, _ in placed)
    for leaf, path in leaves:
        if path is None:
            unplaced.append(leaf)
        elif not regroup:
            place(leaf, path)
    if regroup:
        _group_flat([(leaf, path) for leaf, path in placed if path is not None], numa_root, child)
    ordered = tuple(roots[k] for k in sorted(roots, key=lambda n: (n is None, n or 0)))
    for r in ordered:
        _sort(r)
    return HostTree(ordered, tuple(unplaced), flat)


def _group_flat(
    placed: list[tuple[TreeNode, tuple[str, ...]]],
    numa_root: Callable[[int | None], TreeNode],
    child: Callable[[TreeNode, TreeNode], TreeNode],
) -> None:
    used = {short_bus_id(b) for _, p in placed for b in p if is_bdf(b)}
    serial = 0

    def synthetic_bus() -> str:
        nonlocal serial
        while True:
            serial += 1
            bus = f"{SYNTHETIC_DOMAIN}:ff:{serial:02x}.0"
            if bus not in used:
                return bus

    by_numa: dict[int | None, list[tuple[TreeNode, tuple[str, ...]]]] = {}
    for leaf, path in placed:
        by_numa.setdefault(leaf.numa, []).append((leaf, path))
    for numa in sorted(by_numa, key=lambda n: (n is None, n or 0)):
        group = by_numa[numa]
        root = numa_root(numa)
        gpus = sorted((x for x in group if x[0].kind == "gpu"), key=lambda x: x[0].bus_id or "")
        nics = sorted((x for x in group if x[0].kind == "nic"), key=lambda x: x[0].bus_id or "")
        hb = child(root, _host_bridge(group[0][1][0], numa))
        if not gpus:
            hb.children.extend(leaf for leaf, _ in nics)
            continue
        switches = []
        for leaf, _ in gpus:
            bus = synthetic_bus()
            sw = TreeNode(f"pci:{bus}", "switch", "PCIe switch", bus_id=bus, link=leaf.link, synthetic=True, numa=numa)
            hb.children.append(sw)
            sw.children.append(leaf)
            switches.append(sw)
        for j, (leaf, _) in enumerate(nics):
            switches[j * len(switches) // len(nics)].children.append(leaf)


def _host_bridge(root: str, numa: int | None) -> TreeNode:
    # Keyed by NUMA node too: a VM can report one root bus for devices of two nodes.
    return TreeNode(f"hostbridge:{root}@{numa}", "hostbridge", f"Host bridge {root[3:]}", numa=numa)


def _sort(node: TreeNode) -> None:
    """Children in bus order, as NCCL keeps them (and as lspci shows them)."""
    node.children.sort(key=lambda n: (n.bus_id or n.key.split(":", 1)[-1], n.key))
    for c in node.children:
        _sort(c)
