"""Per-GPU NVML queries. Each function names its NVML call and the nvidia-smi equivalent."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from topodoctor.core.pci import short_bus_id
from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.model.fitness import GpuFitness
from topodoctor.model.snapshot import (
    FabricInfo,
    Gpu,
    NvLink,
    NvLinkErrors,
    NvLinkRemote,
    PcieLink,
    RemappedRows,
    RetiredPages,
)
from topodoctor.probe.api import SUCCESS, error_name
from topodoctor.probe.pcie import numa_of, pcie_path
from topodoctor.probe.query import Nvml, mask_words_to_ids, sys_read
from topodoctor.probe.sysfs import Sysfs

FI_NVLINK_LINK_COUNT = 91  # NVML_FI_DEV_NVLINK_LINK_COUNT
FI_NVLINK_GET_SPEED = 164  # NVML_FI_DEV_NVLINK_GET_SPEED, per link via scopeId, Mb/s
_LINK_SCAN_GUARD = 64  # only when NVML does not report a link count: stop probing here

_ARCH = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}
_VIRT = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}
_REMOTE: dict[int, NvLinkRemote] = {0: "gpu", 1: "ibmnpu", 2: "switch"}
# nvmlDeviceGetNvLinkCapability bits read per link. Only P2P support: each bit is one call per link
# and GPU (all six would cost a scan a noticeable share of its time) and no check uses the rest.
_CAPS = ("p2p",)
_FABRIC_STATE = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
MEMORY_ERROR_UNCORRECTED = 1
VOLATILE_ECC, AGGREGATE_ECC = 0, 1
AFFINITY_SCOPE_NODE = 0


def _first(pair: Any) -> bool:
    return bool(pair[0])


def _remote_bus(pci: Any) -> str:
    return short_bus_id(pci["busId"])


def _fabric(raw: Any) -> FabricInfo:
    uuid = bytes(int(b) for b in raw.get("clusterUuid", [])).hex()
    return FabricInfo(
        state=_FABRIC_STATE.get(int(raw["state"]), f"state_{raw['state']}"),
        status="SUCCESS" if int(raw["status"]) == SUCCESS else error_name(int(raw["status"])),
        clique_id=int(raw.get("cliqueId", 0)),
        cluster_uuid=uuid,
        health_mask=int(raw["healthMask"]) if "healthMask" in raw else None,
    )


def field_values(nvml: Nvml, h: str, ids: list[list[int]]) -> dict[tuple[int, int], Probed[int]]:
    """nvmlDeviceGetFieldValues in one batch; each field keeps its own return code, judged by
    the same policy as a whole call (a field answering GPU_IS_LOST loses the GPU)."""
    got = nvml.ask("nvmlDeviceGetFieldValues", h, ids)
    if not isinstance(got, list):
        return {(fid, scope): got for fid, scope in ids}
    out: dict[tuple[int, int], Probed[int]] = {}
    for v in got:
        ret = int(v["ret"])
        key = (int(v["field"]), int(v["scope"]))
        if ret == SUCCESS and v["value"] is not None:
            out[key] = int(v["value"])
        elif ret == SUCCESS:
            out[key] = ProbeError("NO_VALUE", f"nvmlDeviceGetFieldValues[{key[0]}]")
        else:
            out[key] = nvml.failed(ret, f"nvmlDeviceGetFieldValues[{key[0]}]", [h])
    for fid, scope in ids:
        out.setdefault((fid, scope), ProbeError("NOT_ANSWERED", f"nvmlDeviceGetFieldValues[{fid}]"))
    return out


def link_count(nvml: Nvml, h: str) -> Probed[int]:
    """NVML_FI_DEV_NVLINK_LINK_COUNT (nvidia-smi nvlink -s lists this many links)."""
    return field_values(nvml, h, [[FI_NVLINK_LINK_COUNT, 0]])[(FI_NVLINK_LINK_COUNT, 0)]


# Per-link fields read in one nvmlDeviceGetFieldValues batch (scopeId = link): one ioctl
# instead of six calls per link keeps a 8 x 18-link scan well under a second.
FI_NVLINK_ERROR_DL_REPLAY = 161
FI_NVLINK_ERROR_DL_RECOVERY = 162
FI_NVLINK_ERROR_DL_CRC = 163
FI_NVLINK_GET_STATE = 165
FI_NVLINK_GET_VERSION = 166
_LINK_FIELDS = (
    FI_NVLINK_GET_STATE,
    FI_NVLINK_GET_VERSION,
    FI_NVLINK_GET_SPEED,
    FI_NVLINK_ERROR_DL_REPLAY,
    FI_NVLINK_ERROR_DL_RECOVERY,
    FI_NVLINK_ERROR_DL_CRC,
)


def _bool(v: Probed[int]) -> Probed[bool]:
    return bool(v) if isinstance(v, int) else v


def nvlinks(nvml: Nvml, h: str, count: Probed[int]) -> tuple[NvLink, ...]:
    """Per link: state, version, speed and DL error counters from field values
    (NVML_FI_DEV_NVLINK_GET_STATE ...), then nvmlDeviceGetNvLinkRemoteDeviceType /
    RemotePciInfo / Capability (nvidia-smi nvlink -s, -R, -c, -e)."""
    if isinstance(count, int):
        indices = list(range(count))
    elif isinstance(count, ProbeError):
        return ()
    else:
        # No count from NVML: ask link by link until the driver says there is no such link.
        indices = []
        for link in range(_LINK_SCAN_GUARD):
            state = nvml.ask("nvmlDeviceGetNvLinkState", h, link)
            if isinstance(state, ProbeError):
                # A link NVML could not answer for may exist: it stays in the record, unread,
                # rather than ending the GPU's links as if there were no more.
                return (*nvlinks(nvml, h, len(indices)), _unread_link(link, state))
            if isinstance(state, Unsupported):
                break
            indices.append(link)
    if not indices:
        return ()
    fields = [[fid, link] for link in indices for fid in _LINK_FIELDS]
    f = field_values(nvml, h, fields)
    links = []
    for link in indices:
        cap_bits = [nvml.ask("nvmlDeviceGetNvLinkCapability", h, link, i, convert=int) for i in range(len(_CAPS))]
        bad = next((c for c in cap_bits if not isinstance(c, int)), None)
        caps: Probed[tuple[str, ...]] = bad if bad is not None else tuple(n for n, c in zip(_CAPS, cap_bits) if c)
        links.append(
            NvLink(
                link=link,
                active=_bool(f[(FI_NVLINK_GET_STATE, link)]),
                version=f[(FI_NVLINK_GET_VERSION, link)],
                remote_type=nvml.ask(
                    "nvmlDeviceGetNvLinkRemoteDeviceType", h, link, convert=lambda v: _REMOTE.get(int(v), "unknown")
                ),
                remote_bus_id=nvml.ask("nvmlDeviceGetNvLinkRemotePciInfo", h, link, convert=_remote_bus),
                capabilities=caps,
                speed_mbps=f[(FI_NVLINK_GET_SPEED, link)],
                errors=NvLinkErrors(
                    replay=f[(FI_NVLINK_ERROR_DL_REPLAY, link)],
                    recovery=f[(FI_NVLINK_ERROR_DL_RECOVERY, link)],
                    crc=f[(FI_NVLINK_ERROR_DL_CRC, link)],
                ),
            )
        )
    return tuple(links)


def _unread_link(link: int, err: ProbeError) -> NvLink:
    return NvLink(link, err, err, err, err, err, err, NvLinkErrors(err, err, err))


def probe_gpu(nvml: Nvml, fs: Sysfs, index: int, cpu_words: int) -> Gpu:
    """One GPU (nvidia-smi -q -i INDEX). A lost GPU still yields a record, marked lost."""
    h = nvml.ask("nvmlDeviceGetHandleByIndex", index)
    if not isinstance(h, str):
        err = h if isinstance(h, ProbeError) else ProbeError(h.reason, "nvmlDeviceGetHandleByIndex")
        return lost_gpu(index, err)
    bus = nvml.ask("nvmlDeviceGetPciInfo", h, convert=lambda p: short_bus_id(p["busId"]))
    count = link_count(nvml, h)
    gpu = Gpu(
        index=index,
        lost=None,
        bus_id=bus,
        name=nvml.ask("nvmlDeviceGetName", h, convert=str),
        uuid=nvml.ask("nvmlDeviceGetUUID", h, convert=str),
        serial=nvml.ask("nvmlDeviceGetSerial", h, convert=str),
        minor_number=nvml.ask("nvmlDeviceGetMinorNumber", h, convert=int),
        architecture=nvml.ask("nvmlDeviceGetArchitecture", h, convert=lambda a: _ARCH.get(int(a), f"arch_{a}")),
        compute_capability=nvml.ask("nvmlDeviceGetCudaComputeCapability", h, convert=lambda c: f"{c[0]}.{c[1]}"),
        memory_total_bytes=nvml.ask("nvmlDeviceGetMemoryInfo", h, convert=lambda m: int(m["total"])),
        persistence_mode=nvml.ask("nvmlDeviceGetPersistenceMode", h, convert=bool),
        mig_mode=nvml.ask("nvmlDeviceGetMigMode", h, convert=_first),
        ecc_mode=nvml.ask("nvmlDeviceGetEccMode", h, convert=_first),
        virtualization_mode=nvml.ask(
            "nvmlDeviceGetVirtualizationMode", h, convert=lambda v: _VIRT.get(int(v), f"mode_{v}")
        ),
        pcie=PcieLink(
            gen_current=nvml.ask("nvmlDeviceGetCurrPcieLinkGeneration", h, convert=int),
            gen_max=nvml.ask("nvmlDeviceGetMaxPcieLinkGeneration", h, convert=int),
            gpu_gen_max=nvml.ask("nvmlDeviceGetGpuMaxPcieLinkGeneration", h, convert=int),
            width_current=nvml.ask("nvmlDeviceGetCurrPcieLinkWidth", h, convert=int),
            width_max=nvml.ask("nvmlDeviceGetMaxPcieLinkWidth", h, convert=int),
            replay_counter=nvml.ask("nvmlDeviceGetPcieReplayCounter", h, convert=int),
        ),
        numa_node=nvml.ask("nvmlDeviceGetNumaNodeId", h, convert=int),
        sysfs_numa_node=numa_of(fs, bus) if isinstance(bus, str) else bus,
        cpu_affinity=_cpu_affinity(nvml, h, cpu_words),
        memory_affinity=nvml.ask(
            "nvmlDeviceGetMemoryAffinity", h, max(1, cpu_words), AFFINITY_SCOPE_NODE, convert=mask_words_to_ids
        ),
        nvlink_count=count,
        nvlinks=nvlinks(nvml, h, count),
        remapped_rows=nvml.ask(
            "nvmlDeviceGetRemappedRows", h, convert=lambda r: RemappedRows(int(r[0]), int(r[1]), bool(r[2]), bool(r[3]))
        ),
        ecc_uncorrected_volatile=nvml.ask(
            "nvmlDeviceGetTotalEccErrors", h, MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC, convert=int
        ),
        ecc_uncorrected_aggregate=nvml.ask(
            "nvmlDeviceGetTotalEccErrors", h, MEMORY_ERROR_UNCORRECTED, AGGREGATE_ECC, convert=int
        ),
        fabric=nvml.ask("nvmlDeviceGetGpuFabricInfoV", h, convert=_fabric),
        pcie_path=pcie_path(fs, bus) if isinstance(bus, str) else bus,
        iommu_group_type=sys_read(fs, f"/sys/bus/pci/devices/{bus}/iommu_group/type", str)
        if isinstance(bus, str)
        else bus,
        retired_pages=retired_pages(nvml, h),
    )
    gone = nvml.lost.get(h)
    return gpu if gone is None else _mark_lost(gpu, gone)


def _cpu_affinity(nvml: Nvml, h: str, words: int) -> Probed[tuple[int, ...]]:
    """CPUs near the GPU (nvidia-smi topo -m "CPU Affinity"): scoped to the NUMA node where
    the driver knows the scope call, the older unscoped call otherwise."""
    got: Probed[tuple[int, ...]] = nvml.ask(
        "nvmlDeviceGetCpuAffinityWithinScope", h, words, AFFINITY_SCOPE_NODE, convert=mask_words_to_ids
    )
    if isinstance(got, Unsupported):
        got = nvml.ask("nvmlDeviceGetCpuAffinity", h, words, convert=mask_words_to_ids)
    return got


PAGE_CAUSE_SINGLE_BIT, PAGE_CAUSE_DOUBLE_BIT = 0, 1  # nvmlPageRetirementCause_t


def retired_pages(nvml: Nvml, h: str) -> Probed[RetiredPages]:
    """nvmlDeviceGetRetiredPagesPendingStatus, then the retired page lists by cause
    (nvidia-smi -q -d PAGE_RETIREMENT). GPUs that remap rows instead answer NOT_SUPPORTED to
    the first call, and are asked nothing more."""
    pending = nvml.ask("nvmlDeviceGetRetiredPagesPendingStatus", h, convert=lambda v: int(v) == 1)
    if not isinstance(pending, bool):
        return pending
    counts = [nvml.ask("nvmlDeviceGetRetiredPages", h, cause, convert=len) for cause in (0, 1)]
    for c in counts:
        if not isinstance(c, int):
            return c
    single, double = counts
    assert isinstance(single, int) and isinstance(double, int)
    return RetiredPages(single, double, pending)


def _mark_lost(gpu: Gpu, err: ProbeError) -> Gpu:
    return replace(gpu, lost=err)


def lost_gpu(index: int, err: ProbeError) -> Gpu:
    """A GPU that gave no handle: every field carries the error."""
    return Gpu(
        index=index,
        lost=err,
        bus_id=err,
        name=err,
        uuid=err,
        serial=err,
        minor_number=err,
        architecture=err,
        compute_capability=err,
        memory_total_bytes=err,
        persistence_mode=err,
        mig_mode=err,
        ecc_mode=err,
        virtualization_mode=err,
        pcie=PcieLink(err, err, err, err, err, err),
        numa_node=err,
        sysfs_numa_node=err,
        cpu_affinity=err,
        memory_affinity=err,
        nvlink_count=err,
        nvlinks=(),
        remapped_rows=err,
        ecc_uncorrected_volatile=err,
        ecc_uncorrected_aggregate=err,
        fabric=err,
        pcie_path=err,
        iommu_group_type=err,
        retired_pages=err,
        compute_processes=err,
        fitness=GpuFitness.failed(err),
    )
