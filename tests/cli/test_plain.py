"""The early probe: a plain `check` or `scan` has its probe child forked before the command line
is parsed (cli/plain.py, service/probing.py). It is adopted only for the host the command
then asks for, and killed otherwise; the answer is the one a probe forked later gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from process_marks import gone

from topodoctor.cli.plain import plain_check, plain_scan, source_of
from topodoctor.core.budget import Budget, end_children
from topodoctor.service import probing
from topodoctor.service.passes import Source

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["check"], Source()),
        (["check", "-f", "line", "--prolog", "--timeout", "20"], Source()),
        (["check", "--replay", "h200-x4", "-fjson", "--fail-level=warning"], Source("h200-x4")),
        (["check", "--replay=h200-x2", "--sysfs-root", "/tmp/root", "--strict"], Source("h200-x2", "/tmp/root")),
        (["check", "--expect", "e.json", "--metrics", "m.prom", "--scope", "job"], Source()),
        (["scan", "--draw", "t.svg", "--export-graph", "g.dot", "-f", "json"], Source()),
        # The text scan shows no fitness reading: its topology alone is read.
        (["scan"], Source(topology_only=True)),
        (["scan", "-f", "text", "--replay", "h200-x4", "--timeout", "5"], Source("h200-x4", topology_only=True)),
        (["scan", "--format=text"], Source(topology_only=True)),
        (["scan", "-ftext"], Source(topology_only=True)),
        (["scan", "-fjson"], Source()),
        (["scan", "--format", "json"], Source()),
        (["scan", "--draw=t.svg"], Source()),
        (["scan", "--export-graph", "g.graphml"], Source()),
    ],
)
def test_a_plain_check_or_scan_is_probed_early(argv: list[str], expected: Source) -> None:
    assert source_of(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["check", "--help"],
        ["check", "-h"],
        ["check", "--timeout", "0"],  # no budget: the probe runs in the command's own process
        ["check", "--timeout=0"],
        ["check", "--level", "quick"],  # a measurement pass runs in the child
        ["check", "--bandwidth"],
        ["check", "--collectives"],
        ["check", "--replay", "a", "--replay", "b"],  # refused by the command
        ["check", "--replay"],  # a value missing
        ["check", "--prolog=1"],
        ["check", "--no-such-option"],
        ["check", "extra-argument"],
        ["scan", "--prolog"],  # a check option, not a scan one
        ["record", "-o", "x.json"],
        ["bandwidth"],
        ["--version"],
    ],
)
def test_anything_else_is_not(argv: list[str]) -> None:
    assert source_of(argv) is None


def test_the_early_child_is_adopted_for_its_host() -> None:
    later = probing.probe(Source("h200-x2"), Budget.start(30), environment=True)
    probing.start_early(source_of(["check", "--replay", "h200-x2", "-f", "line"]))
    started = probing._early
    assert started is not None
    host = probing.probe(Source("h200-x2"), Budget.start(30), environment=True)
    end_children()  # an answered child is reaped at the command's end, after its output
    assert probing._early is None and gone(started[1].pid)
    assert host.snapshot == later.snapshot and host.origin == later.origin
    assert host.process is not None and host.process.environ == later.process.environ  # type: ignore[union-attr]


def test_the_early_child_of_another_host_is_killed() -> None:
    probing.start_early(source_of(["check", "--replay", "h200-x2"]))
    started = probing._early
    assert started is not None
    host = probing.probe(Source("h200-x4"), Budget.start(30))
    assert probing._early is None and gone(started[1].pid)
    assert len(host.snapshot.gpus) == 4 and host.process is None


def test_no_budget_runs_in_process_and_kills_the_early_child() -> None:
    probing.start_early(source_of(["check", "--replay", "h200-x2"]))
    started = probing._early
    assert started is not None
    host = probing.probe(Source("h200-x2"), Budget.start(0))
    assert probing._early is None and gone(started[1].pid)
    assert len(host.snapshot.gpus) == 2


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "topodoctor", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


@pytest.mark.slow
def test_the_console_answers_the_same_with_and_without_it() -> None:
    early = _console("check", "--replay", "h200-x4", "-f", "json")
    late = _console("check", "--replay", "h200-x4", "-f", "json", "--level", "static")  # not probed early
    assert early.returncode == late.returncode == 0, early.stderr + late.stderr
    a, b = json.loads(early.stdout), json.loads(late.stdout)
    a.pop("elapsed_s"), b.pop("elapsed_s")
    assert a == b


def test_a_usage_error_leaves_no_probe_behind() -> None:
    out = _console("check", "--replay", "h200-x4", "--select", "TD999")
    assert out.returncode == 2 and "TD999" in out.stderr
    # The early child's process group: killed before the command ended, so nothing of it is left.
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "--select TD999" not in procs


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["scan"], {"replay": None, "fmt": "text", "sysfs_root": "/", "timeout": 60.0}),
        (
            ["scan", "-fjson", "--timeout=inf", "--replay", "x.json"],
            {"replay": "x.json", "fmt": "json", "timeout": 1e7},
        ),
        (["scan", "--sysfs-root", "/r", "--timeout", "0"], {"sysfs_root": "/r", "timeout": 0.0}),
    ],
)
def test_a_plain_scan_is_read_without_typer(argv: list[str], expected: dict[str, object]) -> None:
    got = plain_scan(argv)
    assert got is not None and {k: got[k] for k in expected} == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["scan", "--help"],
        ["scan", "-f", "xml"],  # typer says what is wrong with it
        ["scan", "-f=json"],  # click reads "=json" as the value
        ["scan", "--timeout", "nan"],
        ["scan", "--timeout", "-1"],
        ["scan", "--timeout", "soon"],
        ["scan", "-f", "json", "-f", "text"],
        ["scan", "--draw", "t.svg"],
        ["scan", "--export-graph", "g.dot"],
        ["check"],
        ["scan", "extra"],
    ],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert plain_scan(argv) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["--replay", "h200-x4"],
        ["--replay", "h200-x4", "-f", "json"],
        ["-fjson", "--replay=h100-x1", "--timeout", "30"],
        ["--replay", "no-such-recording"],
        ["--replay", str(ROOT / "pyproject.toml")],
        ["--replay", "h200-x4", "--timeout", "-1"],
        ["--replay", "h200-x4", "-f", "xml"],
    ],
)
def test_a_plain_scan_answers_as_typer_does(args: list[str]) -> None:
    """The console's plain path (no typer loaded) and typer's command run as the console runs it:
    the same output, the same one-line error, the same exit code."""
    typed, plain = _typer_path("scan", *args), _console("scan", *args)
    assert (plain.returncode, plain.stdout, plain.stderr) == (typed.returncode, typed.stdout, typed.stderr)


def test_a_plain_scan_loads_no_command_line_library() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "topodoctor", "scan", "--replay", "h200-x4"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0 and "Connection matrix" in out.stdout
    loaded = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert not {m for m in loaded if m.split(".")[0] in ("typer", "click")}
    assert "topodoctor.cli.commands" not in loaded
    # The child sets the text out (service/probing.py, probe_scan_text): this process only draws it.
    assert not {m for m in loaded if m.startswith(("topodoctor.model.", "topodoctor.topology."))}


def test_a_plain_static_check_is_read_without_typer() -> None:
    got = plain_check(["check", "--prolog", "-f", "line", "--timeout", "20", "--metrics", "m.prom", "--select", "TD1"])
    assert got is not None
    assert (got["fmt"], got["prolog"], got["timeout"], got["metrics"], got["select"]) == (
        "line",
        True,
        20.0,
        Path("m.prom"),
        ["TD1"],
    )
    assert (got["level"], got["with_bandwidth"], got["scope"], got["level_to_fail"]) == (
        "static",
        False,
        "auto",
        "error",
    )
    for argv in (
        ["check", "--level", "quick"],
        ["check", "-f", "xml"],
        ["check", "--scope", "rack"],
        ["check", "--fail-level", "fatal"],
        ["check", "--metrics="],
        ["check", "--select", "TD1", "--select", "TD2"],  # typer gathers repeats
        ["check", "--timeout", "nan"],
        ["scan"],
    ):
        assert plain_check(argv) is None, argv


def _typer_path(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; from topodoctor.cli.commands import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["--replay", "h200-x4", "-f", "line"],
        ["--replay", "h200-x2", "--prolog", "-f", "line", "--timeout", "20", "--strict"],
        ["--replay", "h100-x1", "-f", "line", "--fail-level=critical"],
        ["--replay", "h200-x4", "--select", "TD999"],
        ["--replay", "h200-x4", "-f", "line", "--select", "TD999"],
        ["--replay", "h200-x4", "-f", "line", "--expect", str(ROOT / "pyproject.toml")],
        ["--replay", "h200-x4", "--scope", "job", "-f", "text"],
        ["--replay", "nope", "-f", "line"],
    ],
)
def test_a_plain_check_answers_as_typer_does(args: list[str]) -> None:
    typed, plain = _typer_path("check", *args), _console("check", *args)
    assert (plain.returncode, plain.stdout, plain.stderr) == (typed.returncode, typed.stdout, typed.stderr)


@pytest.mark.slow
def test_a_plain_check_json_answers_as_typer_does() -> None:
    args = ["check", "--replay", "h200-x4", "-f", "json", "--ignore", "TD1"]
    typed, plain = _typer_path(*args), _console(*args)
    a, b = json.loads(plain.stdout), json.loads(typed.stdout)
    a.pop("elapsed_s"), b.pop("elapsed_s")
    assert (plain.returncode, a, plain.stderr) == (typed.returncode, b, typed.stderr)


def test_a_plain_check_needs_no_command_line_library(tmp_path: Path) -> None:
    """A prolog's check answers even where typer cannot load: it is never imported."""
    code = (
        "import sys; sys.modules['typer'] = None\n"
        "sys.argv = ['topodoctor', 'check', '--replay', 'h200-x4', '-f', 'line', '--prolog']\n"
        "from topodoctor import cli\ncli.run()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", code]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert (out.returncode, out.stderr) == (0, "") and out.stdout.startswith("topodoctor OK: 4 GPUs")
