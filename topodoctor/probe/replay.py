"""Replaying a recording: a fake NVML and a fake sysfs that answer from the file.

They implement the same boundary as the live binding, so ``collect()`` runs unchanged. Any
call or read the recording does not hold raises ReplayMismatch at once: a probe change can
never pass on a stale recording by getting silent defaults.
"""

from __future__ import annotations

import errno
import json
import time
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from topodoctor.core import codec
from topodoctor.core.errors import InputError, ReplayMismatch
from topodoctor.model.snapshot import HostSnapshot, snapshot_from_data
from topodoctor.probe.api import NvmlCallError
from topodoctor.probe.record import RECORDING_SCHEMA_VERSION

_ERRNO = {name: code for code, name in errno.errorcode.items()}


def _key(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True)


class _Answers:
    """Recorded answers by call; a call asked again gets the next answer, then the last one."""

    def __init__(self) -> None:
        self._by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._next: dict[str, int] = defaultdict(int)

    def add(self, key: str, entry: dict[str, Any]) -> None:
        self._by_key[key].append(entry)

    def take(self, key: str) -> dict[str, Any] | None:
        answers = self._by_key.get(key)
        if not answers:
            return None
        i = min(self._next[key], len(answers) - 1)
        self._next[key] += 1
        return answers[i]


def _short(fn: str, args: tuple[Any, ...]) -> str:
    text = f"{fn}{tuple(args)}"
    return text if len(text) <= 120 else text[:117] + "..."


class FakeNvml:
    def __init__(self, calls: list[dict[str, Any]], name: str) -> None:
        self.name = name
        self._answers = _Answers()
        for c in calls:
            self._answers.add(_key(c["fn"], c["args"]), c)

    def call(self, fn: str, *args: Any) -> Any:
        entry = self._answers.take(_key(fn, json.loads(json.dumps(list(args)))))
        if entry is None:
            raise ReplayMismatch(
                f"recording {self.name} holds no answer for NVML {_short(fn, args)}: "
                "it was made by a different probe version; record the host again"
            )
        if "hang_s" in entry:
            # A call that never came back on the recorded host (a wedged driver): wait as it did.
            time.sleep(float(entry["hang_s"]))
            raise NvmlCallError(10, "the recorded call hung")  # NVML_ERROR_TIMEOUT
        if "error" in entry:
            raise NvmlCallError(int(entry["error"]))
        return entry["result"]


class ReplaySysfs:
    def __init__(self, reads: list[dict[str, Any]], name: str) -> None:
        self.name = name
        self._answers = _Answers()
        for r in reads:
            self._answers.add(_key(r["op"], r["path"]), r)

    def _get(self, op: str, path: str) -> Any:
        entry = self._answers.take(_key(op, path))
        if entry is None:
            raise ReplayMismatch(f"recording {self.name} holds no sysfs {op} of {path}: record the host again")
        if "error" in entry:
            name = str(entry["error"])
            code = _ERRNO.get(name, errno.EIO)
            if code == errno.ENOENT:
                raise FileNotFoundError(code, name, path)
            if code in (errno.EACCES, errno.EPERM):
                raise PermissionError(code, name, path)
            raise OSError(code, name, path)
        return entry["result"]

    def read(self, path: str) -> str:
        return str(self._get("read", path))

    def read_hex(self, path: str, limit: int) -> str:
        return str(self._get("read_hex", path))[: 2 * limit]

    def listdir(self, path: str) -> list[str]:
        return list(self._get("listdir", path))

    def realpath(self, path: str) -> str:
        return str(self._get("realpath", path))

    def read_records(self, path: str, keep: str) -> list[str]:
        return [str(line) for line in self._get("read_records", path) if keep in str(line)]


@dataclass(frozen=True)
class Recording:
    name: str
    meta: dict[str, Any]
    nvml: list[dict[str, Any]]
    sysfs: list[dict[str, Any]]
    snapshot: dict[str, Any] | None

    def fakes(self) -> tuple[FakeNvml, ReplaySysfs]:
        return FakeNvml(self.nvml, self.name), ReplaySysfs(self.sysfs, self.name)

    def recorded_snapshot(self) -> HostSnapshot | None:
        if self.snapshot is None:
            return None
        return snapshot_from_data(self.snapshot, f"snapshot inside recording {self.name}")


def _check_entries(entries: Any, required: tuple[str, ...], answer: tuple[str, ...], what: str) -> None:
    if not isinstance(entries, list):
        raise InputError(f"{what} is not a list")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or any(k not in e for k in required) or not any(k in e for k in answer):
            raise InputError(f"{what}[{i}] is malformed: needs {', '.join(required)} and one of {', '.join(answer)}")


def recording_from_data(data: Any, name: str) -> Recording:
    codec.check_header(data, "recording", RECORDING_SCHEMA_VERSION, f"recording {name}")
    _check_entries(data.get("nvml"), ("fn", "args"), ("result", "error", "hang_s"), f"recording {name}: nvml")
    _check_entries(data.get("sysfs"), ("op", "path"), ("result", "error"), f"recording {name}: sysfs")
    if not isinstance(data.get("meta", {}), dict):
        raise InputError(f"recording {name}: meta is not an object")
    meta = data.get("meta", {})
    snap = data.get("snapshot")
    return Recording(
        name,
        meta if isinstance(meta, dict) else {},
        data["nvml"],
        data["sysfs"],
        snap if isinstance(snap, dict) else None,
    )


BUNDLED_PACKAGE = "topodoctor.probe.recordings"


def bundled_names() -> list[str]:
    """Recordings shipped inside the package, usable as ``--replay NAME`` with no GPU."""
    try:
        files = resources.files(BUNDLED_PACKAGE).iterdir()
    except (ModuleNotFoundError, FileNotFoundError):
        return []
    return sorted(f.name[: -len(".json")] for f in files if f.name.endswith(".json"))


def resolve(source: str) -> tuple[str, Any]:
    """A path, or the name of a bundled recording; returns (display name, parsed JSON)."""
    path = Path(source)
    if path.exists() or "/" in source or source.endswith(".json"):
        return path.name, codec.read_json(path, "recording")
    if source in bundled_names():
        text = resources.files(BUNDLED_PACKAGE).joinpath(f"{source}.json").read_text(encoding="utf-8")
        return source, json.loads(text)
    known = ", ".join(bundled_names()) or "none"
    raise InputError(f"no such file or bundled recording: {source!r} (bundled: {known})")
