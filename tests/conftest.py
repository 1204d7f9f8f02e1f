"""Shared test set-up: no test may reach a real NVML, and no test sees the caller's NCCL/CUDA
environment unless it sets it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Helpers shared by the tests of every package (tests/support) import by their own names.
sys.path.insert(0, str(ROOT / "tests" / "support"))
FIXTURES = ROOT / "fixtures"
# The real recordings live once, in the package that ships them (--replay NAME); the
# nvidia-smi topo -m text of each host sits beside the fixtures.
RECORDINGS = sorted((ROOT / "topodoctor" / "probe" / "recordings").glob("*.json"))
TOPO_TEXT = FIXTURES / "recordings"
DERIVED = json.loads((FIXTURES / "derived" / "index.json").read_text())
BW_DERIVED = json.loads((FIXTURES / "bandwidth" / "derived" / "index.json").read_text())


@pytest.fixture(autouse=True)
def _no_real_nvml(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("gpu"):
        return
    from topodoctor.probe import nvml

    def refuse(self: Any, fn: str, *args: Any) -> Any:
        raise AssertionError(f"a test called the real NVML ({fn}); replay a recording instead")

    monkeypatch.setattr(nvml.LiveNvml, "call", refuse)
    # The driver's warm-up (probe/warm_up.py) reaches the library through ctypes, not the binding:
    # a name no host has makes it find none.
    from topodoctor.probe import warm_up

    monkeypatch.setattr(warm_up, "LIBRARY", "libnvidia-ml.so.1-refused-in-tests")
    for name in list(os.environ):  # a test run inside a Slurm job is no job's check either
        if name.startswith(("NCCL_", "CUDA_", "TORCH_NCCL_", "SLURM_JOB_", "SLURM_STEP_")):
            monkeypatch.delenv(name)
    # pytest-xdist's workers inherit COLUMNS=80 where a plain run has none: a test that wants a
    # terminal's width sets it, so every test sees the same width however the suite runs.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """pyproject's addopts ask pytest-xdist for every core (``-n auto``): where xdist is not loaded
    (not installed, or ``-p no:xdist``) the option is taken and the run is one process, not a
    usage error."""
    if not pluginmanager.has_plugin("xdist"):
        # the short flag as xdist declares it (a conftest's public addoption refuses lowercase ones)
        group = parser.getgroup("xdist", "distributed and subprocess testing (not loaded)")
        group._addoption("-n", "--numprocesses", dest="numprocesses", default=None, help="ignored: one process")


def scenario_path(name: str) -> Path:
    return FIXTURES / "derived" / f"{name}.json"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The plain test command (pyproject's addopts: `not cluster`) does not even import tests/integration,
    the real-cluster suite: it reaches the system. An explicit marker (`-m cluster`, `-m slow`) or the
    folder named on the command line collects it as before."""
    if collection_path.name != "integration" or collection_path.parent != Path(__file__).parent:
        return None
    excluded = "not cluster" in (config.option.markexpr or "")
    named = any("integration" in str(a) for a in config.args)
    return True if excluded and not named else None


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A set's id in sorted order: its repr follows the hash seed, which differs between
    pytest-xdist's workers, and they must collect the same ids."""
    if isinstance(val, (set, frozenset)):
        return "{" + ",".join(sorted(map(str, val))) + "}" if val else "set()"
    return None
