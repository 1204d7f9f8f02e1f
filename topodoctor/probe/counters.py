"""Live readings the bandwidth tester needs around its copies: is a GPU busy, and how many
bytes did its NVLinks carry. Built on the same NVML boundary as the probe.

``WarmReadings`` makes the binding for them in a thread while the probe runs: in the probe's
child the binding's import, ``nvmlInit`` and each reading's first answer (the driver's slow one,
tens of milliseconds in all on the GPU hosts) otherwise come after the probe, before the copies;
the readings of the watch around the copies (probe/during.py) are asked once there too."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from topodoctor.probe.api import NvmlApi
from topodoctor.probe.during import RunWatch
from topodoctor.probe.gpu import field_values
from topodoctor.probe.query import Nvml

FI_NVLINK_THROUGHPUT_DATA_TX = 138  # KiB sent over one link (scopeId = link)
MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS: a warm-up asks every link a GPU may have (the probe knows how many)


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


class WarmReadings:
    """A live binding for the readings (``make``: probe/sources.py ``live_nvml``), made in a thread
    started now, each GPU's handle, every reading above and the watch's (its counters, limits and
    one sample) asked once there; the answers are not kept: the copies' own readings are taken when
    they are due. ``api`` waits for it."""

    def __init__(self, make: Callable[[], NvmlApi | None]) -> None:
        self._make = make
        self._api: NvmlApi | None = None
        self.ready_at = 0.0
        self._thread = threading.Thread(target=self._warm, name="nvml-readings", daemon=True)
        self._thread.start()

    def _warm(self) -> None:
        try:
            api = self._make()
            if api is not None:
                count = api.call("nvmlDeviceGetCount")
                indices = list(range(count if isinstance(count, int) else 0))
                for index in indices:
                    activity(api, index)
                    nvlink_tx_bytes(api, index, 1)
                watch = RunWatch(api, indices, dict.fromkeys(indices, MAX_LINKS)).start(thread=False)
                watch.sampler.tick()  # one of its samples: every reading and the process list
            self._api = api
        except Exception:  # a warm-up never fails the pass: the readings meet it again, and say so
            self._api = None
        self.ready_at = time.monotonic()

    def api(self) -> NvmlApi | None:
        """The binding once warm, or None where it could not be made (no driver, no binding)."""
        self._thread.join()
        return self._api
