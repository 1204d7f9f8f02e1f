"""Where a HostSnapshot comes from: the live host, a replayed recording, or a saved snapshot.

pynvml is imported only when the live host is probed, so replays run with no driver; the
recording and replay machinery only when a recording is made or replayed, so a live probe's
child loads neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topodoctor.core.budget import command_pid
from topodoctor.core.codec import to_jsonable
from topodoctor.core.errors import InputError, TopodoctorError
from topodoctor.model.snapshot import HostSnapshot, snapshot_from_data
from topodoctor.probe.api import NvmlApi, NvmlCallError
from topodoctor.probe.collect import collect
from topodoctor.probe.environment import capture_process, replayed_process
from topodoctor.probe.nvml import LiveNvml, warmed
from topodoctor.probe.record import RecordingNvml, RecordingSysfs, build_recording, scrub
from topodoctor.probe.replay import recording_from_data, resolve
from topodoctor.probe.sysfs import LiveSysfs

if TYPE_CHECKING:
    from topodoctor.model.environment import ProcessEnvironment


@dataclass(frozen=True)
class Probed:
    """What a probe of the host gave: the snapshot, where it came from, and the process to judge."""

    snapshot: HostSnapshot
    origin: str  # "live", "replay NAME", "snapshot NAME"
    process: ProcessEnvironment | None = None  # the process judged: this one, or the recorded one


def probe_host(
    replay: str | None = None, sysfs_root: str = "/", topology_only: bool = False, nvml: NvmlApi | None = None
) -> Probed:
    """Probe the live host (NVML and sysfs), or replay a recording or a saved snapshot by name or
    path. ``topology_only`` reads the topology alone (``collect(fitness=False)``) and leaves the
    process unread (``process`` None): a picture of the topology judges neither. ``nvml`` is
    the live binding to ask (an ``NvmlServer``); None loads one here."""
    fitness = not topology_only
    if replay is None:
        if nvml is None:
            nvml = warmed()
        # the command this process probes for: its copy timer, forked beside this child, is ours
        snap = collect(nvml, LiveSysfs(sysfs_root), fitness, (command_pid(),))
        return Probed(snap, "live", None if topology_only else _process(None))

    name, data = resolve(replay)
    if isinstance(data, dict) and data.get("kind") == "snapshot":
        snap = snapshot_from_data(data, f"snapshot {name}")
        origin = f"snapshot {name}"
    else:
        rec = recording_from_data(data, name)
        nvml, fs = rec.fakes()
        try:
            snap = collect(nvml, fs, fitness)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
            raise InputError(f"recording {name} is corrupt: {type(exc).__name__}: {exc}") from None
        origin = f"replay {name}"
    return Probed(snap, origin, None if topology_only else _process(data, name))


def _process(recording: Any, name: str = "") -> ProcessEnvironment:
    """The process to judge: this one live (``recording`` None), else the recorded one. Loaded
    here: a topology-only probe (the text scan's child) reads no process and skips its modules."""
    return capture_process() if recording is None else replayed_process(recording.get("process"), name)


def live_nvml() -> Any:
    """An initialised live NVML binding for readings around measurements, or None."""
    try:
        api = LiveNvml()
        api.call("nvmlInit")
    except (NvmlCallError, TopodoctorError):
        return None
    return api


def record_host(label: str, do_scrub: bool = True, sysfs_root: str = "/") -> tuple[dict[str, Any], HostSnapshot]:
    """Probe the live host through recorders; return the recording document and the snapshot."""
    nvml = RecordingNvml(LiveNvml())
    fs = RecordingSysfs(LiveSysfs(sysfs_root))
    snap = collect(nvml, fs)
    doc = build_recording(nvml, fs, snap, label)
    doc["process"] = to_jsonable(_process(None))
    if do_scrub:
        doc = scrub(doc)
        snap = snapshot_from_data(doc["snapshot"], "scrubbed snapshot")
    return doc, snap
