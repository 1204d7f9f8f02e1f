"""The streams and signals around a command: a reader that leaves, a standard output on a full
device, input paths the file system refuses, Ctrl-C. Each ends with the command's documented exit
code and one line, never a traceback, never exit 1 for something that is not a finding."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, scenario_path
from process_marks import marked_processes

from topodoctor.cli.commands import main

PY = [sys.executable, "-m", "topodoctor"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
BW = str(ROOT / "fixtures/bandwidth/h200-x4.quick.json")
COLL_OK = str(ROOT / "fixtures/collectives/derived/x2-healthy.json")
COLL_BAD = str(ROOT / "fixtures/collectives/derived/x2-data-error.json")
FLEET = str(ROOT / "fixtures/fleet")
FULL = "topodoctor: error: cannot write to standard output: No space left on device\n"


def _spawn(argv: list[str], stdout: Any, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PY, *argv], stdout=stdout, stderr=subprocess.PIPE, text=True, env=ENV, timeout=60, **kw)


# ------------------------------------------------------------------ a reader that left: the command's own code
@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["--version"], 0),
        (["check", "--help"], 0),
        (["collectives", "--from", COLL_OK], 0),
        (["collectives", "--from", COLL_BAD], 1),
        (["collectives", "--from", COLL_BAD, "--format", "json"], 1),
        (["nccl-topo", "--replay", "h200-x4", "-o", "-"], 0),
        (["check", "--replay", str(scenario_path("x4-nvlink-down")), "-f", "line"], 1),
        (["fleet", FLEET, "-f", "json"], 0),
        (["bandwidth", "--from", BW, "-f", "prometheus"], 0),
    ],
)
def test_closed_pipe_keeps_the_exit_code(argv: list[str], code: int) -> None:
    """``topodoctor ... | true``: the reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = _spawn(argv, write_end)
    finally:
        os.close(write_end)
    assert r.returncode == code and "Traceback" not in r.stderr and "Broken" not in r.stderr, r


# ------------------------------------------------------------------ standard output on a full device
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--replay", "h200-x4", "-f", "line"],
        ["check", "--replay", "h200-x4", "-f", "json"],
        ["check", "--replay", "h200-x4", "--metrics", "-"],
        ["scan", "--replay", "h200-x4"],
        ["collectives", "--from", COLL_OK],
        ["fleet", FLEET],
        ["nccl-topo", "--replay", "h200-x4", "-o", "-"],
        ["--version"],
        ["check", "--help"],
    ],
)
def test_full_stdout_is_exit_3_in_one_line(argv: list[str]) -> None:
    """An environment failure, not our bug: no "internal error", no "please report"."""
    with open("/dev/full", "w") as full:
        r = _spawn(argv, full)
    assert r.returncode == 3 and r.stderr.endswith(FULL) and r.stderr.count("topodoctor: error:") == 1, r


# ------------------------------------------------------------------ input paths the file system refuses
def _loop(tmp: Path) -> str:
    (tmp / "loop.json").symlink_to("loop.json")
    return str(tmp / "loop.json")


def _not_a_dir(tmp: Path) -> str:
    (tmp / "file").write_text("{}")
    return str(tmp / "file" / "x.json")


PATHS = {
    "too-long-name": lambda tmp: "a" * 100_000,
    "too-long-path": lambda tmp: "/".join(["a" * 200] * 30) + ".json",
    "loop": _loop,
    "not-a-dir": _not_a_dir,
}
REASONS = {
    "too-long-name": ("File name too long", "no such file or bundled recording"),  # a bare NAME is looked up
    "too-long-path": ("File name too long",),
    "loop": ("symbolic link loop",),
    "not-a-dir": ("Not a directory",),
}
READERS = {
    "scan --replay": lambda f: ["scan", "--replay", f],
    "check --replay": lambda f: ["check", "--replay", f],
    "check --replay -f line": lambda f: ["check", "--replay", f, "-f", "line"],
    "check --expect": lambda f: ["check", "--replay", "h200-x4", "--expect", f],
    "bandwidth --from": lambda f: ["bandwidth", "--from", f],
    "collectives --from": lambda f: ["collectives", "--from", f],
    "collectives --bandwidth": lambda f: ["collectives", "--from", COLL_OK, "--bandwidth", f],
    "fleet": lambda f: ["fleet", f],
    "nccl-topo --lint": lambda f: ["nccl-topo", "--replay", "h200-x4", "--lint", f],
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("path", sorted(PATHS))
def test_refused_input_path_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reader: str, path: str
) -> None:
    code = main(READERS[reader](PATHS[path](tmp_path)))
    got = capsys.readouterr()
    line_format = reader.endswith("-f line")
    lines = (got.out if line_format else got.err).splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in got.err, got
    assert lines[0].startswith("topodoctor UNKNOWN:" if line_format else "topodoctor: error:")
    assert "internal error" not in lines[0] and len(lines[0]) < 600
    if not line_format:  # the one line of that format is capped at 200 characters; here the reason shows
        assert any(reason in lines[0] for reason in REASONS[path]), lines[0]


# ------------------------------------------------------------------ Ctrl-C, as every other signal


HANG = str(scenario_path("x4-nvml-hang"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "stream"),
    [
        (["check", "--replay", HANG, "--timeout", "60"], "err"),
        (["check", "--replay", HANG, "--timeout", "60", "-f", "line"], "out"),
        (["scan", "--replay", HANG], "err"),
        (["expect", "--replay", HANG, "-o", os.devnull], "err"),
        (["nccl-topo", "--replay", HANG, "-o", "-"], "err"),
        (["bandwidth", "--replay", HANG], "err"),
    ],
)
def test_sigint_is_one_line_and_takes_the_child_along(argv: list[str], stream: str) -> None:
    mark = f"TOPODOCTOR_TEST_{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [*PY, *argv], env={**ENV, mark: "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 20
        while len(marked_processes(mark)) < 2 and time.monotonic() < deadline:  # the command and its probe child
            time.sleep(0.05)
        assert len(marked_processes(mark)) >= 2
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    said = {"out": out, "err": err}
    line = (
        "topodoctor UNKNOWN: terminated by SIGINT\n" if stream == "out" else "topodoctor: error: terminated by SIGINT\n"
    )
    assert proc.returncode == 130 and said[stream] == line and not said["err" if stream == "out" else "out"], said
    gone = time.monotonic() + 10  # the child's own exit, which a loaded machine may take a moment to reap
    while marked_processes(mark) and time.monotonic() < gone:
        time.sleep(0.05)
    assert marked_processes(mark) == []


@pytest.mark.slow
def test_a_signal_the_caller_ignores_stays_ignored() -> None:
    """A shell's background job ignores SIGINT, nohup ignores SIGHUP: topodoctor does not take
    them back, and ends as its budget says."""
    argv = [*PY, "check", "--replay", HANG, "--timeout", "2", "-f", "line"]

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = subprocess.Popen(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore)
    try:
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGHUP)
        out, _ = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 3 and out.startswith("topodoctor UNKNOWN: could not check: not finished"), out
