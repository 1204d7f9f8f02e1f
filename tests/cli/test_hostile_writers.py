"""Every writer of every command against what a prolog may hand it as a path: a device, a FIFO
(read or not), a symbolic link, a directory, a missing directory, a read-only file, a name too
long. Each ends with its documented exit code and one line, and leaves the node, link or file
it was pointed at as it was (a regular file is replaced whole, keeping its mode).

A new writer must be added to WRITERS; test_every_writer_is_listed walks the commands' options
to hold that.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from topodoctor.cli.commands import app, main
from topodoctor.core import fileio
from topodoctor.service import recording

ROOTED = os.geteuid() == 0
NOBODY = 65534
BW = str(ROOT / "fixtures/bandwidth/h200-x4.quick.json")
COLL = str(ROOT / "fixtures/collectives/derived/x2-healthy.json")
FLEET = str(ROOT / "fixtures/fleet")


@dataclass(frozen=True)
class Writer:
    argv: Callable[[str], list[str]]
    suffix: str  # what the writer accepts (pictures by extension)
    verdict: bool  # the command prints a verdict beside the file, which a failed write must not lose


def _history() -> str:
    """A history database of its own for each run, in a directory anyone may write: the refused
    cases run with nobody's ids, and what they must meet is the refused output, not the store."""
    d = Path(tempfile.mkdtemp(prefix="topodoctor-history-"))
    os.chmod(d, 0o777)
    return str(d / "fleet.db")


WRITERS = {
    "scan --export-graph": Writer(lambda f: ["scan", "--replay", "h200-x4", "--export-graph", f], ".json", True),
    "scan --draw": Writer(lambda f: ["scan", "--replay", "h200-x4", "--draw", f], ".svg", True),
    "check --metrics": Writer(lambda f: ["check", "--replay", "h200-x4", "--metrics", f], ".prom", True),
    "record -o": Writer(lambda f: ["record", "-o", f, "--timeout", "0"], ".json", False),
    "expect -o": Writer(lambda f: ["expect", "--replay", "h200-x4", "-o", f], ".json", False),
    "bandwidth -o": Writer(lambda f: ["bandwidth", "--from", BW, "-o", f], ".json", True),
    "bandwidth --heatmap": Writer(lambda f: ["bandwidth", "--from", BW, "--heatmap", f], ".svg", True),
    "bandwidth --metrics": Writer(lambda f: ["bandwidth", "--from", BW, "--metrics", f], ".prom", True),
    "collectives -o": Writer(lambda f: ["collectives", "--from", COLL, "-o", f], ".json", True),
    "collectives --plot": Writer(lambda f: ["collectives", "--from", COLL, "--plot", f], ".svg", True),
    "collectives --metrics": Writer(lambda f: ["collectives", "--from", COLL, "--metrics", f], ".prom", True),
    "fleet -o": Writer(lambda f: ["fleet", FLEET, "-o", f], ".txt", True),
    "fleet --heat-strip": Writer(
        lambda f: ["fleet", FLEET, "--history", _history(), "--heat-strip", f, "--heat-figure", "oneway GPU0->GPU1"],
        ".svg",
        False,
    ),
    "nccl-topo -o": Writer(lambda f: ["nccl-topo", "--replay", "h200-x4", "-o", f], ".xml", False),
}
# The options that name a file we write, by command; a new one fails the walk below until listed.
WRITER_OPTIONS = {"--output", "--metrics", "--export-graph", "--draw", "--heatmap", "--plot", "--heat-strip"}
# Writers that write only beside a live GPU (job --live): through Outputs like every writer, and
# exercised on a GPU host (tests/gpu), not here.
LIVE_WRITER_OPTIONS = {"--record-live"}
# Path options that are read (bounded, see fileio.read_bytes), or a directory we create (--log-dir).
READ_OPTIONS = {"--expect", "--from", "--bandwidth", "--lint", "--log-dir", "--baseline", "results", "paths"}
READ_OPTIONS |= {"dumps", "--map", "--results", "--ras-file", "--replay-live"}
READ_OPTIONS |= {"--history"}  # a database: only a regular file is opened (tests/fleet/test_history.py)
READ_OPTIONS |= {"--config"}  # the settings file, read through core/fileio (tests/cli/test_config.py)


@pytest.fixture(autouse=True)
def _recorded_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """`record` probes the live host: here it records the bundled 4 x H200 recording instead."""
    doc = json.loads((ROOT / "topodoctor/probe/recordings/h200-x4.json").read_text())
    monkeypatch.setattr(recording, "record", lambda *a: (doc, 4))
    monkeypatch.setattr(fileio, "WRITE_TIMEOUT_S", 0.3)  # a FIFO nobody reads: a short wait, not 5 s


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    got = capsys.readouterr()
    return code, got.out, got.err


def error_lines(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith("topodoctor: error:")]


def mknod(path: Path, minor: int) -> Path:
    """A character device like /dev/null (minor 3) or /dev/full (minor 7), made in a test's own
    directory: a bug of ours replaces this node, never the machine's."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


def kind(path: Path) -> tuple[Any, ...]:
    """What a test must find unchanged: the type, mode, device and link target, or contents."""
    st = os.lstat(path)
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    body = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
    return stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_rdev, link, body


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob(".*.tmp")]


# ------------------------------------------------------------------ written through, never replaced
@pytest.mark.slow
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_regular_file_new_and_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str], writer: str) -> None:
    w = WRITERS[writer]
    new = tmp_path / f"new{w.suffix}"
    code, _, err = run(capsys, w.argv(str(new)))
    assert code == 0 and not error_lines(err), err
    assert stat.S_IMODE(new.stat().st_mode) == 0o644 & ~_umask() and new.stat().st_size > 0
    old = tmp_path / f"old{w.suffix}"
    old.write_text("previous")
    os.chmod(old, 0o640)  # a collector's group may read it; the rewrite must not take that away
    if ROOTED:
        os.chown(old, NOBODY, NOBODY)
    code, _, err = run(capsys, w.argv(str(old)))
    assert code == 0, err
    st = old.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640 and old.read_bytes() not in (b"", b"previous")
    assert not ROOTED or (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
    assert leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("via_link", [False, True])
def test_character_device(tmp_path: Path, capsys: pytest.CaptureFixture[str], writer: str, via_link: bool) -> None:
    if not ROOTED:
        pytest.skip("mknod needs root")
    w = WRITERS[writer]
    null, full = mknod(tmp_path / f"null{w.suffix}", 3), mknod(tmp_path / f"full{w.suffix}", 7)
    for node, code_wanted in ((null, 0), (full, 2)):
        target = node
        if via_link:
            target = tmp_path / f"link-{node.name}{w.suffix}"
            target.symlink_to(node)
        before = (kind(target), kind(node))
        code, _, err = run(capsys, w.argv(str(target)))
        assert code == code_wanted, err
        if code_wanted:
            assert error_lines(err) == [f"topodoctor: error: cannot write {target}: No space left on device"]
        assert (kind(target), kind(node)) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.is_symlink()) == [full.name, null.name]


@contextlib.contextmanager
def fifo_reader(path: Path) -> Iterator[list[bytes]]:
    """A reader on the FIFO for as long as the block runs; what it read, once the block ends."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # open first: the writer finds a reader at once
    got: list[bytes] = []
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk:
                got.append(chunk)
            else:
                time.sleep(0.005)

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    try:
        yield got
    finally:
        time.sleep(0.05)
        stop.set()
        t.join(2)
        os.close(fd)


@pytest.mark.slow
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_fifo(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, writer: str) -> None:
    w = WRITERS[writer]
    fifo = tmp_path / f"fifo{w.suffix}"
    os.mkfifo(fifo, 0o640)
    with monkeypatch.context() as m, fifo_reader(fifo) as got:
        m.setattr(fileio, "WRITE_TIMEOUT_S", 5.0)  # a reader on a busy machine may pause; it reads on
        code, _, err = run(capsys, w.argv(str(fifo)))
    assert code == 0 and not error_lines(err), err
    assert b"".join(got), "the reader got nothing"
    t0 = time.monotonic()
    code, out, err = run(capsys, w.argv(str(fifo)))  # nobody reads: bounded, then one line
    assert time.monotonic() - t0 < 10  # the wait is 0.3 s; the rest is the command on a busy machine
    assert code == 2 and error_lines(err) == [
        f"topodoctor: error: cannot write {fifo}: no reader opened the FIFO in time"
    ]
    assert not w.verdict or out.strip(), "the verdict was lost"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_IMODE(os.lstat(fifo).st_mode) == 0o640


# ------------------------------------------------------------------ links
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_symlink_to_a_file_writes_its_target(tmp_path: Path, capsys: pytest.CaptureFixture[str], writer: str) -> None:
    w = WRITERS[writer]
    real = tmp_path / "real" / f"metrics{w.suffix}"
    real.parent.mkdir()
    real.write_text("previous")
    os.chmod(real, 0o604)
    chain = tmp_path / f"link{w.suffix}"
    (tmp_path / "hop").symlink_to(Path("real") / real.name)  # relative, through a second link
    chain.symlink_to("hop")
    code, _, err = run(capsys, w.argv(str(chain)))
    assert code == 0, err
    assert os.readlink(chain) == "hop" and os.readlink(tmp_path / "hop") == f"real/{real.name}"
    assert real.read_text(errors="replace") != "previous" and stat.S_IMODE(real.stat().st_mode) == 0o604
    assert leftovers(tmp_path) == []  # the temporary lived beside the target, and is gone


@pytest.mark.slow
@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("alias", ["/proc/self/fd/1", "/dev/fd/1"])
def test_link_to_standard_output(tmp_path: Path, capsys: pytest.CaptureFixture[str], writer: str, alias: str) -> None:
    """`-o /dev/stdout` once replaced the /dev/stdout link: a link to our descriptor is written to."""
    w = WRITERS[writer]
    link = tmp_path / f"stdout{w.suffix}"
    link.symlink_to(alias)
    code, out, err = run(capsys, w.argv(str(link)))
    assert code == 0 and not error_lines(err) and out.strip(), err
    assert os.readlink(link) == alias and sorted(p.name for p in tmp_path.iterdir()) == [link.name]


@pytest.mark.slow
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_dangling_symlink(tmp_path: Path, capsys: pytest.CaptureFixture[str], writer: str) -> None:
    w = WRITERS[writer]
    new = tmp_path / f"link-new{w.suffix}"
    new.symlink_to(f"created{w.suffix}")
    code, _, err = run(capsys, w.argv(str(new)))
    assert code == 0 and new.is_symlink() and (tmp_path / f"created{w.suffix}").stat().st_size > 0, err
    lost = tmp_path / f"link-lost{w.suffix}"
    lost.symlink_to(tmp_path / "missing" / "x")
    code, out, err = run(capsys, w.argv(str(lost)))
    assert code == 2 and error_lines(err) == [f"topodoctor: error: cannot write {lost}: no such directory"]
    assert not w.verdict or out.strip()
    assert os.readlink(lost) == str(tmp_path / "missing" / "x") and not (tmp_path / "missing").exists()


# ------------------------------------------------------------------ refused, and nothing changed
CASES = ["directory", "missing-directory", "name-too-long", "read-only-file", "read-only-directory", "not-a-dir"]


@contextlib.contextmanager
def as_nobody() -> Iterator[None]:
    """Root may write anything: a read-only case is run with nobody's effective ids."""
    if not ROOTED:
        yield
        return
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory nobody can reach (pytest's own are private to root)."""
    d = Path(tempfile.mkdtemp(prefix="td-writers-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _target(d: Path, case: str, suffix: str) -> tuple[Path, Path, str]:
    """(the path given, the node to find unchanged, the reason the line must give)."""
    if case == "directory":
        (d / f"dir{suffix}").mkdir()
        return d / f"dir{suffix}", d / f"dir{suffix}", "it is a directory"
    if case == "missing-directory":
        return d / "missing" / f"out{suffix}", d, "no such directory"
    if case == "name-too-long":
        return d / ("a" * 300 + suffix), d, "File name too long"
    if case == "not-a-dir":
        (d / "file").write_text("previous")
        return d / "file" / f"out{suffix}", d / "file", "Not a directory"
    if case == "read-only-file":
        ro = d / f"ro{suffix}"
        ro.write_text("previous")
        os.chmod(ro, 0o444)
        if ROOTED:
            os.chown(d, NOBODY, NOBODY)  # nobody may rename in the directory, not write the file
            os.chown(ro, NOBODY, NOBODY)
        return ro, ro, "Permission denied"
    sub = d / "ro-dir"
    sub.mkdir(mode=0o555)
    return sub / f"out{suffix}", sub, "Permission denied"


@pytest.mark.slow
@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("case", CASES)
def test_refused(capsys: pytest.CaptureFixture[str], shared_dir: Path, writer: str, case: str) -> None:
    w = WRITERS[writer]
    path, node, reason = _target(shared_dir, case, w.suffix)
    before = kind(node), sorted(p.name for p in shared_dir.rglob("*"))
    with as_nobody():
        code, out, err = run(capsys, w.argv(str(path)))
    lines = error_lines(err)
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"topodoctor: error: cannot write {fileio.shown(path)[:100]}") and reason in lines[0]
    assert not w.verdict or out.strip(), "the verdict was lost"
    assert (kind(node), sorted(p.name for p in shared_dir.rglob("*"))) == before


# ------------------------------------------------------------------ the verdict is never lost
NVLINK_DOWN = str(ROOT / "fixtures/derived/x4-nvlink-down.json")
HANG = str(ROOT / "fixtures/derived/x4-nvml-hang.json")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "code", "first"),
    [
        (["--replay", "h200-x4"], 2, "topodoctor check: replay h200-x4"),
        (["--replay", NVLINK_DOWN], 1, "topodoctor check: replay x4-nvlink-down.json"),
        (["--replay", "h200-x4", "-f", "json"], 2, "{"),
        (["--replay", HANG, "-f", "json", "--timeout", "0.5"], 3, "{"),
    ],
)
def test_check_keeps_its_verdict_when_metrics_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, first: str
) -> None:
    """1 (unhealthy) and 3 (could not check) stand; a healthy verdict becomes 2, the bad path's code."""
    bad = tmp_path / "missing" / "topodoctor.prom"
    got, out, err = run(capsys, ["check", *argv, "--metrics", str(bad)])
    assert got == code and out.startswith(first), (out, err)
    assert err.splitlines()[-1] == f"topodoctor: error: cannot write {bad}: no such directory"
    assert len(error_lines(err)) == 1 + (code == 3)  # could not check: its own line, then the write's
    if first == "{":
        assert json.loads(out)["exit_code"] == code - (code == 2) * 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "code", "first"),
    [
        (["--replay", "h200-x4"], 2, "topodoctor OK: 4 GPUs, 1 info; 1 check incomplete; "),
        (["--replay", NVLINK_DOWN], 1, "topodoctor FAIL TD101 GPU1/nvlink5: "),
        (["--replay", HANG, "--timeout", "0.5"], 3, "topodoctor UNKNOWN: could not check: "),
    ],
)
def test_one_line_format_says_the_failed_write_in_its_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    code: int,
    first: str,
) -> None:
    """A drain reason captured with 2>&1 stays one line: the write's failure ends the verdict's line."""
    monkeypatch.chdir(tmp_path)  # a short name: the line is capped at 200 characters
    bad = Path("missing") / "topodoctor.prom"
    got, out, err = run(capsys, ["check", *argv, "-f", "line", "--metrics", str(bad)])
    assert got == code and not err and len(out.splitlines()) == 1, (out, err)
    assert out.startswith(first) and out.endswith(f"; cannot write {bad}: no such directory\n"), out


@pytest.mark.slow
def test_a_fifo_nobody_reads_waits_no_longer_than_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fileio, "WRITE_TIMEOUT_S", 60.0)
    fifo = tmp_path / "metrics.prom"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    code, out, err = run(capsys, ["check", "--replay", "h200-x4", "--timeout", "1.5", "--metrics", str(fifo)])
    assert time.monotonic() - t0 < 2.5
    assert code == 2 and out.startswith("topodoctor check") and "no reader" in error_lines(err)[0]


# ------------------------------------------------------------------ every writer is in the table
def test_every_writer_is_listed() -> None:
    """Every option or argument that takes a path is a reader (tested in test_hostile.py and
    test_hostile_streams.py) or a writer in WRITERS: a new one fails here until it is placed."""
    import typer.main

    writers, unplaced = set(), set()
    group = typer.main.get_command(app)
    ctx = group.context_class(group)
    for name in group.list_commands(ctx):  # type: ignore[attr-defined]
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        for param in command.params:
            flag = min((o for o in param.opts if o.startswith("--")), key=len, default=param.name or "")
            if set(param.opts) & WRITER_OPTIONS:
                writers.add(f"{name} {'-o' if flag == '--output' else flag}")
            elif set(param.opts) & LIVE_WRITER_OPTIONS:
                continue
            elif "Path" in repr(getattr(param, "type_descriptor", None) or param.type) and flag not in READ_OPTIONS:
                unplaced.add(f"{name} {flag}")
    assert writers == set(WRITERS), (writers - set(WRITERS), set(WRITERS) - writers)
    assert not unplaced, f"a path option that is neither a known reader nor a writer: {unplaced}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.skipif(not ROOTED, reason="needs root to take nobody's ids")
def test_a_history_database_this_user_may_not_reach_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A store in a directory nobody may search: the command says so in one line (exit 2), never
    an internal error (exit 3), and the store is left as it was."""
    private = Path(tempfile.mkdtemp(prefix="topodoctor-private-"))
    db = private / "fleet.db"
    try:
        assert run(capsys, ["fleet", FLEET, "--history", str(db)])[0] in (0, 1)  # made by root, judged
        before = kind(db)
        with as_nobody():
            code, _, err = run(capsys, ["fleet", FLEET, "--history", str(db)])
        assert code == 2 and len(error_lines(err)) == 1 and "Permission denied" in err, err
        assert kind(db) == before
    finally:
        shutil.rmtree(private, ignore_errors=True)
