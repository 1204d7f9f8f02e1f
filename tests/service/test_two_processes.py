"""Two processes: a command and the one budgeted child that probes (and measures) for it. The
child is forked once, early for a `check` or `scan`; it forks nothing of its own; `--timeout 0`
in any spelling forks nothing at all, and no command leaves a process behind."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from topodoctor.core.budget import Budget
from topodoctor.service import probing
from topodoctor.service.passes import Source

ROOT = Path(__file__).resolve().parents[2]

# Every os.fork of the command and of its children, logged by the process that forked.
_COUNTED = (
    "import os, sys\n"
    "log, real = sys.argv.pop(1), os.fork\n"
    "def fork():\n"
    "    me = os.getpid()\n"
    "    pid = real()\n"
    "    if pid:\n"
    "        with open(log, 'a') as f: f.write(f'{me}\\n')\n"
    "    return pid\n"
    "os.fork = fork\n"
    "from topodoctor import cli\n"
    "cli.run()\n"
)


def _forks(tmp_path: Path, *args: str) -> tuple[int, list[str]]:
    log = tmp_path / "forks"
    log.touch()
    out = subprocess.run(
        [sys.executable, "-c", _COUNTED, str(log), *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    return out.returncode, log.read_text().split()


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
@pytest.mark.parametrize(
    "args",
    [
        ["scan", "--timeout", "20"],  # live: no driver here, the child says so
        ["check", "-f", "line", "--timeout", "20"],
        ["check", "--replay", "h200-x4", "-f", "line"],
        ["scan", "--replay", "h200-x4", "-f", "json"],
    ],
)
def test_a_probe_is_one_child_forked_by_the_command(tmp_path: Path, args: list[str]) -> None:
    code, forks = _forks(tmp_path, *args)
    assert code in (0, 3)
    assert len(forks) == 1  # the command's probe child, and no server or grandchild beside it


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
@pytest.mark.parametrize("timeout", ["0", "0.00", "0e3", "-0"])
def test_no_budget_forks_nothing_however_it_is_written(tmp_path: Path, timeout: str) -> None:
    for command in ("check", "scan"):
        code, forks = _forks(tmp_path, command, "--replay", "h200-x4", "--timeout", timeout)
        assert (code, forks) == (0, []), (command, timeout)


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
@pytest.mark.parametrize(
    ("args", "mark"),
    [
        (["scan", "--timeout", "31.51"], "31.51"),
        (["check", "-f", "line", "--timeout", "31.52"], "31.52"),
        (["scan", "--bogus", "31.53"], "31.53"),
    ],
)
def test_no_command_leaves_a_process_behind(args: list[str], mark: str) -> None:
    """Each case its own mark: the other cases may run beside it (pytest-xdist)."""
    argv = [sys.executable, "-m", "topodoctor", *args]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode in (0, 1, 2, 3), out.stderr
    time.sleep(0.2)
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert mark not in procs


def test_no_budget_asks_nvml_in_this_process() -> None:
    """``--timeout 0`` promises no child process: the probe asks the binding here (the test guard
    refuses the real NVML here)."""
    with pytest.raises(AssertionError, match="called the real NVML"):
        probing.probe(Source(None), Budget.start(0))
    with pytest.raises(AssertionError, match="called the real NVML"):
        probing.probe_scan_text(Source(None, "/", True), Budget.start(0))
