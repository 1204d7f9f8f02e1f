"""HostSnapshot: everything the probe learned about one host, as frozen plain data.

The snapshot is the only thing that flows from the probe to the graph and the rules. It
round-trips through JSON (``codec.dumps`` / ``snapshot_from_data``) with a schema
version, so a scan can be saved on one machine and checked on another.

Each probed field is ``Probed[T]``: a value, ``Unsupported`` or ``ProbeError``.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from topodoctor.core import codec
from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.core.records import Record
from topodoctor.model.fitness import GpuFitness, NicPort

SNAPSHOT_SCHEMA_VERSION = 1

Virtualization = Literal["bare-metal", "vm", "unknown"]
NvLinkRemote = Literal["gpu", "switch", "ibmnpu", "unknown"]
PortType = Literal["root_port", "upstream", "downstream", "pci_bridge", "endpoint", "unknown"]
NicKind = Literal["infiniband", "roce", "ethernet"]


class NumaNode(Record):
    """One NUMA node: its id, the CPUs sysfs lists under it, and the socket they sit on."""

    id: int
    cpus: tuple[int, ...]
    socket: Probed[int] = field(default_factory=Unsupported)


class HostInfo(Record):
    """The host as a whole: name, kernel, driver and NVML versions, CPUs, NUMA nodes, IOMMU and
    whether it runs in a VM or a container."""

    hostname: str
    kernel: Probed[str]
    virtualization: Virtualization  # the machine: bare-metal or vm
    virtualization_detail: str
    container: bool  # running inside a container (on either)
    driver_version: Probed[str]
    cuda_driver_version: Probed[str]
    nvml_version: Probed[str]
    cpu_model: Probed[str]
    sockets: Probed[int]
    online_cpus: Probed[tuple[int, ...]]
    numa_nodes: tuple[NumaNode, ...]
    iommu: Probed[str]  # "off" | "on" (translation domains exist)


class NvLinkErrors(Record):
    """Data-link-layer counters. Raw CRC counts tick on healthy Hopper links: not a fault alone."""

    replay: Probed[int]
    recovery: Probed[int]
    crc: Probed[int]


class NvLink(Record):
    """One NVLink of a GPU: state, version, what sits at the far end, speed and error counters."""

    link: int
    active: Probed[bool]
    version: Probed[int]  # NVML's enum: 1..7; nvlink_generation() maps it to NVLink 1..5
    remote_type: Probed[NvLinkRemote]
    remote_bus_id: Probed[str]
    capabilities: Probed[tuple[str, ...]]  # names of the capability bits that are set
    speed_mbps: Probed[int]
    errors: NvLinkErrors

    @property
    def is_up(self) -> bool | None:
        """Whether the link is up: True, False, or None when NVML could not say (unsupported or a
        probe failure, which the rules report as could-not-check, never as a down link)."""
        return self.active if isinstance(self.active, bool) else None


class PcieLink(Record):
    """A GPU's PCIe link: generation and width as trained and at most, and its replay counter."""

    gen_current: Probed[int]
    gen_max: Probed[int]  # the max of GPU and slot (what the link can train to)
    gpu_gen_max: Probed[int]  # the GPU's own max
    width_current: Probed[int]
    width_max: Probed[int]
    replay_counter: Probed[int]


class RemappedRows(Record):
    """HBM row remapping as NVML reports it (``nvmlDeviceGetRemappedRows``): rows remapped per
    cause, and whether a remap waits for a reset or has failed."""

    correctable: int
    uncorrectable: int
    pending: bool
    failed: bool


class RetiredPages(Record):
    """Dynamic page retirement (pre-Ampere GPUs; Ampere and later remap rows instead)."""

    single_bit: int  # pages retired for repeated single-bit ECC errors
    double_bit: int  # pages retired for double-bit ECC errors
    pending: bool  # a retirement waits for the next GPU reset


class FabricInfo(Record):
    """A GPU's registration with the NVLink fabric (fabric manager): state, status, clique and health."""

    state: str  # not_supported | not_started | in_progress | completed
    status: str  # NVML return name of the fabric registration, e.g. SUCCESS
    clique_id: int
    cluster_uuid: str
    health_mask: int | None = None


class ComputeProcess(Record):
    """A compute process on a GPU (nvidia-smi's process list), with who runs it where readable."""

    pid: int
    used_memory_bytes: int | None  # None where NVML cannot tell (some VMs, MIG)
    uid: Probed[int]  # the real user id, from /proc/PID/status
    parent_pid: Probed[int]
    cmdline: Probed[str]  # arguments joined by spaces, cut at 4 KiB
    ours: bool  # the probing process, a child of it (a check's own ranks), or of the check's Slurm job
    slurm_job: str | None = None  # the Slurm job whose cgroup holds it, where readable


class Gpu(Record):
    """Everything the probe read about one GPU; ``lost`` is set, and little else, when it stopped answering."""

    index: int
    lost: ProbeError | None  # set when the GPU answered GPU_IS_LOST / RESET_REQUIRED / no handle
    bus_id: Probed[str]
    name: Probed[str]
    uuid: Probed[str]
    serial: Probed[str]
    minor_number: Probed[int]
    architecture: Probed[str]
    compute_capability: Probed[str]
    memory_total_bytes: Probed[int]
    persistence_mode: Probed[bool]
    mig_mode: Probed[bool]
    ecc_mode: Probed[bool]
    virtualization_mode: Probed[str]
    pcie: PcieLink
    numa_node: Probed[int]  # nvmlDeviceGetNumaNodeId: the GPU memory's own node (C2C systems)
    sysfs_numa_node: Probed[int]  # the PCI device's node; -1 in sysfs becomes Unsupported
    cpu_affinity: Probed[tuple[int, ...]]
    memory_affinity: Probed[tuple[int, ...]]  # NUMA nodes near the GPU (nvidia-smi "NUMA Affinity")
    nvlink_count: Probed[int]
    nvlinks: tuple[NvLink, ...]
    remapped_rows: Probed[RemappedRows]
    ecc_uncorrected_volatile: Probed[int]
    ecc_uncorrected_aggregate: Probed[int]
    fabric: Probed[FabricInfo]
    pcie_path: Probed[tuple[str, ...]]  # PCI addresses from the root complex down to the GPU
    iommu_group_type: Probed[str]
    retired_pages: Probed[RetiredPages] = field(default_factory=lambda: Unsupported("NOT_ASKED"))
    compute_processes: Probed[tuple[ComputeProcess, ...]] = field(default_factory=lambda: Unsupported("NOT_ASKED"))
    # Clocks, power, temperatures, PCIe counters; "not recorded" in snapshots made before them.
    fitness: GpuFitness = field(default_factory=GpuFitness.unrecorded)


class P2pStatus(Record):
    """NVML's peer-to-peer status for one direction of a pair, per capability (read, write, NVLink,
    atomics, PCI): ``OK`` or the reason it is not."""

    read: Probed[str]
    write: Probed[str]
    nvlink: Probed[str]
    atomics: Probed[str]
    pci: Probed[str]


class GpuPair(Record):
    """Two GPUs (``a < b``): their common PCIe ancestor as NVML names it and P2P in each direction."""

    a: int
    b: int
    common_ancestor: Probed[str]  # NVML topology level: INTERNAL SINGLE MULTIPLE HOSTBRIDGE NODE SYSTEM
    p2p: P2pStatus  # a -> b
    p2p_reverse: P2pStatus  # b -> a


class NvSwitch(Record):
    """An NVSwitch and the (GPU, link) pairs that reach it; ``inferred`` where only the links show it."""

    id: str
    bus_id: Probed[str]
    inferred: bool  # True when the links point at switches the host cannot see (VM, all-FF PCI)
    gpu_links: tuple[tuple[int, int], ...]  # (gpu index, link index)


class PcieBridge(Record):
    """A PCIe bridge or switch port on a GPU's or NIC's path: link as trained and at most, ACS, NUMA node."""

    bus_id: str
    port_type: PortType
    vendor_id: Probed[str]
    device_id: Probed[str]
    link_speed: Probed[str]
    link_width: Probed[int]
    max_link_speed: Probed[str]
    max_link_width: Probed[int]
    acs_ctrl: Probed[int]  # ACS Control register; Unsupported where the bridge has no ACS
    numa_node: Probed[int]


class Nic(Record):
    """A network adapter (an RDMA device or a plain Ethernet one): where it sits on PCIe, its state,
    rate and ports."""

    name: str  # the RDMA device (mlx5_0) or the net device for plain Ethernet
    kind: NicKind
    bus_id: Probed[str]
    pcie_path: Probed[tuple[str, ...]]
    numa_node: Probed[int]
    netdevs: tuple[str, ...]
    state: Probed[str]  # ACTIVE / DOWN for RDMA ports, operstate for Ethernet
    rate_gbps: Probed[float]
    # Every port of an RDMA device with its counters; empty in snapshots made before them,
    # where ``state`` and ``rate_gbps`` (of the first port) stand for the device.
    ports: tuple[NicPort, ...] = ()
    fw_ver: Probed[str] = field(default_factory=lambda: Unsupported("NOT_ASKED"))
    hca_type: Probed[str] = field(default_factory=lambda: Unsupported("NOT_ASKED"))  # MT4129: the device model


class NetInterface(Record):
    """A network interface as the kernel lists it, with its PCI device where it has one."""

    name: str
    operstate: str
    bus_id: str | None  # None for virtual interfaces


class XidEvent(Record):
    """One "NVRM: Xid (PCI:...): N, ..." line of the kernel log."""

    code: int
    bus_id: str  # as sysfs writes it: 0000:3b:00.0
    text: str  # the driver's words after the code: pid, process, detail
    boot_s: float | None  # seconds since boot when the driver logged it; None when the line had no time


class KernelEvents(Record):
    """What the kernel log said about the GPUs: the XID events read from ``source``."""

    source: str  # /dev/kmsg
    uptime_s: float | None  # seconds since boot when the log was read (ages the events)
    xids: tuple[XidEvent, ...]


class HostSnapshot(Record):
    """Everything the probe learned about one host; the rules, the graph and every report start here."""

    kind: Literal["snapshot"]
    schema_version: int
    host: HostInfo
    gpu_count: Probed[int]
    gpus: tuple[Gpu, ...]
    pairs: tuple[GpuPair, ...]
    nvswitches: tuple[NvSwitch, ...]
    bridges: tuple[PcieBridge, ...]
    nics: tuple[Nic, ...]
    interfaces: tuple[NetInterface, ...]
    probe_errors: tuple[ProbeError, ...]  # failures not tied to one field
    # NVIDIA display-class PCI functions (vendor 0x10de, class 0x03xx) as sysfs lists them:
    # a GPU on the bus that NVML does not count is missing, whatever the expectations say.
    pci_gpus: Probed[tuple[str, ...]] = field(default_factory=lambda: Unsupported("NOT_ASKED"))
    # NVIDIA driver events from the kernel log; NOT_PROBED in snapshots made before they were read
    kernel_events: Probed[KernelEvents] = field(default_factory=lambda: Unsupported("NOT_PROBED"))

    def gpu(self, index: int) -> Gpu:
        """The GPU with this NVML index (KeyError if the snapshot has none)."""
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(index)

    def pair(self, a: int, b: int) -> GpuPair:
        """The pair of these two GPUs, in either order (KeyError if there is none)."""
        lo, hi = min(a, b), max(a, b)
        for p in self.pairs:
            if (p.a, p.b) == (lo, hi):
                return p
        raise KeyError((a, b))

    def p2p(self, src: int, dst: int) -> P2pStatus:
        """P2P status in the direction ``src`` -> ``dst``."""
        p = self.pair(src, dst)
        return p.p2p if p.a == src else p.p2p_reverse

    def bridge(self, bus_id: str) -> PcieBridge | None:
        """The PCIe bridge with this bus id, or None when the probe did not see it."""
        for b in self.bridges:
            if b.bus_id == bus_id:
                return b
        return None


def snapshot_from_data(data: Any, what: str = "snapshot") -> HostSnapshot:
    """A snapshot from decoded JSON, its header checked; ``what`` names it in errors."""
    codec.check_header(data, "snapshot", SNAPSHOT_SCHEMA_VERSION, what)
    return codec.from_jsonable(HostSnapshot, data, what)


def load_snapshot(path: Path | str) -> HostSnapshot:
    """Read a snapshot saved by ``scan --format json`` (or embedded in a result)."""
    return snapshot_from_data(codec.read_json(path, "snapshot"), f"snapshot {path}")


# NVML's nvmlDeviceGetNvLinkVersion enum: 1 = NVLink 1.0 ... 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0
_NVLINK_GENERATION = {1: 1.0, 2: 2.0, 3: 2.2, 4: 3.0, 5: 3.1, 6: 4.0, 7: 5.0}


def nvlink_generation(version: int) -> float | None:
    """The NVLink generation (1 to 5) for NVML's NVLink version enum, or None for a value it does not know."""
    return _NVLINK_GENERATION.get(version)
