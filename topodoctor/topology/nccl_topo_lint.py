"""The lint of an existing ``NCCL_TOPO_FILE`` against the probed host: pure functions, text in,
problems out. The rule that reads the file calls ``lint_topo_file``; each check stands alone
so a test (or another tool) can run one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from topodoctor.core.pci import short_bus_id
from topodoctor.topology.graph import connection, gpu_node, nic_node, pcie_subgraph, rdma_nics
from topodoctor.topology.hosttree import sysfs_numa
from topodoctor.topology.ncclxml import PCI_GEN_SPEEDS, TOPO_XML_VERSION, parse_cpumask, pci_kind, speed_per_lane

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.topology.hostgraph import HostGraph


@dataclass(frozen=True)
class TopoProblem:
    """One thing NCCL would get wrong, or refuse, in a topology file."""

    check: str  # syntax | version | bus-id | link-speed | affinity | gdr-distance
    severity: Literal["warning", "error"]
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


def check_syntax(text: str) -> tuple[ET.Element | None, list[TopoProblem]]:
    """Parse as NCCL's hand-written parser would accept it.

    NCCL's parser takes no XML declaration or DTD, and only spaces and newlines between
    elements (a tab there is a parse error at ncclCommInit). A DTD is refused before parsing,
    which also keeps entity expansion out of this process.
    """
    import xml.etree.ElementTree as ET  # the XML parser (6 modules): only where a topology file is read

    problems = []
    head = text.lstrip()
    if head.startswith("<?"):
        problems.append(
            TopoProblem("syntax", "error", "starts with an XML declaration (<?xml ...?>), which NCCL's parser refuses")
        )
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        return None, [*problems, TopoProblem("syntax", "error", "holds a DTD, which NCCL's parser refuses")]
    outside = re.sub(r'"[^"]*"', '""', text)
    if "\t" in outside:
        line = outside[: outside.index("\t")].count("\n") + 1
        problems.append(
            TopoProblem(
                "syntax",
                "error",
                f"a tab on line {line}: NCCL's parser accepts only spaces and newlines between elements",
                {"line": line},
            )
        )
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        return None, [*problems, TopoProblem("syntax", "error", f"is not well-formed XML: {exc}")]
    if root.tag != "system":
        problems.append(TopoProblem("syntax", "error", f"the top element is <{root.tag}>, NCCL reads only <system>"))
    return root, problems


def check_version(root: ET.Element) -> list[TopoProblem]:
    """NCCL refuses any version but its own (ncclTopoXmlLoadSystem: "XML Topology has wrong version")."""
    v = root.get("version")
    if v is None or v.strip() != str(TOPO_XML_VERSION):
        return [
            TopoProblem(
                "version",
                "error",
                f'<system version="{v}">: NCCL needs version="{TOPO_XML_VERSION}" and refuses to start otherwise',
                {"version": v},
            )
        ]
    return []


def _pci_of(root: ET.Element) -> list[tuple[ET.Element, str]]:
    """Every <pci> with its kind: gpu (has <gpu>), nic (has <nic>), the kind its class names, or
    "device" where there is no class (NCCL then reads the class from sysfs)."""
    out = []
    for e in root.iter("pci"):
        if e.find("gpu") is not None:
            kind = "gpu"
        elif e.find("nic") is not None:
            kind = "nic"
        else:
            kind = pci_kind(e.get("class", "")) if e.get("class") else "device"
        out.append((e, kind))
    return out


def check_bus_ids(
    root: ET.Element, host_gpus: set[str], host_nics: set[str], host_bridges: set[str]
) -> list[TopoProblem]:
    """GPUs and NICs must exist here with these bus ids; a bridge may be invented (VMs), but not
    reuse the id of a device that exists, and no id may appear twice."""
    problems = []
    seen: set[str] = set()
    known = host_gpus | host_nics
    for e, kind in _pci_of(root):
        bus = e.get("busid")
        if bus is None:
            problems.append(TopoProblem("bus-id", "error", "a <pci> element has no busid (NCCL fails to load it)"))
            continue
        bus = short_bus_id(bus)
        if bus in seen:
            problems.append(TopoProblem("bus-id", "error", f"bus id {bus} appears twice", {"busid": bus}))
        seen.add(bus)
        if kind in ("gpu", "nic") and bus not in known:
            problems.append(
                TopoProblem(
                    "bus-id",
                    "error",
                    f"{kind.upper()} {bus} is not on this host: NCCL would route over a device that does not exist",
                    {"busid": bus, "kind": kind},
                )
            )
        elif kind == "device" and bus not in known | host_bridges:
            problems.append(
                TopoProblem(
                    "bus-id",
                    "error",
                    f"{bus} is not on this host and has no class: NCCL cannot read one from sysfs and stops",
                    {"busid": bus},
                )
            )
        elif kind == "pci" and bus in known:
            problems.append(
                TopoProblem(
                    "bus-id", "error", f"bridge {bus} reuses the bus id of a GPU or NIC of this host", {"busid": bus}
                )
            )
    for e in root.iter("nvlink"):
        target = e.get("target", "")
        if pci_kind(e.get("tclass", "")) == "gpu" and short_bus_id(target) not in host_gpus:
            problems.append(
                TopoProblem(
                    "bus-id",
                    "error",
                    f"an NVLink points at GPU {target}, which is not on this host",
                    {"target": target},
                )
            )
    return problems


def check_link_speeds(root: ET.Element, host_bridges: set[str], host_devices: set[str]) -> list[TopoProblem]:
    """Every link_speed must be one NCCL knows: an unknown one silently becomes PCIe Gen3.

    A device or bridge that exists here may leave it out (NCCL reads sysfs); one that does not
    exist (a bridge invented for a VM) must give it, or NCCL rates it as Gen3 too.
    """
    problems = []
    for e, kind in _pci_of(root):
        bus = short_bus_id(e.get("busid", ""))
        speed = e.get("link_speed")
        exists = bus in host_bridges or bus in host_devices
        if speed is None or speed == "":
            if not exists and kind == "pci":
                problems.append(
                    TopoProblem(
                        "link-speed",
                        "warning",
                        f"bridge {bus} does not exist on this host and has no link_speed: NCCL rates it as PCIe Gen3",
                        {"busid": bus},
                    )
                )
            continue
        if speed_per_lane(speed) is None:
            problems.append(
                TopoProblem(
                    "link-speed",
                    "warning",
                    f'{kind} {bus} link_speed="{speed}" is not one NCCL knows: '
                    "NCCL silently rates it as PCIe Gen3 (8 GT/s)",
                    {"busid": bus, "link_speed": speed, "known": [s for s, _ in PCI_GEN_SPEEDS]},
                )
            )
        width = e.get("link_width")
        if width is not None and width.strip() and not width.strip().isdigit():
            problems.append(
                TopoProblem(
                    "link-speed",
                    "warning",
                    f'{kind} {bus} link_width="{width}" is not a number',
                    {"busid": bus, "link_width": width},
                )
            )
    return problems


def _cpu_of(root: ET.Element) -> dict[str, str | None]:
    """Bus id of each GPU / NIC in the file -> numaid of the <cpu> it hangs under."""
    out: dict[str, str | None] = {}
    for cpu in root.iter("cpu"):
        for e in cpu.iter("pci"):
            if e.find("gpu") is not None or e.find("nic") is not None:
                out[short_bus_id(e.get("busid", ""))] = cpu.get("numaid")
    return out


def check_affinity(
    root: ET.Element, device_numa: dict[str, int | None], numa_cpus: dict[int, tuple[int, ...]]
) -> list[TopoProblem]:
    """Each GPU and NIC under the CPU of the NUMA node the host puts it on, and each CPU's
    affinity the CPUs of that node: NCCL pins its threads and pairs GPU with NIC by it."""
    problems = []
    for bus, numaid in sorted(_cpu_of(root).items()):
        want = device_numa.get(bus)
        if want is None or numaid is None:
            continue
        if numaid.strip() != str(want):
            problems.append(
                TopoProblem(
                    "affinity",
                    "warning",
                    f"{bus} is under the CPU of NUMA node {numaid} in the file, but on NUMA node {want} on this host",
                    {"busid": bus, "file_numa": numaid, "host_numa": want},
                )
            )
    for cpu in root.iter("cpu"):
        numaid, aff = cpu.get("numaid"), cpu.get("affinity")
        if aff is None or numaid is None or not numaid.strip().lstrip("-").isdigit():
            continue
        cpus = parse_cpumask(aff)
        host = numa_cpus.get(int(numaid))
        if host is not None and cpus is not None and set(cpus) != set(host):
            problems.append(
                TopoProblem(
                    "affinity",
                    "warning",
                    f"CPU numaid={numaid} affinity={aff} is not the CPU list of NUMA node {numaid} here",
                    {"numaid": numaid, "affinity": aff, "host_cpus": len(host)},
                )
            )
    return problems


def _ancestors(root: ET.Element) -> dict[str, list[ET.Element]]:
    """Bus id of each GPU / NIC -> its chain of <pci> and <cpu> ancestors, nearest first."""
    parent = {c: p for p in root.iter() for c in p}
    out = {}
    for e in root.iter("pci"):
        if e.find("gpu") is None and e.find("nic") is None:
            continue
        chain, p = [], parent.get(e)
        while p is not None and p.tag in ("pci", "cpu"):
            chain.append(p)
            p = parent.get(p)
        out[short_bus_id(e.get("busid", ""))] = chain
    return out


PATH_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}


def file_path_class(chains: dict[str, list[ET.Element]], a: str, b: str) -> str | None:
    """The nvidia-smi class NCCL would give the path between two devices of the file."""
    ca, cb = chains.get(a), chains.get(b)
    if ca is None or cb is None:
        return None
    common = next((x for x in ca if any(x is y for y in cb)), None)
    if common is None:
        return "SYS"
    if common.tag == "cpu":
        return "PHB"
    bridges = ca.index(common) + cb.index(common)
    return "PIX" if bridges == 0 else "PXB"


def check_gdr_distance(
    root: ET.Element, nics: list[str], gpus: list[str], host_class: Mapping[tuple[str, str], str]
) -> list[TopoProblem]:
    """A NIC must sit as close to its nearest GPU in the file as on the host: NCCL turns
    GPUDirect RDMA on only up to PXB (NCCL_NET_GDR_LEVEL), so a NIC moved further away
    loses it, and one placed too close claims a path the hardware lacks."""
    problems = []
    chains = _ancestors(root)
    for nic in nics:
        if nic not in chains:
            continue
        best_file = min(
            (file_path_class(chains, nic, g) or "SYS" for g in gpus if g in chains),
            key=PATH_RANK.__getitem__,
            default=None,
        )
        best_host = min(
            (host_class[(nic, g)] for g in gpus if (nic, g) in host_class),
            key=lambda c: PATH_RANK.get(c, 4),
            default=None,
        )
        if best_file is None or best_host is None:
            continue
        gdr_file, gdr_host = PATH_RANK[best_file] <= PATH_RANK["PXB"], PATH_RANK.get(best_host, 4) <= PATH_RANK["PXB"]
        if gdr_host and not gdr_file:
            problems.append(
                TopoProblem(
                    "gdr-distance",
                    "warning",
                    f"NIC {nic} is {best_file} from its nearest GPU in the file but {best_host} on this host: "
                    "NCCL will not use GPUDirect RDMA for it",
                    {"nic": nic, "file": best_file, "host": best_host},
                )
            )
    return problems


def lint_topo_file(text: str, snap: HostSnapshot, g: HostGraph) -> list[TopoProblem]:
    """Every check above on one file, against the probed host (``g`` is its graph)."""
    root, problems = check_syntax(text)
    if root is None:
        return problems
    problems += check_version(root)
    gpus = {short_bus_id(x.bus_id): gpu_node(x.index) for x in snap.gpus if isinstance(x.bus_id, str)}
    nics = {short_bus_id(n.bus_id): nic_node(k) for k, n in enumerate(rdma_nics(snap)) if isinstance(n.bus_id, str)}
    other_nics = {short_bus_id(n.bus_id) for n in snap.nics if isinstance(n.bus_id, str)}
    bridges = {short_bus_id(b.bus_id) for b in snap.bridges}
    problems += check_bus_ids(root, set(gpus), set(nics) | other_nics, bridges)
    problems += check_link_speeds(root, bridges, set(gpus) | set(nics) | other_nics)
    numa = {bus: sysfs_numa(snap, node) for bus, node in {**gpus, **nics}.items()}
    problems += check_affinity(root, numa, {n.id: n.cpus for n in snap.host.numa_nodes})
    sub = pcie_subgraph(g)
    host_class = {}
    for nb, nn in nics.items():
        for gb, gn in gpus.items():
            c = connection(snap, g, nn, gn, sub)
            host_class[(nb, gb)] = c.pcie_cls or c.cls
    problems += check_gdr_distance(root, sorted(nics), sorted(gpus), host_class)
    return problems


def topology_facts(root: ET.Element) -> dict[str, Any]:
    """What NCCL builds its paths from, in a comparable form: each GPU's bus id with its NVLinks
    (peer GPU bus id, or the kind of device at the far end, and the link count), and the CPU
    each GPU and NIC hangs under."""
    gpus: dict[str, list[tuple[str, int]]] = {}
    for e in root.iter("pci"):
        gpu = e.find("gpu")
        if gpu is None:
            continue
        links = []
        for nv in gpu.iter("nvlink"):
            kind = pci_kind(nv.get("tclass", ""))
            far = short_bus_id(nv.get("target", "")) if kind == "gpu" else kind
            links.append((far, int(nv.get("count", "0") or 0)))
        gpus[short_bus_id(e.get("busid", ""))] = sorted(links)
    return {"gpus": gpus, "cpu_of": _cpu_of(root)}


def topology_differences(ours: str, theirs: str) -> list[str]:
    """Where two topology files disagree on GPUs, NVLinks or CPU placement (empty: the same).
    Used to compare the file topodoctor wrote with the one NCCL dumps after loading it."""
    import xml.etree.ElementTree as ET  # the XML parser (6 modules): only where a topology file is read

    a, b = topology_facts(ET.fromstring(ours)), topology_facts(ET.fromstring(theirs))
    out = []
    for bus in sorted(set(a["gpus"]) | set(b["gpus"])):
        if bus not in b["gpus"]:
            out.append(f"GPU {bus} only in the first")
        elif bus not in a["gpus"]:
            out.append(f"GPU {bus} only in the second")
        elif a["gpus"][bus] != b["gpus"][bus]:
            out.append(f"GPU {bus} NVLinks {a['gpus'][bus]} != {b['gpus'][bus]}")
    for bus in sorted(set(a["cpu_of"]) & set(b["cpu_of"])):
        if a["cpu_of"][bus] != b["cpu_of"][bus]:
            out.append(f"{bus} under CPU numaid {a['cpu_of'][bus]} != {b['cpu_of'][bus]}")
    return out
