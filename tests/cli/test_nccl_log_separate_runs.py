"""nccl-log on nccl-tests' output whose launch started processes on two hosts that each ran a test of their own: the
same answer `diagnose` gives (TD983), from a log with no failure of NCCL's (fixtures/nccl-logs/holdout11/h11-002)."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import FIXTURES

from topodoctor.core.budget import Budget
from topodoctor.service.nccl_logs import explain_logs

LOG = FIXTURES / "nccl-logs" / "holdout11" / "h11-002.log"  # mpirun -np 2 -H two hosts, two headers


def _codes(path: Path) -> list[tuple[str, str]]:
    out = explain_logs([path], Budget(60.0, time.monotonic() + 60.0))
    return [(f.code, f.severity) for f in out.findings]


def test_two_headers_after_one_two_host_launch_are_separate_runs(tmp_path: Path) -> None:
    assert _codes(LOG)[0] == ("TD983", "error")
    one = tmp_path / "one.log"  # one header: one test, nothing to say
    text = LOG.read_text()
    head = text.index("# nThread", text.index("# nThread") + 1)
    one.write_text(text[:head])
    assert "TD983" not in [c for c, _ in _codes(one)]
