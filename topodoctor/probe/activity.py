"""What a node's GPUs are doing right now, sampled for a few seconds through NVML: utilisation,
power and processes, per GPU. For a stalled job this shows the GPUs that spin in a collective
(a NCCL kernel polling: utilisation 100 %, power near idle) and the one that does not.

Built on the probe's NVML boundary, so a sampling is recorded like a probe (every call and its
answer) and replayed through the fake NVML anywhere: ``sample(RecordingNvml(LiveNvml()))``
then ``activity_recording(...)``; ``replay_activity(doc)`` answers the same calls in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from topodoctor.core.errors import InputError, ProbeUnavailable
from topodoctor.core.pci import short_bus_id as normalize_bus_id
from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.activity import ActivitySample, GpuActivity
from topodoctor.probe.api import NvmlApi
from topodoctor.probe.query import Nvml

ACTIVITY_SCHEMA_VERSION = 1


def _failed(value: Any) -> str:
    return str(value) if isinstance(value, (ProbeError, Unsupported)) else ""


def sample(
    api: NvmlApi, samples: int = 10, interval_s: float = 0.25, sleep: Callable[[float], None] = time.sleep
) -> ActivitySample:
    """Read every GPU ``samples`` times (``nvmlDeviceGetUtilizationRates``, ``nvmlDeviceGetPowerUsage``:
    nvidia-smi's GPU-Util and power draw), then its compute processes; a GPU that stops answering keeps
    what it had."""
    nvml = Nvml(api)
    init = nvml.ask("nvmlInit")
    if isinstance(init, ProbeError):
        raise ProbeUnavailable(f"NVML could not start (nvmlInit: {init})")
    count = nvml.ask("nvmlDeviceGetCount", convert=int)
    if not isinstance(count, int):
        raise ProbeUnavailable(f"NVML could not count the GPUs (nvmlDeviceGetCount: {count})")
    handles: dict[int, Any] = {i: nvml.ask("nvmlDeviceGetHandleByIndex", i) for i in range(count)}
    static: dict[int, tuple[str, str, float | None]] = {}
    for i, h in handles.items():
        if not isinstance(h, str):
            continue
        uuid = nvml.ask("nvmlDeviceGetUUID", h, convert=str)
        bus = nvml.ask("nvmlDeviceGetPciInfo", h, convert=lambda p: normalize_bus_id(p["busId"]))
        limit = nvml.ask("nvmlDeviceGetEnforcedPowerLimit", h, convert=lambda mw: int(mw) / 1000.0)
        static[i] = (
            uuid if isinstance(uuid, str) else "",
            bus if isinstance(bus, str) else "",
            limit if isinstance(limit, float) else None,
        )
    util: dict[int, list[int]] = {i: [] for i in handles}
    power: dict[int, list[float]] = {i: [] for i in handles}
    errors: dict[int, str] = {i: _failed(h) for i, h in handles.items()}
    for n in range(samples):
        if n:
            sleep(interval_s)
        for i, h in handles.items():
            if errors[i]:
                continue
            u = nvml.ask("nvmlDeviceGetUtilizationRates", h, convert=lambda r: int(r["gpu"]))
            p = nvml.ask("nvmlDeviceGetPowerUsage", h, convert=lambda mw: int(mw) / 1000.0)
            if isinstance(u, ProbeError):
                errors[i] = str(u)
                continue
            if isinstance(u, int):
                util[i].append(u)
            if isinstance(p, float):
                power[i].append(p)
    out = []
    for i, h in handles.items():
        procs: tuple[tuple[int, int], ...] = ()
        if not errors[i]:
            got = nvml.ask(
                "nvmlDeviceGetComputeRunningProcesses",
                h,
                convert=lambda ps: tuple((int(p["pid"]), int(p.get("usedGpuMemory") or 0)) for p in ps),
            )
            procs = got if isinstance(got, tuple) else ()
        gpu_uuid, bus_id, power_limit = static.get(i, ("", "", None))
        out.append(GpuActivity(i, gpu_uuid, bus_id, tuple(util[i]), tuple(power[i]), power_limit, procs, errors[i]))
    return ActivitySample("live", samples, interval_s, tuple(out))


def activity_recording(calls: list[dict[str, Any]], samples: int, interval_s: float, label: str) -> dict[str, Any]:
    """A sampling's NVML calls as a document ``replay_activity`` answers from."""
    return {
        "kind": "activity-recording",
        "schema_version": ACTIVITY_SCHEMA_VERSION,
        "label": label,
        "samples": samples,
        "interval_s": interval_s,
        "nvml": calls,
    }


def replay_activity(doc: Any, name: str) -> ActivitySample:
    """Sample again from a recording (no waiting between samples)."""
    from topodoctor.probe.replay import FakeNvml

    if not isinstance(doc, dict) or doc.get("kind") != "activity-recording" or not isinstance(doc.get("nvml"), list):
        raise InputError(f"{name} is not an activity recording (topodoctor job --live --record-live FILE)")
    samples, interval = doc.get("samples"), doc.get("interval_s")
    if not isinstance(samples, int) or not isinstance(interval, (int, float)) or samples < 1:
        raise InputError(f"{name}: samples and interval_s are missing or wrong")
    got = sample(FakeNvml(doc["nvml"], name), samples, float(interval), sleep=lambda s: None)
    return ActivitySample(f"replay {name}", got.samples, got.interval_s, got.gpus)


def live_sample(samples: int, interval_s: float, record: bool = False) -> tuple[ActivitySample, dict[str, Any] | None]:
    """Sample this node's GPUs; with ``record``, also the recording of every NVML call made."""
    from topodoctor.probe.nvml import LiveNvml
    from topodoctor.probe.record import RecordingNvml

    if not record:
        return sample(LiveNvml(), samples, interval_s), None
    recorder = RecordingNvml(LiveNvml())
    got = sample(recorder, samples, interval_s)
    return got, activity_recording(recorder.calls, samples, interval_s, "live")
