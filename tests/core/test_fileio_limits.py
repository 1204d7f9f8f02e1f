"""The bounds of core/fileio.py at their edges and its failure paths staged: a file of exactly the
size limit and one byte more, a file whose size the kernel does not tell (procfs), JSON exactly as
deep and as long as allowed and one more, a read that hangs, a write that fails after its temporary
file exists, and a path one character short of and past the shortening limit."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import Any

import pytest

from topodoctor.core import fileio
from topodoctor.core.errors import InputError, WriteError

MiB = 1 << 20


@pytest.fixture(autouse=True)
def _in_own_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Relative names land in the test's own directory: under a mutation pass ``-`` may be taken
    for a file name, and must not be written into the checkout."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("limit", [1024, MiB])
def test_a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path, limit: int) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * limit)
    assert fileio.read_bytes(p, "doc", max_bytes=limit) == b"x" * limit
    p.write_bytes(b"x" * (limit + 1))
    shown = "1 MiB" if limit == MiB else "1024 B"
    with pytest.raises(InputError, match=f"^doc is larger than {shown}: "):
        fileio.read_bytes(p, "doc", max_bytes=limit)


def test_a_file_larger_than_one_chunk_is_read_whole(tmp_path: Path) -> None:
    data = os.urandom(3 * MiB + 5)
    (tmp_path / "f").write_bytes(data)
    assert fileio.read_bytes(tmp_path / "f", "doc", max_bytes=4 * MiB) == data


def test_a_file_whose_size_the_kernel_does_not_tell_is_bounded_as_it_is_read() -> None:
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0  # procfs: the size is only known by reading
    assert fileio.read_text(status, "status").startswith("Name:")
    with pytest.raises(InputError, match=r"^status is larger than 16 B"):
        fileio.read_bytes(status, "status", max_bytes=16)


def _read_in_pages(monkeypatch: pytest.MonkeyPatch, path: Path, sized: bool) -> list[int]:
    """Reads of ``path`` as procfs gives them (a page at a most per call; unsized unless ``sized``):
    the bytes each read returned."""
    ours: set[int] = set()
    got: list[int] = []
    real_open, real_fstat, real_read = os.open, os.fstat, os.read

    def opened(name: Any, *args: Any, **kwargs: Any) -> int:
        fd = real_open(name, *args, **kwargs)
        if str(name) == str(path):
            ours.add(fd)
        return fd

    def fstat(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return st if fd not in ours or sized else os.stat_result((*st[:6], 0, *st[7:10]))

    def read(fd: int, n: int) -> bytes:
        if fd not in ours:
            return real_read(fd, n)
        chunk = real_read(fd, min(n, 4096))
        got.append(len(chunk))
        return chunk

    for name, fn in (("open", opened), ("fstat", fstat), ("read", read)):
        monkeypatch.setattr(fileio.os, name, fn)
    return got


@pytest.mark.parametrize(("size", "read"), [(8192, 8192), (3 * 4096, 8193)])
def test_a_file_the_kernel_does_not_size_is_read_one_byte_past_the_limit_at_most(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, size: int, read: int
) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * size)
    got = _read_in_pages(monkeypatch, p, sized=False)
    if size <= 8192:
        assert fileio.read_bytes(p, "doc", max_bytes=8192) == b"x" * size
    else:
        with pytest.raises(InputError, match=r"^doc is larger than 8192 B: "):
            fileio.read_bytes(p, "doc", max_bytes=8192)
    assert sum(got) == read  # the limit's pages, then one byte to tell a longer file


def test_a_file_the_kernel_says_is_too_large_is_refused_unread(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * (3 * 4096))
    got = _read_in_pages(monkeypatch, p, sized=True)
    with pytest.raises(InputError, match=r"^doc is larger than 8192 B: "):
        fileio.read_bytes(p, "doc", max_bytes=8192)
    assert got == []


def test_a_read_that_hangs_ends_at_its_timeout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(fileio, "_read", lambda path, limit: time.sleep(5))
    t0 = time.monotonic()
    with pytest.raises(InputError, match=r"doc .*: not readable within 0\.2 s \(a hung mount or device\?\)"):
        fileio.read_json(tmp_path / "x.json", "doc", timeout_s=0.2)
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (PermissionError(errno.EACCES, "Permission denied"), "cannot read doc {}: Permission denied$"),
        (OSError(errno.EIO, ""), "cannot read doc {}: OSError$"),
        (ValueError("odd"), "cannot read doc {}: ValueError$"),
    ],
    ids=["permission", "no-strerror", "not-os"],
)
def test_a_read_that_fails_is_one_line_naming_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error: BaseException, says: str
) -> None:
    def refuse(path: str, limit: int) -> bytes:
        raise error

    monkeypatch.setattr(fileio, "_read", refuse)
    with pytest.raises(InputError, match=r"^" + says.format(tmp_path / "f")):
        fileio.read_bytes(tmp_path / "f", "doc")


def test_text_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"ok\xff")
    with pytest.raises(InputError, match=r"is not UTF-8 text \(byte 2\)$"):
        fileio.read_text(tmp_path / "f", "doc")


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("9" * 30, True),
        ("-" + "9" * 30, True),
        ("9" * 31, False),
        ("-" + "9" * 31, False),
    ],
)
def test_integers_of_up_to_30_digits_and_their_sign(text: str, ok: bool) -> None:
    if ok:
        assert fileio.parse_json(text, "doc") == int(text)
    else:
        with pytest.raises(InputError, match="an integer of"):
            fileio.parse_json(text, "doc")


def test_an_infinite_float_is_named_by_its_first_20_characters() -> None:
    with pytest.raises(InputError, match=r": 1000000000000000000\.\.\. is not|: 10000000000000000000 is not a finite"):
        fileio.parse_json("1" + "0" * 400 + ".5", "doc")


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("[[1]]", True),
        ("[[[1]]]", False),
        ('{"a": {"b": 1}}', True),
        ('{"a": {"b": {"c": 1}}}', False),
        ("[[], [[]]]", True),
        ("[[], [[[]]]]", False),
    ],
)
def test_nesting_of_exactly_the_limit_passes_and_one_more_does_not(text: str, ok: bool) -> None:
    if ok:
        assert fileio.parse_json(text, "doc", max_depth=3) is not None
    else:
        with pytest.raises(InputError, match=r"^doc is nested more than 3 deep$"):
            fileio.parse_json(text, "doc", max_depth=3)


def test_nesting_past_the_parser_s_own_recursion_is_refused_too() -> None:
    with pytest.raises(InputError, match="nested too deeply"):
        fileio.parse_json("[" * 200_000 + "]" * 200_000, "doc")


def test_nan_never_leaves_as_json() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        fileio.dumps_strict({"a": float("nan")})
    assert fileio.dumps_strict({"a": 1.5}, indent=None) == '{"a": 1.5}'


@pytest.mark.parametrize("fails", ["fsync", "replace", "chmod"])
def test_a_write_that_fails_after_its_temporary_exists_leaves_the_old_file_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fails: str
) -> None:
    target = tmp_path / "metrics.prom"
    target.write_text("old\n")
    real = getattr(os, fails)

    def full(*args: object, **kwargs: object) -> None:
        assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir()), "the temporary should exist by now"
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, fails, full)
    with pytest.raises(WriteError, match=f"^cannot write {target}: No space left on device$"):
        fileio.write_atomic(target, "new\n")
    monkeypatch.setattr(fileio.os, fails, real)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.prom"]  # the temporary removed


def test_an_interrupted_write_removes_its_temporary_and_is_not_a_write_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def stopped(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio.os, "fsync", stopped)
    with pytest.raises(KeyboardInterrupt):
        fileio.write_atomic(tmp_path / "new.json", "x")
    assert list(tmp_path.iterdir()) == []


def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "conf"
    target.write_text("old")
    target.chmod(0o600)
    fileio.write_atomic(target, "new")
    assert (target.read_text(), target.stat().st_mode & 0o777) == ("new", 0o600)


def test_a_file_we_may_not_write_stays_as_it_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "ro"
    target.write_text("old")
    monkeypatch.setattr(fileio.os, "access", lambda *a, **k: False)  # root may write anything: say it may not
    with pytest.raises(WriteError, match=r"Permission denied$"):
        fileio.write_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["ro"]


def test_a_file_in_place_of_the_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(WriteError, match=r"file/out.json: Not a directory$"):
        fileio.write_atomic(tmp_path / "file" / "out.json", "x")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(WriteError, match=r"dangling is not a directory$"):
        fileio.write_atomic(tmp_path / "dangling" / "out.json", "x")
    with pytest.raises(WriteError, match=r"no such directory$"):
        fileio.write_atomic(tmp_path / "none" / "out.json", "x")


@pytest.mark.parametrize(("length", "whole"), [(240, True), (241, False)])
def test_a_path_is_shortened_past_240_characters(length: int, whole: bool) -> None:
    path = "/" + "a" * (length - 2) + "z"
    got = fileio.shown(path)
    if whole:
        assert got == path
    else:
        assert (got[:120], got[120:123], got[123:], len(got)) == (path[:120], "...", path[-117:], 240)


def test_listing_finds_the_suffix_skips_temporaries_and_bounds_the_count(tmp_path: Path) -> None:
    for name in ("b.json", "a.json", ".a.json.1234.tmp", ".hidden.json", "c.txt", "sub/d.json"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("{}")
    assert [p.relative_to(tmp_path).as_posix() for p in fileio.list_files(tmp_path, "results", ".json")] == [
        "a.json",
        "b.json",
        "sub/d.json",
    ]
    assert len(fileio.list_files(tmp_path, "results", ".json", max_files=3)) == 3
    with pytest.raises(InputError, match=r"holds more than 2 \*\.json files"):
        fileio.list_files(tmp_path, "results", ".json", max_files=2)
    with pytest.raises(InputError, match=r"^cannot list results .*: No such file or directory$"):
        fileio.list_files(tmp_path / "none", "results", ".json")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_reads_and_stream_writes_leave_no_descriptor_open(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("{}")
    fifo = tmp_path / "fifo"  # a FIFO with a reader: written through, opened and closed (never a real device:
    os.mkfifo(fifo)  # a mutation run may turn the writer against what it writes)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        before = _open_fds()
        for _ in range(20):
            fileio.read_json(tmp_path / "f", "doc")
            fileio.write_atomic(fifo, "x")
            fileio.write_atomic(tmp_path / "out", "x")
        assert _open_fds() == before
        assert os.read(reader, 100) == b"x" * 20
    finally:
        os.close(reader)


def test_a_file_is_on_disk_before_it_replaces_the_old_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(f"fsync {os.fstat(fd).st_size} bytes")  # the data is in the file, not a buffer, by then
        real_fsync(fd)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    monkeypatch.setattr(fileio.os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    fileio.write_atomic(tmp_path / "out", "x" * 100)
    assert calls == ["fsync 100 bytes", "replace"]


def test_a_dash_is_standard_output(capsys: pytest.CaptureFixture[str]) -> None:
    fileio.write_atomic("-", "to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"


class _Refusing:
    def __init__(self, error: OSError) -> None:
        self.error = error

    def flush(self) -> None:
        pass

    def write(self, data: str) -> int:
        raise self.error


def test_standard_output_a_reader_left_is_silenced_and_one_that_fails_is_output_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from topodoctor.core.errors import OutputLost

    silenced: list[bool] = []
    monkeypatch.setattr(fileio, "silence_stdout", lambda: silenced.append(True))
    monkeypatch.setattr(fileio.sys, "stdout", _Refusing(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    fileio.write_atomic("-", "x")
    assert silenced == [True]
    monkeypatch.setattr(fileio.sys, "stdout", _Refusing(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(OutputLost, match=r"^cannot write to standard output: No space left on device$"):
        fileio.write_atomic("-", "x")


@pytest.mark.parametrize(("links", "ok"), [(39, True), (40, False)])
def test_a_chain_of_links_is_followed_as_far_as_the_kernel_would(tmp_path: Path, links: int, ok: bool) -> None:
    (tmp_path / "l0").symlink_to(tmp_path / "target")
    for i in range(1, links):
        (tmp_path / f"l{i}").symlink_to(tmp_path / f"l{i - 1}")
    head = tmp_path / f"l{links - 1}"
    if ok:
        fileio.write_atomic(head, "x")
        assert (tmp_path / "target").read_text() == "x"
    else:
        with pytest.raises(WriteError, match=r"symbolic link loop$"):
            fileio.write_atomic(head, "x")


@pytest.mark.parametrize(("depth", "ok"), [(63, True), (64, False)])
def test_json_nests_64_deep_by_default(depth: int, ok: bool) -> None:
    text = "[" * depth + "1" + "]" * depth  # the number sits one deeper than the innermost list
    if ok:
        assert fileio.parse_json(text, "doc") is not None
    else:
        with pytest.raises(InputError, match=r"nested more than 64 deep"):
            fileio.parse_json(text, "doc")
