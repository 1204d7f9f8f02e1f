"""A ``check`` or ``scan`` line that the options spec reads in full runs without typer
(cli/early.py ``direct_options``): it must run with the very options object typer's command
builds from the same line, and every other line must be left to typer."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest

from topodoctor.cli import io as cli_io
from topodoctor.cli.commands import typer_command
from topodoctor.cli.early import direct_options
from topodoctor.cli.table import COMMANDS

CAUGHT: list[Any] = []


def catch(options: Any, env: cli_io.Env) -> int:
    """A runner that keeps the options object typer's command built."""
    CAUGHT.append((options, env.line))
    return 0


def through_typer(argv: list[str]) -> tuple[Any, bool]:
    command = replace(COMMANDS[argv[0]], runner=f"{__name__}:catch")
    CAUGHT.clear()
    # click outside its standalone mode answers the command's Exit with its code
    code = typer_command(command).main(argv[1:], standalone_mode=False, obj=cli_io.Env(line=False))
    assert code == 0 and len(CAUGHT) == 1
    return CAUGHT[0]  # type: ignore[no-any-return]


SAME = [
    ["check"],
    ["check", "-f", "line"],
    ["check", "--format=json", "--replay", "h100-x2"],
    ["check", "-fline", "--timeout", "0"],
    ["check", "--timeout", "12.5", "--fail-level", "warning"],
    ["check", "--select", "TD1", "--select", "TD3", "--ignore", "TD101"],
    ["check", "--level", "quick", "--metrics", "/tmp/x.prom"],
    ["check", "--prolog", "-f", "line"],
    ["scan"],
    ["scan", "--format", "json", "--replay", "h200-x4"],
    ["scan", "--timeout", "inf"],
]


@pytest.mark.parametrize("argv", SAME, ids=" ".join)
def test_the_direct_run_has_typer_s_options(argv: list[str]) -> None:
    direct = direct_options(argv)
    assert direct is not None, "a line the spec reads in full runs directly"
    _, options, line = direct
    assert (options, line) == through_typer(argv)


LEFT = [
    ["check", "--help"],
    ["check", "-h"],
    ["check", "--format", "yaml"],  # a choice refused
    ["check", "--timeout", "-1"],  # a value the option refuses
    ["check", "--timeout"],  # a value missing
    ["check", "--replay", "a", "--replay", "b"],  # given twice
    ["check", "--no-such-option"],
    ["check", "extra-argument"],
    ["check", "--", "-f"],
    ["check", "--prolog=yes"],
    ["record", "-o", "x.json"],  # a command whose probe does not start early
    ["bandwidth", "--quick"],
    ["nonsense"],
    [],
]


@pytest.mark.parametrize("argv", LEFT, ids=lambda a: " ".join(a) or "nothing")
def test_every_other_line_is_typer_s(argv: list[str]) -> None:
    assert direct_options(argv) is None


@pytest.mark.slow
def test_a_clean_check_loads_no_typer() -> None:
    """The point of the direct run: neither typer nor click is imported by a prolog's check."""
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    cmd = [sys.executable, "-X", "importtime", "-m", "topodoctor", "check", "--replay", "h100-x2", "-f", "line"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("topodoctor OK"), run.stdout + run.stderr
    imported = {line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "topodoctor.cli.check" in imported
    assert not {m for m in imported if m.split(".")[0] in ("typer", "click")}
    asked = [*cmd[:1], "-m", "topodoctor", "check", "--help"]
    help_run = subprocess.run(asked, capture_output=True, text=True, env=env, timeout=60)
    assert help_run.returncode == 0 and "--format" in help_run.stdout
