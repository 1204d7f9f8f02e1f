"""Replaying a recording: a fake NVML and a fake sysfs that answer from the file.

They implement the same boundary as the live binding, so ``collect()`` runs unchanged.

A call the recording never made at all (a function, a field of a field-value batch, a
sysfs path that an older topodoctor did not ask) answers "not recorded": a probe failure
(NVML code NOT_RECORDED, errno name NOT_RECORDED), so whatever needs it reports that it
could not check, and recordings stay usable for years. A call the recording did make, but
never with these arguments (another GPU, link or index), contradicts it and raises
ReplayMismatch at once: the recording is of another host or it is broken.
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topodoctor.core import codec
from topodoctor.core.errors import InputError, ReplayMismatch
from topodoctor.core.fileio import shown
from topodoctor.probe.api import NOT_RECORDED, NvmlCallError
from topodoctor.probe.record import RECORDING_SCHEMA_VERSION
from topodoctor.probe.sysfs import NotRecorded

FIELD_VALUES = "nvmlDeviceGetFieldValues"
# Calls every topodoctor has made: a recording without them is damaged, not old.
_ALWAYS_RECORDED = frozenset({"nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex"})

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
    """The NVML boundary answered from a recording: each call takes the next recorded answer for its
    arguments, errors and hangs included."""

    def __init__(self, calls: list[dict[str, Any]], name: str) -> None:
        self.name = name
        self._answers = _Answers()
        self._functions: set[str] = set()
        # (device, field, scope) -> recorded answers of that one field, from every batch
        self._fields = _Answers()
        for c in calls:
            self._answers.add(_key(c["fn"], c["args"]), c)
            self._functions.add(c["fn"])
            if c["fn"] == FIELD_VALUES and isinstance(c.get("result"), list) and len(c["args"]) == 2:
                for v in c["result"]:
                    self._fields.add(_key(c["args"][0], v["field"], v["scope"]), {"result": v})

    def _field_by_field(self, args: list[Any]) -> list[dict[str, Any]]:
        """A batch the recording does not hold as asked: each field from any batch that
        asked it of this GPU, and "not recorded" for a field no batch asked."""
        out = []
        for fid, scope in args[1]:
            entry = self._fields.take(_key(args[0], fid, scope))
            missing = {"field": fid, "scope": scope, "ret": NOT_RECORDED, "value": None}
            out.append(entry["result"] if entry is not None else missing)
        return out

    def call(self, fn: str, *args: Any) -> Any:
        """The recorded answer to ``fn(*args)``: its result, or its error raised again."""
        plain = json.loads(json.dumps(list(args)))
        entry = self._answers.take(_key(fn, plain))
        if entry is None and fn == FIELD_VALUES and len(plain) == 2 and isinstance(plain[1], list):
            return self._field_by_field(plain)
        if entry is None and fn not in self._functions and fn not in _ALWAYS_RECORDED:
            raise NvmlCallError(NOT_RECORDED, f"recording {self.name} was made before {fn} was asked")
        if entry is None:
            raise ReplayMismatch(
                f"recording {self.name} holds no answer for NVML {_short(fn, args)} although it holds {fn} "
                "with other arguments: it is of another host or damaged; record the host again"
            )
        if "hang_s" in entry:
            # A call that never came back on the recorded host (a wedged driver): wait as it did.
            time.sleep(float(entry["hang_s"]))
            raise NvmlCallError(10, "the recorded call hung")  # NVML_ERROR_TIMEOUT
        if "error" in entry:
            raise NvmlCallError(int(entry["error"]))
        return entry["result"]


class ReplaySysfs:
    """The sysfs boundary answered from a recording; a path it never read is not recorded, never absent."""

    def __init__(self, reads: list[dict[str, Any]], name: str) -> None:
        self.name = name
        self._answers = _Answers()
        for r in reads:
            self._answers.add(_key(r["op"], r["path"]), r)

    def _get(self, op: str, path: str) -> Any:
        entry = self._answers.take(_key(op, path))
        if entry is None:
            # Paths are what the probe asks; one it never asked is a read an older probe did
            # not make, which is "not recorded", never "absent".
            raise NotRecorded(f"recording {self.name} holds no sysfs {op} of {path}")
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
        """The recorded contents of a sysfs file."""
        return str(self._get("read", path))

    def read_hex(self, path: str, limit: int) -> str:
        """The recorded first ``limit`` bytes of a binary file, as hex."""
        return str(self._get("read_hex", path))[: 2 * limit]

    def listdir(self, path: str) -> list[str]:
        """The recorded entries of a sysfs directory."""
        return list(self._get("listdir", path))

    def realpath(self, path: str) -> str:
        """The recorded target of a sysfs path."""
        return str(self._get("realpath", path))

    def read_records(self, path: str, keep: str) -> list[str]:
        """The recorded lines of a record file that contain ``keep``."""
        return [str(line) for line in self._get("read_records", path) if keep in str(line)]


@dataclass(frozen=True)
class Recording:
    """A recording as read from its file: the NVML calls, sysfs reads and the snapshot the live probe
    built from them."""

    name: str
    meta: dict[str, Any]
    nvml: list[dict[str, Any]]
    sysfs: list[dict[str, Any]]
    snapshot: dict[str, Any] | None

    def fakes(self) -> tuple[FakeNvml, ReplaySysfs]:
        """A fresh fake NVML and sysfs that replay this recording from its start."""
        return FakeNvml(self.nvml, self.name), ReplaySysfs(self.sysfs, self.name)


def _check_entries(entries: Any, required: tuple[str, ...], answer: tuple[str, ...], what: str) -> None:
    if not isinstance(entries, list):
        raise InputError(f"{what} is not a list")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or any(k not in e for k in required) or not any(k in e for k in answer):
            raise InputError(f"{what}[{i}] is malformed: needs {', '.join(required)} and one of {', '.join(answer)}")


def recording_from_data(data: Any, name: str) -> Recording:
    """A recording from decoded JSON, its header and entries checked; ``name`` names it in errors."""
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
        from importlib import resources  # costly to load: only where a bundled recording is named

        files = resources.files(BUNDLED_PACKAGE).iterdir()
    except (ModuleNotFoundError, FileNotFoundError):
        return []
    return sorted(f.name[: -len(".json")] for f in files if f.name.endswith(".json"))


def resolve(source: str) -> tuple[str, Any]:
    """A path, or the name of a bundled recording; returns (display name, parsed JSON)."""
    path = Path(source)
    # os.path.exists, not Path.exists: a name too long for the file system is no file, not a crash.
    if os.path.exists(source) or "/" in source or source.endswith(".json"):
        return path.name, codec.read_json(path, "recording")
    if source in bundled_names():
        from importlib import resources  # costly to load: only where a bundled recording is named

        text = resources.files(BUNDLED_PACKAGE).joinpath(f"{source}.json").read_text(encoding="utf-8")
        return source, json.loads(text)
    known = ", ".join(bundled_names()) or "none"
    raise InputError(f"no such file or bundled recording: {shown(repr(source))} (bundled: {known})")
