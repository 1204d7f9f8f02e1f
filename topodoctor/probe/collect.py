"""The probe: NVML + sysfs -> HostSnapshot. Live, recorded and replayed scans all run this."""

from __future__ import annotations

from dataclasses import dataclass, replace

from topodoctor.core.cpulist import parse_cpulist
from topodoctor.core.errors import ProbeUnavailable
from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.model.fitness import GpuFitness
from topodoctor.model.nvml_codes import init_failure
from topodoctor.model.snapshot import (
    SNAPSHOT_SCHEMA_VERSION,
    Gpu,
    GpuPair,
    HostInfo,
    HostSnapshot,
    KernelEvents,
    NetInterface,
    Nic,
    NumaNode,
    NvSwitch,
    P2pStatus,
    Virtualization,
)
from topodoctor.probe import host as hostfacts
from topodoctor.probe import nic_ports
from topodoctor.probe.api import NvmlApi
from topodoctor.probe.fitness import counter_sample, probe_fitness
from topodoctor.probe.gpu import probe_gpu
from topodoctor.probe.kernel_log import read_kernel_events
from topodoctor.probe.pcie import bridges_on, read_bridge
from topodoctor.probe.processes import Me, compute_processes
from topodoctor.probe.query import Nvml, sys_read
from topodoctor.probe.sysfs import Sysfs

_TOPOLOGY = {0: "INTERNAL", 10: "SINGLE", 20: "MULTIPLE", 30: "HOSTBRIDGE", 40: "NODE", 50: "SYSTEM"}
_P2P = {
    0: "OK",
    1: "CHIPSET_NOT_SUPPORTED",
    2: "GPU_NOT_SUPPORTED",
    3: "IOH_TOPOLOGY_NOT_SUPPORTED",
    4: "DISABLED_BY_REGKEY",
    5: "NOT_SUPPORTED",
    6: "UNKNOWN",
}
# nvmlDeviceGetP2PStatus capability indices: READ WRITE NVLINK ATOMICS PCI(PROP)
_P2P_INDEX = (0, 1, 2, 3, 4)
_BACK_INDEX = (0, 1)  # the reverse direction: read and write, the two that can differ by direction


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _p2p(nvml: Nvml, a: str, b: str, indices: tuple[int, ...] = _P2P_INDEX) -> P2pStatus:
    """nvmlDeviceGetP2PStatus for each capability (nvidia-smi topo -p2p r/w/n/a/p).

    Each answer costs about 1.7 ms on driver 580, so the reverse direction asks only read
    and write (the two that can differ by direction); the rest is copied from a -> b.
    """
    got = {
        i: nvml.ask("nvmlDeviceGetP2PStatus", a, b, i, convert=lambda s: _P2P.get(int(s), f"status_{s}"))
        for i in indices
    }
    return P2pStatus(*(got.get(i, Unsupported("NOT_ASKED")) for i in _P2P_INDEX))


def _pair(nvml: Nvml, ga: Gpu, gb: Gpu) -> GpuPair:
    """nvmlDeviceGetTopologyCommonAncestor and P2P status both ways (nvidia-smi topo -m / -p2p)."""
    err = ga.lost if ga.lost is not None else gb.lost
    if err is not None:
        p2p = P2pStatus(err, err, err, err, err)
        return GpuPair(ga.index, gb.index, err, p2p, p2p)
    a, b = f"gpu:{ga.index}", f"gpu:{gb.index}"
    level = nvml.ask("nvmlDeviceGetTopologyCommonAncestor", a, b, convert=lambda v: _TOPOLOGY.get(int(v), f"level_{v}"))
    fwd = _p2p(nvml, a, b)
    back = _p2p(nvml, b, a, _BACK_INDEX)
    return GpuPair(ga.index, gb.index, level, fwd, replace(back, nvlink=fwd.nvlink, atomics=fwd.atomics, pci=fwd.pci))


# Asked again of each GPU named by a pair call that answered GPU_IS_LOST; any single-GPU call
# would do, this one is cheap and a recording already holds its normal answer.
LIVENESS_CALL = "nvmlDeviceGetPciInfo"

_INVISIBLE = ("ffff:ff:ff.0", "ffff:ff:ff.f", "0000:00:00.0")


def _nvswitches(gpus: list[Gpu]) -> tuple[NvSwitch, ...]:
    """Switches by the PCI id the links report; links to switches a VM cannot see (all-FF
    PCI ids) are gathered under one inferred fabric node, since their count is unknowable."""
    seen: dict[str, list[tuple[int, int]]] = {}
    hidden: list[tuple[int, int]] = []
    for g in gpus:
        for link in g.nvlinks:
            if link.remote_type != "switch" or link.is_up is not True:
                continue
            bus = link.remote_bus_id
            if isinstance(bus, str) and bus not in _INVISIBLE:
                seen.setdefault(bus, []).append((g.index, link.link))
            else:
                hidden.append((g.index, link.link))
    out = [NvSwitch(f"nvswitch:{bus}", bus, False, tuple(links)) for bus, links in sorted(seen.items())]
    if hidden:
        out.append(NvSwitch("nvswitch:fabric", Unsupported("NOT_VISIBLE"), True, tuple(hidden)))
    return tuple(out)


def _with_fitness(nvml: Nvml, fs: Sysfs, g: Gpu) -> Gpu:
    if g.lost is not None:
        return g
    got = replace(g, fitness=probe_fitness(nvml, fs, f"gpu:{g.index}"))
    gone = nvml.lost.get(f"gpu:{g.index}")
    return got if gone is None else replace(got, lost=gone)


NOT_ASKED = Unsupported("NOT_ASKED")


def _unread(g: Gpu) -> Gpu:
    """A GPU read for its topology alone: fitness and processes not asked."""
    if g.lost is not None:
        return g
    return replace(g, fitness=GpuFitness.failed(NOT_ASKED), compute_processes=NOT_ASKED)


def _with_end(nvml: Nvml, fs: Sysfs, g: Gpu) -> Gpu:
    if g.lost is not None:
        return g
    return replace(g, fitness=replace(g.fitness, end=counter_sample(nvml, fs, f"gpu:{g.index}")))


def collect(api: NvmlApi, fs: Sysfs, fitness: bool = True, commands: tuple[int, ...] = ()) -> HostSnapshot:
    """Probe the host. Raises ProbeUnavailable when NVML cannot start or sees no GPU.

    ``fitness=False`` reads the topology alone: each GPU's fitness, the processes on it and the
    kernel log's XID events are left unread (``Unsupported("NOT_ASKED")``), which halves the
    NVML calls of a picture that shows none of them (the text ``scan``). A process on a GPU is
    topodoctor's own also when it is one of ``commands`` or their child (probe/processes.py).

    What the host says of itself (/proc and /sys: CPUs, NICs, NUMA nodes) is read first: a live
    probe's NVML answers come from a server whose driver may still be starting (its first
    answers take tens of milliseconds), and these reads fill that wait."""
    facts = _host_facts(fs, fitness)
    nvml = Nvml(api)
    init = nvml.ask("nvmlInit")
    if isinstance(init, (ProbeError, Unsupported)):
        name = init.error if isinstance(init, ProbeError) else init.reason
        raise ProbeUnavailable(init_failure(name))
    try:
        snap = _collect(nvml, fs, fitness, facts, commands)
    except BaseException:
        nvml.ask("nvmlShutdown")
        raise
    down = nvml.ask("nvmlShutdown")
    if isinstance(down, ProbeError):
        snap = replace(snap, probe_errors=(*snap.probe_errors, down))
    return snap


@dataclass(frozen=True)
class _HostFacts:
    """What /proc and /sys say of the host, read before NVML; ``problems``: the reads that failed."""

    online: Probed[tuple[int, ...]]
    nics: tuple[Nic, ...]
    interfaces: tuple[NetInterface, ...]
    cpu_model: Probed[str]
    sockets: Probed[int]
    virtualization: Virtualization
    virtualization_detail: str
    hostname: Probed[str]
    container: bool
    numa_nodes: tuple[NumaNode, ...]
    iommu: Probed[str]
    pci_gpus: Probed[tuple[str, ...]]
    kernel_events: Probed[KernelEvents]
    problems: tuple[ProbeError, ...]


def _host_facts(fs: Sysfs, fitness: bool) -> _HostFacts:
    problems: list[ProbeError] = []
    online: Probed[tuple[int, ...]] = sys_read(fs, "/sys/devices/system/cpu/online", parse_cpulist)
    nics, interfaces = hostfacts.nics(fs, problems)
    model, sockets, cpu_socket, hypervisor = hostfacts.cpuinfo(fs)
    virt, virt_detail = hostfacts.virtualization(fs, hypervisor, problems)
    hostname = sys_read(fs, "/proc/sys/kernel/hostname", str)
    if isinstance(hostname, ProbeError):
        problems.append(hostname)
    container = hostfacts.in_container(fs, problems)
    return _HostFacts(
        online=online,
        nics=nics,
        interfaces=interfaces,
        cpu_model=model,
        sockets=sockets,
        virtualization=virt,
        virtualization_detail=virt_detail,
        hostname=hostname,
        container=container,
        numa_nodes=hostfacts.numa_nodes(fs, cpu_socket, problems),
        iommu=hostfacts.iommu_state(fs),
        pci_gpus=hostfacts.pci_gpus(fs),
        kernel_events=read_kernel_events(fs) if fitness else NOT_ASKED,
        problems=tuple(problems),
    )


def _collect(nvml: Nvml, fs: Sysfs, fitness: bool, facts: _HostFacts, commands: tuple[int, ...]) -> HostSnapshot:
    count = nvml.ask("nvmlDeviceGetCount", convert=int)
    if isinstance(count, (ProbeError, Unsupported)):
        raise ProbeUnavailable(f"NVML could not count the GPUs (nvmlDeviceGetCount: {count})")
    if count == 0:
        raise ProbeUnavailable("NVML found no NVIDIA GPU on this host")
    online = facts.online
    ncpus = max(online) + 1 if isinstance(online, tuple) and online else 1
    cpu_words = (ncpus + 63) // 64
    # Sequential on purpose: NVML serialises calls behind one lock, and on the 4-GPU H200
    # host a thread per GPU made each call 5-8x slower and the whole probe slower too.
    gpus = [probe_gpu(nvml, fs, i, cpu_words) for i in range(count)]
    gpus = [_with_fitness(nvml, fs, g) if fitness else _unread(g) for g in gpus]
    pairs = tuple(_pair(nvml, ga, gb) for i, ga in enumerate(gpus) for gb in gpus[i + 1 :])
    me: list[Me] = []
    if fitness:
        listed = {
            g.index: g.lost if g.lost is not None else compute_processes(nvml, fs, g.index, me, commands) for g in gpus
        }
        gpus = [replace(g, compute_processes=listed[g.index]) for g in gpus]
    # A pair call that answered GPU_IS_LOST does not say which GPU went: ask each one alone.
    nvml.settle(LIVENESS_CALL)
    # A GPU can fall off the bus while its pairs are probed: mark it lost after all.
    gpus = [
        replace(g, lost=nvml.lost[f"gpu:{g.index}"]) if g.lost is None and f"gpu:{g.index}" in nvml.lost else g
        for g in gpus
    ]
    nics = facts.nics
    # The second counter reading, as late as the probe allows: the window a rule judges.
    if fitness:
        gpus = [_with_end(nvml, fs, g) for g in gpus]
        nics = tuple(nic_ports.with_end(fs, n) for n in nics)
    paths = [g.pcie_path for g in gpus if isinstance(g.pcie_path, tuple)]
    paths += [n.pcie_path for n in nics if isinstance(n.pcie_path, tuple)]
    host = HostInfo(
        hostname=facts.hostname if isinstance(facts.hostname, str) else "unknown",
        kernel=sys_read(fs, "/proc/sys/kernel/osrelease", str),
        virtualization=facts.virtualization,
        virtualization_detail=facts.virtualization_detail,
        container=facts.container,
        driver_version=nvml.ask("nvmlSystemGetDriverVersion", convert=str),
        cuda_driver_version=nvml.ask("nvmlSystemGetCudaDriverVersion_v2", convert=_cuda_version),
        nvml_version=nvml.ask("nvmlSystemGetNVMLVersion", convert=str),
        cpu_model=facts.cpu_model,
        sockets=facts.sockets,
        online_cpus=online,
        numa_nodes=facts.numa_nodes,
        iommu=facts.iommu,
    )
    errors = tuple(
        ProbeError(err.error, f"GPU{token[4:]}: {err.call}", err.code) for token, err in sorted(nvml.lost.items())
    )
    return HostSnapshot(
        kind="snapshot",
        schema_version=SNAPSHOT_SCHEMA_VERSION,
        host=host,
        gpu_count=count,
        gpus=tuple(gpus),
        pairs=pairs,
        nvswitches=_nvswitches(gpus),
        bridges=tuple(read_bridge(fs, bdf, depth) for bdf, depth in bridges_on(paths)),
        nics=nics,
        interfaces=facts.interfaces,
        probe_errors=errors + facts.problems,
        pci_gpus=facts.pci_gpus,
        kernel_events=facts.kernel_events,
    )
