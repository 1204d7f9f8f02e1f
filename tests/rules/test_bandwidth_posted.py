"""`bandwidth --from` on another tool's copy matrices (rules/bandwidth_posted.py): the real
p2pBandwidthLatencyTest and nvbandwidth output of the 4 x H200 host, judged against that host's
recording by the same rules as topodoctor's own copies; without a host, one line saying what is missing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.model.copies import Stats
from topodoctor.model.copies import load_result as load_bw
from topodoctor.service.copies import bandwidth_findings

ROOT = Path(__file__).resolve().parents[2]
POSTED = ROOT / "fixtures/evidence/h200-x4"  # reference-outputs/h200-x4, as the tools printed them
OWN = ROOT / "fixtures/bandwidth/h200-x4.full.json"  # topodoctor's own copies on the same host
runner = CliRunner()


def _judge(path: Path, *more: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    r = runner.invoke(app, ["bandwidth", "--from", str(path), *more, "-f", "json"])
    return r.exit_code, (json.loads(r.stdout) if r.exit_code in (0, 1) else {"error": r.stderr})


def _oneway(doc: dict, src: int, dst: int) -> float:  # type: ignore[type-arg]
    (m,) = [m for m in doc["measurements"] if (m["mode"], m["src"], m["dst"]) == ("oneway", src, dst)]
    return float(m["value"]["median"])


def test_a_healthy_posted_matrix_is_judged_healthy_with_its_directions_kept() -> None:
    code, doc = _judge(POSTED / "p2pbw.txt", "--replay", "h200-x4")
    assert code == 0 and doc["findings"] == []
    assert len(doc["measurements"]) == 12  # the P2P writes matrix; the staged, bidirectional and latency ones left out
    assert _oneway(doc, 0, 1) == 361.60 and _oneway(doc, 1, 0) == 391.77  # writes: row's GPU -> column's
    code, doc = _judge(POSTED / "nvb.txt", "--replay", "h200-x4")
    assert code == 0 and doc["findings"] == []
    assert _oneway(doc, 1, 0) == 393.98  # read_ce's row 0, column 1: GPU0 reads GPU1's data
    modes = {m["mode"] for m in doc["measurements"]}
    assert modes == {"oneway", "sm_oneway", "h2d", "d2h"}


def test_a_slow_pair_in_a_posted_matrix_gets_what_topodoctors_own_copies_get(tmp_path: Path) -> None:
    text = (POSTED / "p2pbw.txt").read_text()
    row = "     1 391.77 4000.96 392.41 392.08 "
    assert row in text
    slow = tmp_path / "p2pbw-slow-pair.txt"
    slow.write_text(text.replace(row, "     1 391.77 4000.96 121.30 392.08 "))
    code, doc = _judge(slow, "--replay", "h200-x4")
    assert code == 1
    posted = {(f["code"], f["subject"], f["severity"]) for f in doc["findings"]}
    assert ("TD701", "GPU1-GPU2", "error") in posted
    (td701,) = [f for f in doc["findings"] if f["code"] == "TD701"]
    assert td701["cause"]["ruled_out"]  # the cause engine examined it, as for a result of ours
    # topodoctor's own result of that host with the same pair as slow: the same findings
    own = load_bw(OWN)
    ms = tuple(
        replace(m, value=Stats(121.3, 121.3, 121.3, (121.3,))) if (m.mode, m.src, m.dst) == ("oneway", 1, 2) else m
        for m in own.measurements
    )
    mine = {(f.code, f.subject, f.severity) for f in bandwidth_findings(replace(own, measurements=ms))}
    assert posted <= mine


def test_without_the_host_it_ran_on_one_line_says_what_is_missing() -> None:
    r = runner.invoke(app, ["bandwidth", "--from", str(POSTED / "p2pbw.txt")])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert "p2pBandwidthLatencyTest output" in line and "--replay NAME|FILE" in line and "diagnose" in line
    # a host that is not the one the matrix was measured on: its GPUs' bus ids say so
    r = runner.invoke(app, ["bandwidth", "--from", str(POSTED / "nvb.txt"), "--replay", "h200-x2"])
    assert r.exit_code == 2 and "GPUs 2, 3" in r.stderr and "not GPUs of the host given" in r.stderr


def test_a_peer_copy_slower_than_the_same_copy_staged_is_named(tmp_path: Path) -> None:
    """p2pBandwidthLatencyTest's P2P=Disabled matrix is what TD702 weighs a peer copy by: GPU1->GPU2 at
    30 GB/s with peer access, 38.9 staged (the real figure), as NVIDIA/nccl#814's ACS case reads."""
    text = (POSTED / "p2pbw.txt").read_text()
    slow = tmp_path / "p2pbw-p2p-below-staged.txt"
    slow.write_text(text.replace("     1 391.77 4000.96 392.41 392.08 ", "     1 391.77 4000.96  30.10 392.08 "))
    code, doc = _judge(slow, "--replay", "h200-x4")
    assert code == 1
    (td702,) = [f for f in doc["findings"] if f["code"] == "TD702"]
    assert td702["subject"] == "GPU1-GPU2" and td702["evidence"] == {"p2p_gbps": 30.1, "staged_gbps": 38.93}
    assert "the same copy staged through host memory (P2P=Disabled)" in td702["message"]
    _, healthy = _judge(POSTED / "p2pbw.txt", "--replay", "h200-x4")
    assert "TD702" not in {f["code"] for f in healthy["findings"]}
