"""Hostile input files, made at test time (nothing large is committed).

Each entry is a file a user, a prolog script or a broken disk could hand to a command that
reads one: every command must answer each with one line and exit 2, within its budget.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import RECORDINGS

MiB = 1 << 20


def _write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    path.write_bytes(data)
    return path


def build(root: Path) -> dict[str, Path]:
    """name -> path of each hostile input, created under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    real = RECORDINGS[-1].read_text()
    files: dict[str, Path] = {
        "empty": _write(root / "empty.json", ""),
        "truncated": _write(root / "truncated.json", real[: len(real) // 3]),
        "wrong-kind": _write(root / "wrong-kind.json", '{"kind": "scan", "schema_version": 1}'),
        "not-an-object": _write(root / "list.json", "[1, 2, 3]"),
        "binary": _write(root / "binary.json", b"\x00\xff\xfe garbage \x89PNG"),
        "random-50MB": _write(root / "random.json", os.urandom(50 * MiB)),
        "nan": _write(root / "nan.json", '{"kind": "recording", "schema_version": 1, "x": NaN}'),
        "infinity": _write(root / "inf.json", '{"kind": "bandwidth", "schema_version": 1, "wall_s": 1e400}'),
        "huge-int": _write(root / "huge.json", '{"kind": "expectations", "schema_version": ' + "9" * 5000 + "}"),
        "deep": _write(root / "deep.json", "[" * 900 + "]" * 900),
        "deep-object": _write(root / "deep-object.json", '{"a": ' * 900 + "1" + "}" * 900),
        "markup": _write(root / "markup.json", json.dumps({"kind": "[/][bold]:ab:", "schema_version": 1})),
        "control": _write(root / "control.json", json.dumps({"kind": "\x1b[31mred\x1b]0;title\x07\r\n", "v": 1})),
        "lone-surrogate": _write(root / "surrogate.json", '{"kind": "\\udcff\\ud800"}'),
        "directory": root / "a-directory",
        "fifo": root / "fifo.json",
        "symlink-loop": root / "loop.json",
        "dev-zero": Path("/dev/zero"),
        "missing": root / "does-not-exist.json",
    }
    files["directory"].mkdir(exist_ok=True)
    if not files["fifo"].exists():
        os.mkfifo(files["fifo"])
    if not files["symlink-loop"].is_symlink():
        os.symlink(files["symlink-loop"].name, files["symlink-loop"])
    if os.geteuid() != 0:  # root reads anything: the case exists only for other users
        unreadable = _write(root / "unreadable.json", real)
        unreadable.chmod(0)
        files["unreadable"] = unreadable
    return files
