"""`topodoctor collectives` when NCCL cannot start: exit 3 with NCCL's reason, its code and the fix,
never "internal error". The ranks are real (gloo on the CPU); the init failure is the text a real
NCCL failure left (fixtures/nccl-logs/failures/), injected through the runner's test hook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from topodoctor.measure.collectives.init_failure import explain_init_failure

ROOT = Path(__file__).resolve().parents[2]
FAILURES = ROOT / "fixtures" / "nccl-logs" / "failures"


def test_exception_text_alone_explains_the_class() -> None:
    text = (FAILURES / "net-ib" / "unset" / "rank0.txt").read_text()
    why = explain_init_failure(text, None, {"NCCL_NET": "IB"})
    assert why.startswith("NCCL: no NCCL network could be initialised (NCCL_NET=IB) (TD040")
    assert "Unset NCCL_NET" in why


def test_the_ranks_nccl_log_explains_what_the_exception_does_not(tmp_path: Path) -> None:
    # an exception that carries no reason (older torch): the reason is in NCCL's own log
    text = (FAILURES / "socket-ifname" / "warn" / "rank0.txt").read_text()
    exc = "\n".join(ln for ln in text.splitlines() if "socket interface" not in ln)
    assert "TD041" not in explain_init_failure(exc, None, {})
    log = tmp_path / "nccl.0.log"
    log.write_text("\n".join(ln for ln in text.splitlines() if "NCCL WARN" in ln) + "\n")
    assert "TD049" in explain_init_failure(exc, None, {})  # no reason: the likely causes, the variable to set
    assert "(TD041 nccl-log-no-socket-interface)" in explain_init_failure(exc, str(log), {})


def test_an_unknown_failure_keeps_its_first_line() -> None:
    assert explain_init_failure("\nRuntimeError: store refused\nmore", None, {}) == "RuntimeError: store refused"


@pytest.mark.slow
def test_collectives_init_failure_is_exit_3_with_the_reason() -> None:
    fault = f"init:1:{FAILURES / 'duplicate-gpu' / 'unset' / 'rank1.txt'}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOPODOCTOR_COLL_FAULT=fault)
    cmd = [sys.executable, "-m", "topodoctor", "collectives", "--backend", "gloo", "--op", "all_reduce"]
    cmd += ["--size", "1K", "--nprocs", "2", "--replay", "h200-x2", "--timeout", "120"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)
    assert r.returncode == 3, r.stderr
    assert "internal error" not in r.stderr
    assert "collectives could not start: NCCL: ranks 1 and 0 both use the GPU at bus 60" in r.stderr
    assert "(TD042 nccl-log-duplicate-gpu)" in r.stderr
