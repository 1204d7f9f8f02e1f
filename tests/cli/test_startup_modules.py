"""What a command does not use, it does not import: the modules `--version`, `--help` and a
replayed `check -f line` load, held against a bare interpreter's in the same environment (a venv's
site hooks differ from host to host; what topodoctor adds on top is ours).

Measured on the GPU host (tests/benchmarks/startup.py, docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(*args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    return {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}


def test_version_and_help_load_nothing_of_the_commands() -> None:
    bare = _modules("-c", "pass")
    for flag in ("--version", "--help"):
        extra = _modules("-m", "topodoctor", flag) - bare
        assert not {m for m in extra if m.split(".")[0] in ("typer", "click", "rich", "networkx")}, flag
        assert len(extra) <= 20, (flag, sorted(extra))  # runpy and topodoctor's own few


# What a one-line check adds to a bare interpreter here: 182 modules (every command is read by typer
# from its options spec, modules import what they use at the top, the cause engine's symptom list
# and every result's stamp, 2026-11-27; 109 when a hand-written parser answered a plain check
# without typer); 247 in all here, against a target of 250.
LINE_CHECK_MODULES = 184


def test_a_replayed_line_check_loads_only_what_it_uses() -> None:
    extra = _modules("-m", "topodoctor", "check", "--replay", "h200-x4", "-f", "line") - _modules("-c", "pass")
    unused = ("torch", "pynvml", "topodoctor.measure", "rich", "pydantic", "networkx", "statistics", "decimal")
    assert not {m for m in extra if m.startswith(unused)}, sorted(extra)
    other_commands = {
        f"topodoctor.cli.{c}"
        for c in ("bandwidth", "collectives", "fleet", "pictures", "nccl_topo", "nccl_log", "job", "host", "scan")
    }
    assert not extra & other_commands
    assert len(extra) <= LINE_CHECK_MODULES, sorted(extra)


def test_a_command_loads_its_options_when_named_and_its_code_when_run() -> None:
    extra = _modules("-m", "topodoctor", "nccl-log", "--help")
    assert "topodoctor.cli.args_cluster" in extra and "topodoctor.cli.nccl_log" not in extra
    assert not {
        m for m in extra if m.startswith(("topodoctor.cli.collectives", "topodoctor.service.request_collectives"))
    }
    extra = _modules("-m", "topodoctor", "nccl-log", str(ROOT / "fixtures" / "nccl-logs" / "maxch1"))
    assert "topodoctor.cli.nccl_log" in extra and "topodoctor.cli.collectives" not in extra
