"""HostSnapshot: everything the probe learned about one host, as frozen plain data.

The snapshot is the only thing that flows from the probe to the graph and the rules. It
round-trips through JSON (``snapshot_to_json`` / ``snapshot_from_json``) with a schema
version, so a scan can be saved on one machine and checked on another.

Each probed field is ``Probed[T]``: a value, ``Unsupported`` or ``ProbeError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from topodoctor.core import codec
from topodoctor.core.probed import Probed, ProbeError, Unsupported

SNAPSHOT_SCHEMA_VERSION = 1

Virtualization = Literal["bare-metal", "vm", "unknown"]
NvLinkRemote = Literal["gpu", "switch", "ibmnpu", "unknown"]
PortType = Literal["root_port", "upstream", "downstream", "pci_bridge", "endpoint", "unknown"]
NicKind = Literal["infiniband", "roce", "ethernet"]


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: tuple[int, ...]
    socket: Probed[int] = field(default_factory=Unsupported)


@dataclass(frozen=True)
class HostInfo:
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


@dataclass(frozen=True)
class NvLinkErrors:
    """Data-link-layer counters. Raw CRC counts tick on healthy Hopper links: not a fault alone."""

    replay: Probed[int]
    recovery: Probed[int]
    crc: Probed[int]


@dataclass(frozen=True)
class NvLink:
    link: int
    active: Probed[bool]
    version: Probed[int]  # NVML's enum: 1..7; nvlink_generation() maps it to NVLink 1..5
    remote_type: Probed[NvLinkRemote]
    remote_bus_id: Probed[str]
    capabilities: Probed[tuple[str, ...]]  # names of the capability bits that are set
    speed_mbps: Probed[int]
    errors: NvLinkErrors


@dataclass(frozen=True)
class PcieLink:
    gen_current: Probed[int]
    gen_max: Probed[int]  # the max of GPU and slot (what the link can train to)
    gpu_gen_max: Probed[int]  # the GPU's own max
    width_current: Probed[int]
    width_max: Probed[int]
    replay_counter: Probed[int]


@dataclass(frozen=True)
class RemappedRows:
    correctable: int
    uncorrectable: int
    pending: bool
    failed: bool


@dataclass(frozen=True)
class RetiredPages:
    """Dynamic page retirement (pre-Ampere GPUs; Ampere and later remap rows instead)."""

    single_bit: int  # pages retired for repeated single-bit ECC errors
    double_bit: int  # pages retired for double-bit ECC errors
    pending: bool  # a retirement waits for the next GPU reset


@dataclass(frozen=True)
class FabricInfo:
    state: str  # not_supported | not_started | in_progress | completed
    status: str  # NVML return name of the fabric registration, e.g. SUCCESS
    clique_id: int
    cluster_uuid: str
    health_mask: int | None = None


@dataclass(frozen=True)
class Gpu:
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


@dataclass(frozen=True)
class P2pStatus:
    read: Probed[str]
    write: Probed[str]
    nvlink: Probed[str]
    atomics: Probed[str]
    pci: Probed[str]


@dataclass(frozen=True)
class GpuPair:
    a: int
    b: int
    common_ancestor: Probed[str]  # NVML topology level: INTERNAL SINGLE MULTIPLE HOSTBRIDGE NODE SYSTEM
    p2p: P2pStatus  # a -> b
    p2p_reverse: P2pStatus  # b -> a


@dataclass(frozen=True)
class NvSwitch:
    id: str
    bus_id: Probed[str]
    inferred: bool  # True when the links point at switches the host cannot see (VM, all-FF PCI)
    gpu_links: tuple[tuple[int, int], ...]  # (gpu index, link index)


@dataclass(frozen=True)
class PcieBridge:
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


@dataclass(frozen=True)
class Nic:
    name: str  # the RDMA device (mlx5_0) or the net device for plain Ethernet
    kind: NicKind
    bus_id: Probed[str]
    pcie_path: Probed[tuple[str, ...]]
    numa_node: Probed[int]
    netdevs: tuple[str, ...]
    state: Probed[str]  # ACTIVE / DOWN for RDMA ports, operstate for Ethernet
    rate_gbps: Probed[float]


@dataclass(frozen=True)
class NetInterface:
    name: str
    operstate: str
    bus_id: str | None  # None for virtual interfaces


@dataclass(frozen=True)
class XidEvent:
    """One "NVRM: Xid (PCI:...): N, ..." line of the kernel log."""

    code: int
    bus_id: str  # as sysfs writes it: 0000:3b:00.0
    text: str  # the driver's words after the code: pid, process, detail
    boot_s: float | None  # seconds since boot when the driver logged it; None when the line had no time


@dataclass(frozen=True)
class KernelEvents:
    source: str  # /dev/kmsg
    uptime_s: float | None  # seconds since boot when the log was read (ages the events)
    xids: tuple[XidEvent, ...]


@dataclass(frozen=True)
class HostSnapshot:
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
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(index)

    def pair(self, a: int, b: int) -> GpuPair:
        lo, hi = min(a, b), max(a, b)
        for p in self.pairs:
            if (p.a, p.b) == (lo, hi):
                return p
        raise KeyError((a, b))

    def p2p(self, src: int, dst: int) -> P2pStatus:
        p = self.pair(src, dst)
        return p.p2p if p.a == src else p.p2p_reverse

    def bridge(self, bus_id: str) -> PcieBridge | None:
        for b in self.bridges:
            if b.bus_id == bus_id:
                return b
        return None


def snapshot_to_json(snap: HostSnapshot) -> str:
    return codec.dumps(snap)


def snapshot_from_data(data: Any, what: str = "snapshot") -> HostSnapshot:
    codec.check_header(data, "snapshot", SNAPSHOT_SCHEMA_VERSION, what)
    return codec.from_jsonable(HostSnapshot, data, what)


def load_snapshot(path: Path | str) -> HostSnapshot:
    return snapshot_from_data(codec.read_json(path, "snapshot"), f"snapshot {path}")


# NVML's nvmlDeviceGetNvLinkVersion enum: 1 = NVLink 1.0 ... 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0
_NVLINK_GENERATION = {1: 1.0, 2: 2.0, 3: 2.2, 4: 3.0, 5: 3.1, 6: 4.0, 7: 5.0}


def nvlink_generation(version: int) -> float | None:
    return _NVLINK_GENERATION.get(version)
