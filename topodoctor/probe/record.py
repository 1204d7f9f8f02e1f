"""Recording a live probe: every NVML call and sysfs read, with its answer or its error.

A recording is one JSON document:
  kind/schema_version   "recording", RECORDING_SCHEMA_VERSION
  meta                  when, which topodoctor, whether identifiers were scrubbed
  nvml                  [{fn, args, result} | {fn, args, error}]   (error = NVML return code)
  sysfs                 [{op, path, result} | {op, path, error}]   (error = errno name)
  snapshot              what the live probe built from exactly these answers
  process               the probing process: NCCL / CUDA variables, config files, CPU affinity

Scrubbing replaces GPU UUIDs, serial numbers and the host name consistently across the
whole document (every GPU-... UUID maps to the same stand-in wherever it appears), so pairs,
links and the embedded snapshot still agree after scrubbing.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from topodoctor.core.codec import to_jsonable
from topodoctor.core.version import __version__
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.api import NvmlApi, NvmlCallError
from topodoctor.probe.sysfs import Sysfs, os_error_name

RECORDING_SCHEMA_VERSION = 1

_UUID = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


def _reduce_cpuinfo(text: str) -> str:
    """Keep only what the probe parses from /proc/cpuinfo (a 128-CPU host writes ~300 kB).

    The probe's answers from the reduced text are the same as from the full text, which the
    replay-equals-live test checks on every recording.
    """
    keep = []
    for line in text.splitlines():
        key = line.split(":", 1)[0].strip()
        if key in ("processor", "model name", "physical id"):
            keep.append(line)
        elif key == "flags" and "hypervisor" in line.split():
            keep.append("flags\t\t: hypervisor")
    return "\n".join(keep)


_REDUCE = {"/proc/cpuinfo": _reduce_cpuinfo}


def _plain_args(args: tuple[Any, ...]) -> list[Any]:
    plain: list[Any] = json.loads(json.dumps(list(args)))
    return plain


class RecordingNvml:
    """The NVML boundary with every call, its answer or error and its time written down."""

    def __init__(self, inner: NvmlApi) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []

    def call(self, fn: str, *args: Any) -> Any:
        """Make the call on the live binding and record it."""
        entry: dict[str, Any] = {"fn": fn, "args": _plain_args(args)}
        self.calls.append(entry)
        start = time.perf_counter()
        try:
            result = self.inner.call(fn, *args)
        except NvmlCallError as exc:
            entry["error"] = exc.code
            raise
        finally:
            # How long the driver took: kept for finding slow calls, never used by replay.
            entry["ms"] = round((time.perf_counter() - start) * 1000, 3)
        entry["result"] = result
        return result


class RecordingSysfs:
    """The sysfs boundary with every read and its answer or errno written down."""

    def __init__(self, inner: Sysfs) -> None:
        self.inner = inner
        self.reads: list[dict[str, Any]] = []

    def _do(self, op: str, path: str, fn: Any, *extra: Any) -> Any:
        entry: dict[str, Any] = {"op": op, "path": path}
        self.reads.append(entry)
        try:
            result = fn(path, *extra)
        except OSError as exc:
            entry["error"] = os_error_name(exc)
            raise
        entry["result"] = _REDUCE[path](result) if path in _REDUCE else result
        return result

    def read(self, path: str) -> str:
        """Read a sysfs file and record it."""
        return self._do("read", path, self.inner.read)  # type: ignore[no-any-return]

    def read_hex(self, path: str, limit: int) -> str:
        """Read the first ``limit`` bytes of a binary file as hex and record it."""
        return self._do("read_hex", path, self.inner.read_hex, limit)  # type: ignore[no-any-return]

    def listdir(self, path: str) -> list[str]:
        """List a sysfs directory and record it."""
        return self._do("listdir", path, self.inner.listdir)  # type: ignore[no-any-return]

    def realpath(self, path: str) -> str:
        """Resolve a sysfs path and record it."""
        return self._do("realpath", path, self.inner.realpath)  # type: ignore[no-any-return]

    def read_records(self, path: str, keep: str) -> list[str]:
        """Read the lines of a record file that contain ``keep`` and record them."""
        return self._do("read_records", path, self.inner.read_records, keep)  # type: ignore[no-any-return]


def build_recording(nvml: RecordingNvml, fs: RecordingSysfs, snapshot: HostSnapshot, label: str) -> dict[str, Any]:
    """The recording document: metadata, every call and read, and the snapshot the probe built from them."""
    return {
        "kind": "recording",
        "schema_version": RECORDING_SCHEMA_VERSION,
        "meta": {
            "label": label,
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "topodoctor_version": __version__,
            "scrubbed": False,
        },
        "nvml": nvml.calls,
        "sysfs": fs.reads,
        "snapshot": to_jsonable(snapshot),
    }


_CMDLINE = re.compile(r"^/proc/\d+/cmdline$")


def scrub(recording: dict[str, Any]) -> dict[str, Any]:
    """Replace UUIDs, serials and the host name with stable stand-ins, everywhere at once, and
    the command lines of the GPUs' processes with "scrubbed"."""
    secrets: dict[str, str] = {}
    text = json.dumps(recording)
    for m in _UUID.finditer(text):
        uuid = m.group(0)
        if uuid not in secrets:
            n = sum(1 for s in secrets if s.startswith(m.group(1)))
            secrets[uuid] = f"{m.group(1)}-00000000-0000-4000-8000-{n:012x}"
    for secret, stand_in in secrets.items():
        text = text.replace(secret, stand_in)
    out: dict[str, Any] = json.loads(text)
    # Serials and the host name are replaced where they stand, not by text search: a host
    # called "gpu" must not rewrite every "gpu" in the file.
    serials: dict[str, str] = {}
    for call in out["nvml"]:
        if call["fn"] == "nvmlDeviceGetSerial" and isinstance(call.get("result"), str):
            call["result"] = serials.setdefault(call["result"], f"SERIAL{len(serials):06d}")
    for gpu in out["snapshot"]["gpus"]:
        if isinstance(gpu.get("serial"), str):
            gpu["serial"] = serials.setdefault(gpu["serial"], f"SERIAL{len(serials):06d}")
    for read in out["sysfs"]:
        if read["path"] == "/proc/sys/kernel/hostname" and "result" in read:
            read["result"] = "recorded-host"
        # Other users' command lines can carry paths, tokens and passwords: only the fact stays.
        if _CMDLINE.match(read["path"]) and "result" in read:
            read["result"] = b"scrubbed\x00".hex()
    for gpu in out["snapshot"]["gpus"]:
        for proc in gpu.get("compute_processes") if isinstance(gpu.get("compute_processes"), list) else ():
            if isinstance(proc.get("cmdline"), str):
                proc["cmdline"] = "scrubbed"
    out["snapshot"]["host"]["hostname"] = "recorded-host"
    out["meta"]["scrubbed"] = True
    return out
