"""The topology's busbw model (topodoctor/topology/busbw.py) held against nccl-tests on the H200
hosts (fixtures/nccl-tests/h200-measured-1g.json, from the hardware facts), NCCL's own constants,
and `collectives --predict` on a recording (no GPU, no torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.sources import probe_host
from topodoctor.topology.busbw import (
    FILL_STEPS,
    algorithm_busbw,
    bottleneck,
    channel_fill,
    nccl_link_gbps,
    predict,
)

ROOT = Path(__file__).resolve().parents[2]
MEASURED = json.loads((ROOT / "fixtures" / "nccl-tests" / "h200-measured-1g.json").read_text())["hosts"]
TOLERANCE = 0.10


def _eight_from_four() -> HostSnapshot:
    """An 8-GPU H200 host: the h200-x4 recording's four GPUs and a copy of each as GPUs 4-7
    (new index and bus id). The x8 host has the same 18-link NVSwitch GPUs; no recording of it ships."""
    snap = probe_host("h200-x4").snapshot
    extra = tuple(replace(g, index=g.index + 4, bus_id=f"0000:{0x80 + g.index:02x}:00.0") for g in snap.gpus)
    return replace(snap, gpus=snap.gpus + extra)


def _host(name: str) -> HostSnapshot:
    return _eight_from_four() if name == "h200-x8" else probe_host(name).snapshot


@pytest.mark.parametrize("host", sorted(MEASURED))
def test_model_within_ten_percent_of_nccl_tests_at_1g(host: str) -> None:
    snap = _host(host)
    preds = {p.op: p for p in predict(snap)}
    assert len(snap.gpus) == MEASURED[host]["gpus"]
    for op, (low, high) in MEASURED[host]["busbw_gbps"].items():
        got = preds[op].busbw_gbps
        for measured in (low, high):
            assert abs(got / measured - 1) <= TOLERANCE, f"{host} {op}: model {got} vs measured {measured}"


def test_bottleneck_is_nccls_link_rate_and_channel_fill() -> None:
    b = bottleneck(probe_host("h200-x4").snapshot)
    assert b is not None
    assert b.gbps == pytest.approx(18 * 20.6)  # topo.h SM90_NVLINK_BW, not the 26.6 GB/s signalled
    assert b.ring_gbps == 360.0  # what NCCL's own cost table shows for ring/simple on these hosts
    assert "NVSwitch" in b.what and b.gpus == (0, 1, 2, 3)


def test_the_ring_cost_matches_nccls_own_table() -> None:
    # NCCL 2.28.9 on the x2 host printed AllReduce Ring/Simple 360.0 GB/s (fixtures/nccl-logs/subsys-all)
    from topodoctor.nccl.account import read_logs

    acc = read_logs(ROOT / "fixtures" / "nccl-logs" / "subsys-all")
    assert acc is not None and acc.graphs[0].startswith("ring 12 ch x 30/30")
    b = bottleneck(probe_host("h200-x2").snapshot)
    assert b is not None and b.ring_gbps == 12 * 30.0


def test_channel_fill_and_link_rates() -> None:
    assert channel_fill(370.8) == 360.0
    assert channel_fill(48.0) == 48.0  # PCIe Gen5 x16 as NCCL rates it: 2 channels of 24
    assert channel_fill(24.0) == 24.0
    g = probe_host("h200-x4").snapshot.gpus[0]
    assert nccl_link_gbps(replace(g, compute_capability="8.0")) == 20.0
    assert nccl_link_gbps(replace(g, compute_capability="10.0")) == 40.1
    assert nccl_link_gbps(replace(g, compute_capability="9.0")) == 20.6


def test_more_ranks_pay_less_pipeline_fill() -> None:
    two = {p.op: p.efficiency for p in predict(probe_host("h200-x2").snapshot)}
    four = {p.op: p.efficiency for p in predict(probe_host("h200-x4").snapshot)}
    assert two["all_gather"] == pytest.approx(1 / (1 + FILL_STEPS))
    assert two["all_gather"] < four["all_gather"] < 1 and two["all_reduce"] < four["all_reduce"]
    assert two["broadcast"] == four["broadcast"] == 1.0


def test_a_gpu_with_links_down_is_the_bottleneck() -> None:
    b = bottleneck(probe_host("fixtures/derived/x4-nvlink-down.json").snapshot)
    assert b is not None and b.gbps < 18 * 20.6 and b.gpus != (0, 1, 2, 3)
    assert str(b.gpus[0]) in b.what


def test_pcie_host_and_a_subset() -> None:
    snap = probe_host("fixtures/derived/pcie-2socket.json").snapshot
    b = bottleneck(snap)
    assert b is not None and "PCIe" in b.what
    preds = predict(snap, gpus=(0, 1))
    assert preds and preds[0].ranks == 2


def test_algorithms_nccls_factors() -> None:
    snap = probe_host("h200-x4").snapshot
    ring = algorithm_busbw(snap, "all_reduce", "ring")
    tree = algorithm_busbw(snap, "all_reduce", "tree")
    assert ring is not None and tree == pytest.approx(360.0 * 0.92)
    assert algorithm_busbw(snap, "broadcast", "tree") is None  # tuning.cc: broadcast is ring only
    assert algorithm_busbw(snap, "all_reduce", "nvls") == pytest.approx(360.0 * 0.85 * 2)


def test_single_gpu_has_no_prediction() -> None:
    assert predict(probe_host("h100-x1").snapshot) == ()


def test_predict_cli_runs_without_gpu_or_torch() -> None:
    code = (
        "import sys; from topodoctor.cli.commands import main; "
        "rc = main(['collectives', '--predict', '--replay', 'h200-x4', '--format', 'json']); "
        "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    got = {p["op"]: p["busbw_gbps"] for p in doc["predictions"]}
    assert got["all_reduce"] == pytest.approx(345.6) and set(got) >= {"all_gather", "sendrecv", "broadcast"}


def _predict(*args: str, columns: str = "") -> subprocess.CompletedProcess[str]:
    code = "import sys; from topodoctor.cli.commands import main; "
    code += f"sys.exit(main(['collectives', '--predict', {', '.join(repr(a) for a in args)}]))"
    env = dict(os.environ, COLUMNS=columns) if columns else None
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)


def test_predict_cli_on_one_gpu_is_could_not_check() -> None:
    r = _predict("--replay", "h100-x1")
    assert (
        r.returncode == 3
        and r.stderr.strip() == "topodoctor: error: no prediction: 1 GPU on this host; a collective needs 2"
    )


def test_predict_across_nodes_without_an_rdma_nic_names_that_one_cause() -> None:
    r = _predict("--nodes", "4", "--replay", "h200-x4")
    assert r.returncode == 3 and r.stderr.count("\n") == 1, r.stderr
    assert "no prediction: this host has no RDMA NIC (InfiniBand or RoCE) to join 4 nodes by" in r.stderr
    assert ", or " not in r.stderr  # one cause, not a list of guesses


@pytest.mark.slow
def test_predict_text_has_units_and_says_which_link_rate_it_uses() -> None:
    r = _predict("--replay", "h200-x4", columns="100")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert any("busbw (GB/s)" in line for line in lines)
    text = r.stdout.replace("\n#   ", " ")
    assert "20.6 GB/s per NVLink is NCCL's own model of the link" in text
    assert "`scan` shows 26.56 GB/s, the link's signalling rate" in text
    doc = json.loads(_predict("--replay", "h200-x4", "--format", "json").stdout)
    assert doc["nvlink_per_link"] == {"nccl_model_gbps": 20.6, "signalling_gbps": 26.5625}


def test_across_nodes_the_slowest_gpus_nic_share_bounds_the_ring() -> None:
    snap = probe_host("fixtures/derived/hgx-8gpu-2socket.json").snapshot  # 8 GPUs, 8 x 400 Gb/s NICs
    healthy = bottleneck(snap, nodes=2)
    assert healthy is not None and "NVSwitch" in healthy.what  # 8 x 50 GB/s of NICs outrun the NVLinks
    first = snap.nics[0].name
    slow = replace(snap, nics=tuple(replace(n, rate_gbps=100.0) if n.name == first else n for n in snap.nics))
    b = bottleneck(slow, nodes=2)
    assert b is not None and b.gbps == pytest.approx(8 * 12.5) and first in b.what
    assert predict(probe_host("h200-x4").snapshot, nodes=2) == ()  # no RDMA NIC: nothing to say across nodes
