"""The early probe: a `check` or `scan` command line is read by its options spec before anything
else loads (core/options.py ``early_read``), and its probe child forked (service/probing.py). It is
adopted only for the host the command then asks for, and killed otherwise; the answer is the one
a probe forked later gives. The early read and typer read the same declarations, so they agree."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from process_marks import gone

from topodoctor.cli.commands import main, typer_command
from topodoctor.cli.early import early_source, line_asked
from topodoctor.cli.table import COMMANDS
from topodoctor.core.budget import Budget, end_children
from topodoctor.core.options import REQUIRED, build, early_read, specs
from topodoctor.service import early, probing
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
    assert early_source(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["check", "--help"],
        ["check", "-h"],
        ["check", "--timeout", "0"],  # no budget: the probe runs in the command's own process
        ["check", "--timeout=0"],
        ["check", "--timeout", "0.00"],  # read as the command reads it: no budget, no child
        ["check", "--timeout", "0e3"],
        ["check", "--timeout", "-0"],
        ["check", "--timeout", "nan"],  # refused by the command
        ["check", "--timeout", "soon"],
        ["scan", "--timeout=0.0"],
        ["check", "-f", "xml"],
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
    assert early_source(argv) is None


def test_the_early_child_is_adopted_for_its_host() -> None:
    later = probing.probe(Source("h200-x2"), Budget.start(30), environment=True)
    early.start(early_source(["check", "--replay", "h200-x2", "-f", "line"]))
    started = early._early
    assert started is not None
    host = probing.probe(Source("h200-x2"), Budget.start(30), environment=True)
    end_children()  # an answered child is reaped at the command's end, after its output
    assert early._early is None and gone(started[1].pid)
    assert host.snapshot == later.snapshot and host.origin == later.origin
    assert host.process is not None and host.process.environ == later.process.environ  # type: ignore[union-attr]


def test_the_early_child_of_another_host_is_killed() -> None:
    early.start(early_source(["check", "--replay", "h200-x2"]))
    started = early._early
    assert started is not None
    host = probing.probe(Source("h200-x4"), Budget.start(30))
    assert early._early is None and gone(started[1].pid)
    assert len(host.snapshot.gpus) == 4 and host.process is None


def test_no_budget_runs_in_process_and_kills_the_early_child() -> None:
    early.start(early_source(["check", "--replay", "h200-x2"]))
    started = early._early
    assert started is not None
    host = probing.probe(Source("h200-x2"), Budget.start(0))
    assert early._early is None and gone(started[1].pid)
    assert len(host.snapshot.gpus) == 2


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "topodoctor", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_the_console_answers_the_same_with_and_without_it() -> None:
    early = _console("check", "--replay", "h200-x4", "-f", "json")
    late = _console("check", "--replay", "h200-x4", "-f", "json", "--")  # "--": typer's to read, no early probe
    assert early.returncode == late.returncode == 0, early.stderr + late.stderr
    a, b = json.loads(early.stdout), json.loads(late.stdout)
    for doc in (a, b):  # when and how long: the two runs' own
        doc.pop("elapsed_s"), doc.pop("measured_at")
    assert a == b


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_a_usage_error_leaves_no_probe_behind() -> None:
    out = _console("check", "--replay", "h200-x4", "--select", "TD999")
    assert out.returncode == 2 and "TD999" in out.stderr
    # The early child's process group: killed before the command ended, so nothing of it is left.
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "--select TD999" not in procs


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["check", "-f", "line"], True),
        (["check", "-fline", "--timeout", "soon"], True),  # the usage error is the line too
        (["check", "--format=line", "--no-such"], True),
        (["job", "--format", "line"], True),
        (["check", "-f", "json"], False),
        (["check"], False),
        (["scan", "-f", "line"], False),  # not a format of scan: typer refuses it, on stderr
        (["fleet", "-f", "line"], False),
        (["bogus", "-f", "line"], False),
        ([], False),
    ],
)
def test_the_one_line_format_is_read_before_anything_else(argv: list[str], line: bool) -> None:
    assert line_asked(argv) is line


def _typer_read(monkeypatch: pytest.MonkeyPatch, command: str, argv: list[str]) -> Any:
    """The options object typer builds for ``argv``, caught where the command would run."""
    got: list[Any] = []
    module, _, name = COMMANDS[command].runner.partition(":")
    monkeypatch.setattr(importlib.import_module(module), name, lambda options, env: got.append(options) or 0)
    assert main([command, *argv]) == 0
    return got[0]


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("check", ["--replay", "h200-x4", "--timeout", "0.00"]),
        ("check", ["--replay=h200-x2", "--sysfs-root", "/r", "--timeout=inf", "-fline", "--level", "quick"]),
        ("check", ["--bandwidth", "--collectives", "--timeout", "1e-3", "--select", "TD1,TD2", "--prolog"]),
        ("scan", ["-fjson", "--draw", "t.svg", "--export-graph", "g.dot", "--timeout", "5"]),
        ("scan", ["--format=text", "--replay", "x.json"]),
    ],
)
def test_the_early_read_reads_what_typer_reads(monkeypatch: pytest.MonkeyPatch, command: str, argv: list[str]) -> None:
    """One declaration, two readers that agree: every value the early read takes is typer's."""
    read = early_read(argv, COMMANDS[command].options_class())
    typed = _typer_read(monkeypatch, command, argv)
    assert read.clean and read.values
    assert {name: getattr(typed, name) for name in read.values} == read.values
    assert build(type(typed), read.values).early_source() == typed.early_source()


def test_every_option_typer_knows_is_one_of_the_spec() -> None:
    """The typer commands are made from the spec: the same names, flags, defaults and choices."""
    for name, command in COMMANDS.items():
        built = typer_command(command)
        declared = {n: (opt, default) for n, opt, default in specs(command.options_class())}
        params = {p.name: p for p in built.params}
        assert set(params) == set(declared), name
        for n, (opt, default) in declared.items():
            p = params[n]
            flags = tuple(f for f in opt.flags for f in f.split("/"))
            assert set(p.opts + p.secondary_opts) == set(flags) or opt.argument, (name, n)
            choices = tuple(getattr(p.type, "choices", ()) or ())
            assert tuple(str(c) for c in choices) == opt.choices, (name, n)
            if default is not REQUIRED and not opt.many:
                assert p.default == default, (name, n)


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_the_early_read_loads_no_command_line_library() -> None:
    code = (
        "import sys; from topodoctor.cli.early import early_source, line_asked\n"
        "assert early_source(['check', '--replay', 'h200-x4', '-f', 'line']) is not None\n"
        "assert line_asked(['check', '-f', 'line'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (out.returncode, out.stdout) == (0, "[]\n"), out.stderr
