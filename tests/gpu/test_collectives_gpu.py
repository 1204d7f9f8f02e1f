"""Run on a GPU host only (pytest -m gpu tests/gpu): collectives over NCCL on every visible GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

if shutil.which("nvidia-smi") is None:
    pytest.skip("no nvidia-smi: not a GPU host", allow_module_level=True)
_listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
if sum(1 for line in _listed.splitlines() if line.startswith("GPU ")) < 2:
    pytest.skip("collectives need two GPUs on one host", allow_module_level=True)


def coll(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:  # type: ignore[type-arg]
    p = subprocess.run(
        [sys.executable, "-m", "topodoctor", "collectives", "--format", "json", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        timeout=180,
    )
    assert p.stdout, p.stderr
    return p.returncode, json.loads(p.stdout)


def test_quick_sizes_are_healthy_and_correct() -> None:
    rc, doc = coll("--op", "all_reduce,sendrecv", "--size", "8,64M")
    assert rc == 0, doc["findings"]
    assert all(c["wrong"] == 0 for r in doc["rows"] for c in (r["out_of_place"], r["in_place"]) if c)
    assert doc["nccl"]["connections"] and all(c["kind"] == "p2p" for c in doc["nccl"]["connections"])
    assert doc["nccl"]["nvls"] is False  # NVLink multicast stays off unless asked for


def test_p2p_disabled_shows_shm_and_the_fallback() -> None:
    rc, doc = coll("--op", "all_reduce", "--size", "256M", env={"NCCL_P2P_DISABLE": "1"})
    assert rc == 1
    assert {c["transport"] for c in doc["nccl"]["connections"]} == {"SHM"}
    assert {"TD001", "TD003"} <= {f["code"] for f in doc["findings"]}


def test_one_channel_is_named() -> None:
    rc, doc = coll("--op", "all_reduce", "--size", "256M", env={"NCCL_MAX_NCHANNELS": "1"})
    assert rc == 1
    assert "env:NCCL_MAX_NCHANNELS" in {f["subject"] for f in doc["findings"] if f["code"] == "TD002"}


def test_a_hang_is_cut_and_nothing_stays_on_the_gpus() -> None:
    env = {"TOPODOCTOR_COLL_FAULT": "hang:1:all_reduce:1048576"}
    rc, doc = coll("--op", "all_reduce", "--size", "1M", "--op-timeout", "5", env=env)
    assert rc == 1 and doc["failures"][0]["kind"] == "hang"
    left = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    assert left == ""
