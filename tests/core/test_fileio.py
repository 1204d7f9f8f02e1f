"""Bounded reads and atomic writes of user-named files."""

from __future__ import annotations

import contextlib
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


@pytest.mark.slow
def test_slow_reader_is_waited_for_while_it_reads(tmp_path: Path) -> None:
    """The wait is for progress, not for the whole file: a reader slower than the timeout in
    total, but never stalled that long, gets everything."""
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    got: list[bytes] = []

    def slow() -> None:  # 64 reads of 64 KiB, at least 1.28 s in all, never more than a blink apart
        while sum(map(len, got)) < 4 << 20:
            time.sleep(0.02)
            with contextlib.suppress(BlockingIOError):
                got.append(os.read(fd, 1 << 16))

    t = threading.Thread(target=slow, daemon=True)
    t.start()
    t0 = time.monotonic()
    fileio.write_atomic(fifo, b"x" * (4 << 20), timeout_s=1.0)
    t.join(10)
    os.close(fd)
    assert time.monotonic() - t0 > 1.0 and b"".join(got) == b"x" * (4 << 20)


def test_the_budget_bounds_a_fifo_nobody_reads(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with fileio.write_deadline(t0 + 0.2), pytest.raises(InputError, match="no reader"):
        fileio.write_atomic(fifo, "x", timeout_s=30)
    assert time.monotonic() - t0 < 0.5


@pytest.mark.parametrize("alias", ["/dev/fd/{}", "/proc/self/fd/{}", "/proc/{pid}/fd/{}"])
def test_descriptor_paths_write_to_the_descriptor(alias: str) -> None:
    """/dev/fd/N stands for our descriptor N: written to, not resolved to a pipe's odd name."""
    r, w = os.pipe()
    try:
        fileio.write_atomic(alias.format(w, pid=os.getpid()), "through\n")
        assert os.read(r, 100) == b"through\n"
    finally:
        os.close(r)
        os.close(w)


def test_a_new_file_gets_0644_under_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        fileio.write_atomic(tmp_path / "new.prom", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "new.prom").stat().st_mode & 0o777 == 0o640


@pytest.mark.slow
def test_the_write_deadline_ends_with_its_block_whatever_happens(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with contextlib.suppress(ValueError), fileio.write_deadline(time.monotonic() - 1):
        raise ValueError("a writer's own error (a bad extension)")
    t0 = time.monotonic()
    with pytest.raises(InputError, match="no reader"):
        fileio.write_atomic(fifo, "x", timeout_s=0.3)
    assert time.monotonic() - t0 >= 0.25  # its own wait, not the spent deadline of the block before
