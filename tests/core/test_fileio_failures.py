"""core/fileio.py's writes where the other side fails or stops: a read-only filesystem, a FIFO that
refuses to open for a reason of its own, a reader that stops taking data (by the stall timeout and
by the command's deadline), standard output whose reader left, a listing that fails in a way of its
own; and the temporary's name for a target whose own name is as long as a name may be."""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from topodoctor.core import fileio
from topodoctor.core.errors import InputError, WriteError


@pytest.fixture(autouse=True)
def _in_own_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Relative names land in the test's own directory: under a mutation pass ``-`` may be taken
    for a file name, and must not be written into the checkout."""
    monkeypatch.chdir(tmp_path)


def test_a_file_on_a_read_only_filesystem_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "out.prom"
    target.write_text("old")
    real = os.statvfs(tmp_path)
    ro = os.statvfs_result((*real[:8], real.f_flag | os.ST_RDONLY, real.f_namemax))
    monkeypatch.setattr(fileio.os, "access", lambda *a, **k: False)  # root may write anything: say it may not
    monkeypatch.setattr(fileio.os, "statvfs", lambda path: ro)
    with pytest.raises(WriteError, match=r"out\.prom: Read-only file system$"):
        fileio.write_atomic(target, "new")
    assert target.read_text() == "old"


def test_the_temporary_keeps_64_characters_of_a_long_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(os.path.basename(str(path)))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(fileio.os, "open", spy)
    name = "m" * 64 + "z" * 191  # 255 characters, NAME_MAX: the temporary's name must stay well under it
    fileio.write_atomic(tmp_path / name, "x")
    tmp = [n for n in opened if n.endswith(".tmp")]
    assert len(tmp) == 1 and re.fullmatch(r"\.m{64}\.[0-9a-f]{12}\.tmp", tmp[0]), tmp
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize(
    ("error", "says"), [(errno.EACCES, "Permission denied"), (errno.ENOENT, "No such file or directory")]
)
def test_a_fifo_that_refuses_to_open_for_another_reason_fails_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error: int, says: str
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_open = os.open

    def refused(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path) == str(fifo):
            raise OSError(error, os.strerror(error))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(fileio.os, "open", refused)
    t0 = time.monotonic()
    with pytest.raises(WriteError, match=f"fifo: {says}$"):
        fileio.write_atomic(fifo, "x", timeout_s=5)
    assert time.monotonic() - t0 < 1.0  # not the wait for a reader: the FIFO said why


@pytest.mark.parametrize("by", ["stall", "deadline"])
def test_a_reader_that_stops_taking_data_ends_the_write(by: str) -> None:
    r, w = os.pipe()  # a reader that never reads: the pipe fills at 64 KiB
    t0 = time.monotonic()
    try:
        with (
            fileio.write_deadline(t0 + 0.2 if by == "deadline" else None),
            pytest.raises(WriteError, match=r"the reader took no more data in time$"),
        ):
            fileio.write_atomic(f"/dev/fd/{w}", b"x" * (1 << 20), timeout_s=0.2 if by == "stall" else 30)
    finally:
        os.close(r)
        os.close(w)
    assert time.monotonic() - t0 < 1.0  # the sooner of the two: the stall timeout, or the command's deadline


def test_a_stalled_reader_is_waited_for_5_s_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[int] = []

    class Stalled:  # a reader that never takes data, answered at once instead of after the wait
        def register(self, fd: int, events: int) -> None:
            pass

        def poll(self, ms: int) -> list[Any]:
            waits.append(ms)
            return []

    monkeypatch.setattr(fileio.select, "poll", Stalled)
    r, w = os.pipe()
    try:
        for timeout_s in (None, 0.25):
            with pytest.raises(WriteError, match=r"the reader took no more data in time$"):
                fileio.write_atomic(f"/dev/fd/{w}", "x", timeout_s=timeout_s)
    finally:
        os.close(r)
        os.close(w)
    assert waits == [5000, 250]  # README: a reader that takes nothing costs at most 5 s


def test_standard_output_keeps_the_order_of_what_was_printed_before(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8")  # type: ignore[arg-type]
    monkeypatch.setattr(fileio.sys, "stdout", out)
    print("printed first", file=out)  # held in the text layer until flushed
    fileio.write_atomic("-", b"written second\n")
    assert raw.getvalue() == b"printed first\nwritten second\n"  # both out of every buffer, in order


def test_standard_output_whose_reader_left_is_pointed_at_null(monkeypatch: pytest.MonkeyPatch) -> None:
    r, w = os.pipe()
    os.close(r)  # the reader left (`| head -1`)
    out = open(w, "w", encoding="utf-8")  # noqa: SIM115 (closed below, after the descriptor is checked)
    monkeypatch.setattr(fileio.sys, "stdout", out)
    try:
        before = len(os.listdir("/proc/self/fd"))
        fileio.write_atomic("-", "x" * 100)  # no error: nothing more to say
        assert len(os.listdir("/proc/self/fd")) == before  # /dev/null's own descriptor closed once copied
        st, null = os.fstat(w), os.stat(os.devnull)
        assert stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev  # later writes go nowhere, quietly
        fileio.write_atomic("-", "more")
    finally:
        out.close()


def test_a_listing_that_hangs_ends_at_its_timeout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(fileio.os, "walk", lambda *a, **k: time.sleep(5) or iter(()))  # a wedged mount
    t0 = time.monotonic()
    with pytest.raises(InputError, match=r"^results .*: not listable within 0\.2 s \(a hung mount\?\)$"):
        fileio.list_files(tmp_path, "results", ".json", timeout_s=0.2)
    assert time.monotonic() - t0 < 1.0


def test_a_listing_that_fails_in_a_way_of_its_own_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def odd(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("not an OS error")

    monkeypatch.setattr(fileio.os, "walk", odd)
    with pytest.raises(InputError, match=r"^cannot list results .*: RuntimeError$"):
        fileio.list_files(tmp_path, "results", ".json")
