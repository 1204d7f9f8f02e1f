"""The layer contracts (pyproject.toml, `lint-imports`) hold, and they would catch an upward import
like the ones the stage layout removed: each is put back in a copy of the package and must break
a contract."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))

# (module file, an import that once ran up or across the layers)
UPWARD = [
    ("topodoctor/report/check.py", "from topodoctor.service.check import probe"),
    ("topodoctor/fleet/rollup.py", "from topodoctor.rules.registry import REGISTRY"),
    ("topodoctor/topology/topo_matrix.py", "from topodoctor.probe.query import sys_read"),
    ("topodoctor/measure/collectives/loopback.py", "from topodoctor.report.collectives import print_collectives"),
    ("topodoctor/rules/context.py", "from topodoctor.probe.environment import capture_environment"),
    ("topodoctor/cli/fleet.py", "from topodoctor.fleet.inputs import read_results"),
    ("topodoctor/measure/collectives/rank/timing.py", "from topodoctor.measure.copies.runner import main"),
    ("topodoctor/rules/nvlink.py", "import torch"),
    ("topodoctor/api/host.py", "from topodoctor.cli.io import emit"),
    ("topodoctor/api/verdict.py", "import typer"),
    ("topodoctor/service/check.py", "from topodoctor.api.host import scan"),
]


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)}
    return subprocess.run(
        [LINT, "--config", str(tree / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
        timeout=120,
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not Path(LINT).exists():
        pytest.skip("lint-imports is not installed (pip install -e '.[dev]')")
    t = tmp_path_factory.mktemp("layers")
    shutil.copytree(ROOT / "topodoctor", t / "topodoctor", ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    shutil.copy(ROOT / "pyproject.toml", t / "pyproject.toml")
    return t


def test_contracts_hold(tree: Path) -> None:
    out = lint(tree)
    assert out.returncode == 0, out.stdout[-3000:]


@pytest.mark.parametrize(("module", "line"), UPWARD)
def test_an_upward_import_breaks_a_contract(tree: Path, module: str, line: str) -> None:
    path = tree / module
    original = path.read_text()
    try:
        path.write_text(original + f"\n\ndef _upward() -> None:  # put back by the test\n    {line}  # noqa\n")
        out = lint(tree)
    finally:
        path.write_text(original)
    assert out.returncode != 0 and "BROKEN" in out.stdout, out.stdout[-2000:]
