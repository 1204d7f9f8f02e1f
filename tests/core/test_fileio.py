"""Bounded reads and atomic writes of user-named files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from topodoctor.core import fileio
from topodoctor.core.errors import InputError


def test_regular_file_reads(tmp_path: Path) -> None:
    p = tmp_path / "a.json"
    p.write_text('{"a": [1, 2.5, "x"]}')
    assert fileio.read_json(p, "doc") == {"a": [1, 2.5, "x"]}


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: d, "is a directory"),
        (lambda d: d / "missing", "not found"),
        (lambda d: Path("/dev/zero"), "not a regular file"),
    ],
)
def test_refused_kinds(tmp_path: Path, make: object, says: str) -> None:
    with pytest.raises(InputError, match=says):
        fileio.read_bytes(make(tmp_path), "doc")  # type: ignore[operator]


def test_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="not a regular file"):
        fileio.read_text(fifo, "conf", timeout_s=2)
    assert time.monotonic() - t0 < 1.0


def test_symlink_loop(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    with pytest.raises(InputError, match="symbolic link loop"):
        fileio.read_bytes(loop, "doc")


def test_size_bound(tmp_path: Path) -> None:
    p = tmp_path / "big"
    p.write_bytes(b"x" * 2048)
    with pytest.raises(InputError, match="larger than"):
        fileio.read_bytes(p, "doc", max_bytes=1024)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"a": NaN}', "NaN"),
        ('{"a": -Infinity}', "Infinity"),
        ('{"a": ' + "9" * 5000 + "}", "digits"),
        ("[" * 900 + "]" * 900, "nested"),
        ('{"a": ', "not valid JSON"),
    ],
)
def test_strict_json(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        fileio.parse_json(text, "doc")


def test_write_atomic_replaces_whole(tmp_path: Path) -> None:
    p = tmp_path / "out.json"
    p.write_text("old")
    fileio.write_atomic(p, "new\n")
    assert p.read_text() == "new\n"
    assert [x.name for x in tmp_path.iterdir()] == ["out.json"]


def test_write_atomic_failure_keeps_old(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot write"):
        fileio.write_atomic(tmp_path / "no-such-dir" / "x.json", "data")
    with pytest.raises(InputError, match="cannot write"):
        fileio.write_atomic(tmp_path, "data")


@pytest.mark.parametrize("text", ["1e400", "-1e999", '{"a": [1e309]}'])
def test_overflowing_floats_are_refused(text: str) -> None:
    with pytest.raises(InputError, match="not a finite number"):
        fileio.parse_json(text, "doc")
