"""collectives runs under the command's one budget, like check: a probe that hangs is killed at the
budget, counted from the command's start, and the command says it could not check (exit 3)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_hanging_probe_is_cut_at_the_budget(tmp_path: Path) -> None:
    args = ["collectives", "--from", str(ROOT / "fixtures/collectives/derived/x2-healthy.json")]
    args += ["--replay", str(ROOT / "fixtures/derived/x4-nvml-hang.json"), "--timeout", "3"]
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "topodoctor", *args], capture_output=True, text=True, cwd=tmp_path, timeout=30
    )
    took = time.monotonic() - t0
    assert out.returncode == 3, out.stderr
    assert out.stderr.count("\n") == 1 and "3 s budget" in out.stderr, out.stderr
    assert took < 3.3 + 0.5, took  # the budget is kept from the command's start; the slack is the test's own fork
