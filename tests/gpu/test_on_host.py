"""Run on a GPU host only (pytest -m gpu tests/gpu): the live probe against nvidia-smi."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

if shutil.which("nvidia-smi") is None:
    pytest.skip("no nvidia-smi: not a GPU host", allow_module_level=True)


def td(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "topodoctor", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        timeout=120,
    )


def test_matrix_equals_nvidia_smi_topo() -> None:
    from topodoctor.probe.sources import probe_host
    from topodoctor.topology.topo_matrix import build_matrix, diff, parse_nvidia_smi

    theirs = parse_nvidia_smi(subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout)
    assert diff(build_matrix(probe_host().snapshot), theirs) == []


def test_replay_of_fresh_recording_equals_live(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rec = tmp_path / "rec.json"
    assert td("record", "-o", str(rec), "--no-scrub").returncode == 0
    from topodoctor.core.codec import to_jsonable
    from topodoctor.probe.sources import probe_host

    recorded = json.loads(rec.read_text())["snapshot"]
    assert to_jsonable(probe_host(str(rec)).snapshot) == recorded


def test_check_passes_on_this_host() -> None:
    r = td("check", "-f", "json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0, doc["reason"]
    assert not [f for f in doc["findings"] if f["severity"] in ("error", "critical")]


@pytest.mark.parametrize(
    ("env", "code"),
    [
        ({"NCCL_P2P_DISABLE": "1"}, "TD601"),
        ({"NCCL_P2P_LEVEL": "LOC"}, "TD602"),
        ({"NCCL_SHM_DISABLE": "1"}, "TD603"),
        ({"NCCL_SOCKET_IFNAME": "nosuch"}, "TD605"),
        ({"NCCL_IB_TIMEOUT": "40"}, "TD609"),
        ({"NCCL_ALGO": "Ring"}, "TD610"),
        ({"NCCL_PROTO": "LL128"}, "TD611"),
        ({"NCCL_IGNORE_DISABLED_P2P": "1"}, "TD612"),
        ({"NCCL_MAX_RINGS": "4"}, "TD613"),
        ({"NCCL_SOCKT_IFNAME": "eth0"}, "TD614"),
        ({"CUDA_VISIBLE_DEVICES": "0,99"}, "TD615"),
        ({"CUDA_VISIBLE_DEVICES": "0,0"}, "TD616"),
        ({"NCCL_TOPO_FILE": "/nonexistent.xml"}, "TD608"),
        ({"NCCL_TOPO_FILE": "/dev/zero"}, "TD608"),
        ({"NCCL_CONF_FILE": "/nonexistent.conf"}, "TD619"),
        ({"NCCL_P2P_DISABLE": "true"}, "TD620"),
        ({"NCCL_P2P_LEVEL": "nvl"}, "TD620"),
    ],
)
def test_env_rules_fire_on_this_host(env: dict[str, str], code: str) -> None:
    from topodoctor.probe.sources import probe_host

    snap = probe_host().snapshot
    if code in ("TD601", "TD602") and not any(link.active is True for g in snap.gpus for link in g.nvlinks):
        pytest.skip("P2P-off rules fire only on NVLink hosts")
    doc = json.loads(td("check", "-f", "json", env=env).stdout)
    assert code in {f["code"] for f in doc["findings"]}


def test_env_value_nccl_reads_as_zero_leaves_p2p_on() -> None:
    doc = json.loads(td("check", "-f", "json", env={"NCCL_P2P_DISABLE": "true"}).stdout)
    assert "TD601" not in {f["code"] for f in doc["findings"]}


def test_recording_keeps_the_recording_process_affinity(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Recorded under taskset on CPU 0, replayed unpinned: the replay judges CPU 0."""
    if shutil.which("taskset") is None:
        pytest.skip("no taskset")
    rec = tmp_path / "pinned.json"
    r = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-m", "topodoctor", "record", "-o", str(rec)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(rec.read_text())["process"]["cpu_affinity"] == [0]
    from topodoctor.probe.sources import probe_host

    process = probe_host(str(rec)).process
    assert process is not None and process.cpu_affinity == (0,)
