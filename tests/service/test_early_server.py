"""The NVML server the console entry point starts first (service/server.py): a live probe's
child adopts it and takes it into its process group; a command line that probes nothing live
kills it; no command leaves it behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_marks import gone

from topodoctor.core.budget import Budget, end_children
from topodoctor.probe import nvml_server
from topodoctor.service import probing, server
from topodoctor.service.passes import Source

ROOT = Path(__file__).resolve().parents[2]


def test_the_live_probes_child_adopts_it_into_its_group() -> None:
    server.start_nvml_server()
    started = nvml_server._early
    assert started is not None
    probing.start_early(Source(None, "/", True))  # a plain live text scan
    early = probing._early
    assert early is not None and nvml_server._early is None  # handed over
    assert os.getpgid(started.pid) == early[1].pid  # the budget's kill of the child takes it along
    probing.drop_early()
    end_children()
    assert gone(started.pid) and gone(early[1].pid)


@pytest.mark.parametrize("source", [None, Source("h200-x2")], ids=["nothing", "a replay"])
def test_a_command_that_probes_nothing_live_kills_it(source: Source | None) -> None:
    server.start_nvml_server()
    started = nvml_server._early
    assert started is not None
    probing.start_early(source)
    assert nvml_server._early is None and gone(started.pid)
    probing.drop_early()
    end_children()


@pytest.mark.slow
@pytest.mark.parametrize(
    "args", [["scan", "--timeout", "31.5"], ["check", "-f", "line", "--timeout", "31.5"], ["scan", "--bogus", "31.5"]]
)
def test_no_command_leaves_it_behind(args: list[str]) -> None:
    argv = [sys.executable, "-m", "topodoctor", *args]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode in (0, 1, 2, 3), out.stderr
    time.sleep(0.2)  # a server the kernel kills with its parent is gone by now
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "31.5" not in procs


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["scan"], True),
        (["check", "-f", "line", "--timeout", "20"], True),
        (["scan", "--timeout", "0"], False),
        (["check", "--timeout=0.0"], False),
        (["scan", "--replay", "h200-x4"], False),
        (["check", "--help"], False),
        (["record", "-o", "x.json"], False),
        ([], False),
    ],
)
def test_the_entry_point_starts_it_only_for_a_live_budgeted_probe(argv: list[str], expected: bool) -> None:
    from topodoctor.cli import _may_probe_live

    assert _may_probe_live(argv) is expected


def test_no_budget_asks_nvml_in_this_process() -> None:
    """``--timeout 0`` promises no child process: the probe asks the binding here (the test guard
    refuses the real NVML here; through a server it would have been the server's death)."""
    with pytest.raises(AssertionError, match="called the real NVML"):
        probing.probe(Source(None), Budget.start(0))
    with pytest.raises(AssertionError, match="called the real NVML"):
        probing.probe_scan_text(Source(None, "/", True), Budget.start(0))
