"""Live readings the bandwidth tester needs around its copies: is a GPU busy, and how many
bytes did its NVLinks carry. Built on the same NVML boundary as the probe."""

from __future__ import annotations

from topodoctor.probe.api import NvmlApi
from topodoctor.probe.gpu import field_values
from topodoctor.probe.query import Nvml

FI_NVLINK_THROUGHPUT_DATA_TX = 138  # KiB sent over one link (scopeId = link)


def activity(api: NvmlApi, index: int) -> tuple[int | None, int | None, int | None]:
    """(GPU utilisation %, compute processes, memory used bytes): nvidia-smi's Volatile GPU-Util,
    its process list and Memory-Usage (``nvmlDeviceGetUtilizationRates``,
    ``nvmlDeviceGetComputeRunningProcesses``, ``nvmlDeviceGetMemoryInfo``)."""
    nvml = Nvml(api)
    h = nvml.ask("nvmlDeviceGetHandleByIndex", index)
    if not isinstance(h, str):
        return None, None, None
    util = nvml.ask("nvmlDeviceGetUtilizationRates", h, convert=lambda u: int(u["gpu"]))
    procs = nvml.ask("nvmlDeviceGetComputeRunningProcesses", h, convert=len)
    mem = nvml.ask("nvmlDeviceGetMemoryInfo", h, convert=lambda m: int(m["used"]))
    return tuple(v if isinstance(v, int) else None for v in (util, procs, mem))  # type: ignore[return-value]


def nvlink_tx_bytes(api: NvmlApi, index: int, links: int) -> int | None:
    """Bytes sent over all of a GPU's NVLinks so far (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX)."""
    if links <= 0:
        return None
    nvml = Nvml(api)
    h = nvml.ask("nvmlDeviceGetHandleByIndex", index)
    if not isinstance(h, str):
        return None
    got = field_values(nvml, h, [[FI_NVLINK_THROUGHPUT_DATA_TX, link] for link in range(links)])
    kib = [v for v in got.values() if isinstance(v, int)]
    return sum(kib) * 1024 if len(kib) == len(got) else None
