"""Host facts from /proc and /sys: kernel, CPUs, sockets, NUMA nodes, virtualization, IOMMU,
network devices. NVML says none of these."""

from __future__ import annotations

from topodoctor.core.cpulist import parse_cpulist
from topodoctor.core.pci import is_bdf
from topodoctor.core.probed import Probed, ProbeError, Unsupported, ok
from topodoctor.model.snapshot import NetInterface, Nic, NicKind, NumaNode, Virtualization
from topodoctor.probe import nic_ports
from topodoctor.probe.pcie import numa_of, pcie_path
from topodoctor.probe.query import entries, sys_list, sys_read, sys_realpath
from topodoctor.probe.sysfs import Sysfs

_CONTAINER_MARKERS = ("docker", "kubepods", "containerd", "libpod", "lxc")


def cpuinfo(fs: Sysfs) -> tuple[Probed[str], Probed[int], dict[int, int], bool]:
    """CPU model, socket count, cpu -> socket, and whether the hypervisor flag is set."""
    text = sys_read(fs, "/proc/cpuinfo", str)
    if not isinstance(text, str):
        return text, text, {}, False
    model: Probed[str] = Unsupported("ABSENT")
    sockets: dict[int, int] = {}
    cpu = -1
    hypervisor = False
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "processor":
            cpu = int(val) if val.isdigit() else cpu
        elif key == "model name" and not ok(model):
            model = val
        elif key == "physical id" and val.isdigit():
            sockets[cpu] = int(val)
        elif key == "flags" and not hypervisor:
            hypervisor = "hypervisor" in val.split()
    count: Probed[int] = len(set(sockets.values())) if sockets else Unsupported("NO_PHYSICAL_ID")
    return model, count, sockets, hypervisor


def _kept(value: Probed[str], problems: list[ProbeError]) -> Probed[str]:
    if isinstance(value, ProbeError):
        problems.append(value)
    return value


def numa_nodes(fs: Sysfs, cpu_socket: dict[int, int], problems: list[ProbeError]) -> tuple[NumaNode, ...]:
    """The NUMA nodes from ``/sys/devices/system/node`` with their CPUs and socket (``numactl -H``)."""
    nodes = []
    for name in entries(sys_list(fs, "/sys/devices/system/node"), problems):
        if not (name.startswith("node") and name[4:].isdigit()):
            continue
        cpus = sys_read(fs, f"/sys/devices/system/node/{name}/cpulist", parse_cpulist)
        if isinstance(cpus, ProbeError):
            problems.append(cpus)
        cpu_t = cpus if isinstance(cpus, tuple) else ()
        sockets = {cpu_socket[c] for c in cpu_t if c in cpu_socket}
        socket: Probed[int] = sockets.pop() if len(sockets) == 1 else Unsupported("UNKNOWN")
        nodes.append(NumaNode(id=int(name[4:]), cpus=cpu_t, socket=socket))
    return tuple(sorted(nodes, key=lambda n: n.id))


def virtualization(fs: Sysfs, hypervisor_flag: bool, problems: list[ProbeError]) -> tuple[Virtualization, str]:
    """bare-metal or vm, from the CPU's hypervisor flag and the DMI vendor strings."""
    if hypervisor_flag:
        vendor = _kept(sys_read(fs, "/sys/class/dmi/id/sys_vendor", str), problems)
        product = _kept(sys_read(fs, "/sys/class/dmi/id/product_name", str), problems)
        detail = " ".join(v for v in (vendor, product) if isinstance(v, str)) or "cpu hypervisor flag"
        return "vm", detail
    if ok(sys_read(fs, "/proc/cpuinfo", str)):
        return "bare-metal", "no hypervisor flag"
    return "unknown", "cpuinfo unreadable"


def in_container(fs: Sysfs, problems: list[ProbeError]) -> bool:
    """Whether this process runs in a container: a runtime's marker file, or a container's cgroup."""
    for marker in ("/.dockerenv", "/run/.containerenv"):
        if ok(_kept(sys_read(fs, marker, str), problems)):
            return True
    cgroup = _kept(sys_read(fs, "/proc/self/cgroup", str), problems)
    return isinstance(cgroup, str) and any(m in cgroup for m in _CONTAINER_MARKERS)


def iommu_state(fs: Sysfs) -> Probed[str]:
    """'on' when the kernel registered an IOMMU (translation possible), else 'off'; a
    listing that cannot be read leaves it unknown (ProbeError), never 'off'."""
    for path in ("/sys/class/iommu", "/sys/kernel/iommu_groups"):
        listing = sys_list(fs, path)
        if isinstance(listing, ProbeError):
            return listing
        if isinstance(listing, list) and listing:
            return "on"
    return "off"


def _rdma_state(text: str) -> str:
    return text.split(":", 1)[-1].strip()  # "4: ACTIVE" -> "ACTIVE"


def _rdma_rate(text: str) -> float:
    return float(text.split()[0])  # "400 Gb/sec (4X NDR)"


def _eth_rate(text: str) -> Probed[float]:
    mbps = int(text)
    return mbps / 1000.0 if mbps > 0 else Unsupported("SPEED_UNKNOWN")  # virtio reports -1


def _pci_of(fs: Sysfs, dev_link: str) -> Probed[str]:
    """The PCI function behind a class device; virtio and other buses hang below one."""
    real = sys_realpath(fs, dev_link)
    if isinstance(real, Unsupported):
        return Unsupported("VIRTUAL")
    if isinstance(real, ProbeError):
        return real
    for part in reversed(real.rstrip("/").split("/")):
        if is_bdf(part):
            return part
    return Unsupported("NOT_PCI")


def nics(fs: Sysfs, problems: list[ProbeError]) -> tuple[tuple[Nic, ...], tuple[NetInterface, ...]]:
    """RDMA devices (InfiniBand / RoCE) and PCI Ethernet devices, plus every net interface.
    Listings that cannot be read go to ``problems``: an unreadable directory is not "no NICs"."""
    out: list[Nic] = []
    rdma_netdevs: set[str] = set()
    for name in entries(sys_list(fs, "/sys/class/infiniband"), problems):
        base = f"/sys/class/infiniband/{name}"
        ports = entries(sys_list(fs, f"{base}/ports"), problems) or ["1"]
        port = f"{base}/ports/{ports[0]}"
        layer = _kept(sys_read(fs, f"{port}/link_layer", str), problems)
        kind: NicKind = "roce" if layer == "Ethernet" else "infiniband"
        netdevs = tuple(entries(sys_list(fs, f"{base}/device/net"), problems))
        rdma_netdevs.update(netdevs)
        bus = _pci_of(fs, f"{base}/device")
        out.append(
            Nic(
                name=name,
                kind=kind,
                bus_id=bus,
                pcie_path=pcie_path(fs, bus) if isinstance(bus, str) else bus,
                numa_node=numa_of(fs, bus) if isinstance(bus, str) else bus,
                netdevs=netdevs,
                state=sys_read(fs, f"{port}/state", _rdma_state),
                rate_gbps=sys_read(fs, f"{port}/rate", _rdma_rate),
                ports=nic_ports.ports(fs, name, netdevs, problems),
                fw_ver=sys_read(fs, f"{base}/fw_ver", str),
                hca_type=sys_read(fs, f"{base}/hca_type", str),
            )
        )
    interfaces: list[NetInterface] = []
    for name in entries(sys_list(fs, "/sys/class/net"), problems):
        base = f"/sys/class/net/{name}"
        state = _kept(sys_read(fs, f"{base}/operstate", str), problems)
        bus = _pci_of(fs, f"{base}/device")
        if isinstance(bus, ProbeError):
            problems.append(bus)
        interfaces.append(
            NetInterface(name, state if isinstance(state, str) else "unknown", bus if isinstance(bus, str) else None)
        )
        if isinstance(bus, str) and name not in rdma_netdevs:
            out.append(
                Nic(
                    name=name,
                    kind="ethernet",
                    bus_id=bus,
                    pcie_path=pcie_path(fs, bus),
                    numa_node=numa_of(fs, bus),
                    netdevs=(name,),
                    state=state,
                    rate_gbps=sys_read(fs, f"{base}/speed", _eth_rate),
                )
            )
    return tuple(out), tuple(interfaces)


PCI_DEVICES = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"


def pci_gpus(fs: Sysfs) -> Probed[tuple[str, ...]]:
    """NVIDIA display-class functions on the PCI bus (class 0x03xxxx: VGA or 3D controller),
    as lspci -d 10de::0300 / 10de::0302 lists them: what NVML should count."""
    listing = sys_list(fs, PCI_DEVICES)
    if not isinstance(listing, list):
        return listing
    found = []
    for bdf in listing:
        vendor = sys_read(fs, f"{PCI_DEVICES}/{bdf}/vendor", str)
        if isinstance(vendor, ProbeError):
            return vendor
        if vendor != NVIDIA_VENDOR:
            continue
        cls = sys_read(fs, f"{PCI_DEVICES}/{bdf}/class", str)
        if isinstance(cls, ProbeError):
            return cls
        if isinstance(cls, str) and cls.lower().startswith("0x03"):
            found.append(bdf)
    return tuple(found)
