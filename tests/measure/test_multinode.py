"""Collectives across simulated nodes on gloo: separate processes with distinct node identities
(NCCL_HOSTID, as NCCL tells hosts apart) form one world, through torchrun's c10d rendezvous or
through the standard variables a launcher sets; the pairwise finder runs end to end, with one
node made slow by the test's own delay (tests/support/multinode_entry.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from collectives_support import NCCL_TESTS, time_limit
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.measure.collectives.world import free_port

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
ENTRY = str(ROOT / "tests" / "support" / "multinode_entry.py")
runner = CliRunner()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "SLURM_", "TOPODOCTOR_"))}
    env.update(PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore", **extra)
    return env


def _finish(procs: list[subprocess.Popen[bytes]], limit_s: float) -> list[int]:
    try:
        return [p.wait(timeout=limit_s) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.slow
def test_pairwise_names_the_slow_node_among_four(tmp_path: Path) -> None:
    """Four one-rank nodes; nodeC's all_reduces start 25 ms late. Round 1 pairs A-B and C-D;
    C-D is slow, so C and D are paired again with A and B: C stays slow, D passes. nodeE was
    expected and never came."""
    out = tmp_path / "world.json"
    port = str(free_port())
    args = ["collectives", "--backend", "gloo", "--op", "all_reduce,sendrecv", "--size", "64K", "--iters", "2"]
    args += ["--pairwise", "--pair-size", "1M", "--pair-tolerance", "0.8", "--replay", "h200-x2"]
    args += ["--expect-nodes", "nodeA,nodeB,nodeC,nodeD,nodeE", "--format", "json", "-o", str(out)]
    procs = []
    for k, node in enumerate("ABCD"):
        env = _env(
            RANK=str(k),
            WORLD_SIZE="4",
            LOCAL_RANK="0",
            LOCAL_WORLD_SIZE="1",
            GROUP_RANK=str(k),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            NCCL_HOSTID=f"node{node}",
            TOPODOCTOR_TEST_SLOW_MS="25" if node == "C" else "",
        )
        with open(tmp_path / f"rank{k}.out", "wb") as stdout, open(tmp_path / f"rank{k}.err", "wb") as stderr:
            procs.append(subprocess.Popen([sys.executable, ENTRY, *args], env=env, stdout=stdout, stderr=stderr))
    with time_limit(90):
        codes = _finish(procs, 80)
    # every rank leaves with the world's code: rank 0's verdict (nodeC slow, nodeE missing)
    assert codes == [1, 1, 1, 1], (tmp_path / "rank0.err").read_text()[-2000:]
    doc = json.loads(out.read_text())
    assert [(r["rank"], r["node"], r["node_rank"]) for r in doc["ranks"]] == [
        (0, "nodeA", 0),
        (1, "nodeB", 1),
        (2, "nodeC", 2),
        (3, "nodeD", 3),
    ]
    (rail,) = doc["spans"]  # one GPU per node: no intra-node figures, one rail across all four
    assert (rail["scope"], rail["nodes"]) == ("inter", ["nodeA", "nodeB", "nodeC", "nodeD"])
    assert {r["op"] for r in rail["rows"]} == {"all_reduce", "sendrecv"}
    verdicts = {v["node"]: v for v in doc["pairwise"]["verdicts"]}
    assert {n: v["verdict"] for n, v in verdicts.items()} == {
        "nodeA": "healthy",
        "nodeB": "healthy",
        "nodeC": "slow",
        "nodeD": "healthy",
        "nodeE": "failed_to_join",
    }
    assert verdicts["nodeC"]["slow_by"] > 0.8
    assert any("with nodeA" in e for e in verdicts["nodeC"]["evidence"])
    assert [r["pairs"] for r in doc["pairwise"]["rounds"]] == [
        [["nodeA", "nodeB"], ["nodeC", "nodeD"]],
        [["nodeC", "nodeA"], ["nodeD", "nodeB"]],
    ]
    printed = json.loads((tmp_path / "rank0.out").read_text())  # rank 0 reports for the world
    bad = sorted((f["code"], f["subject"]) for f in printed["findings"] if f["code"] == "TD010")
    assert bad == [("TD010", "node:nodeC"), ("TD010", "node:nodeE")]
    # the saved result reads back and reports the nodes
    shown = runner.invoke(app, ["collectives", "--from", str(out), "--replay", "h200-x2"])
    assert shown.exit_code == 1
    assert "nodeC: slow by" in shown.stdout and "nodeE: failed to join" in shown.stdout


@pytest.mark.slow
def test_two_torchrun_launches_form_one_world_of_two_nodes(tmp_path: Path) -> None:
    """torchrun's own c10d rendezvous: node ranks from the launcher, nodes from NCCL_HOSTID."""
    out = tmp_path / "world.json"
    port = str(free_port())
    run = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1"]
    run += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "td-test"]
    args = ["-m", "topodoctor", "collectives", "--backend", "gloo", "--op", "all_reduce", "--size", "4K"]
    args += ["--iters", "2", "--replay", "h200-x2", "--format", "json", "-o", str(out)]
    procs = []
    for k in (0, 1):
        env = _env(NCCL_HOSTID=f"host{k}")
        cmd = [*run, "--node-rank", str(k), *args]
        with open(tmp_path / f"node{k}.log", "wb") as log:
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    with time_limit(90):
        codes = _finish(procs, 80)
    assert codes == [0, 0], (tmp_path / "node0.log").read_text()[-2000:]
    doc: dict[str, Any] = json.loads(out.read_text())
    assert sorted((r["node"], r["node_rank"]) for r in doc["ranks"]) == [("host0", 0), ("host1", 1)]
    assert doc["world_size"] == 2 and doc["pairwise"] is None
    assert [(s["scope"], sorted(s["nodes"])) for s in doc["spans"]] == [("inter", ["host0", "host1"])]


def _ended(procs: list[subprocess.Popen[bytes]], limit_s: float) -> list[tuple[int, float]]:
    """Each process's exit code and when it ended (s since the call), all killed at limit_s."""
    t0, got = time.monotonic(), {}
    try:
        while len(got) < len(procs) and time.monotonic() - t0 < limit_s:
            for i, p in enumerate(procs):
                if i not in got and p.poll() is not None:
                    got[i] = (p.returncode, time.monotonic() - t0)
            time.sleep(0.05)
    finally:
        if len(got) < len(procs):
            _finish(procs, 0.1)
    return [got.get(i, (-9, limit_s)) for i in range(len(procs))]


@pytest.mark.slow
def test_four_torchrun_launches_all_end_together_with_the_worlds_code(tmp_path: Path) -> None:
    """Four torchrun launches of one node each, pairwise; rank 0 finds nodeE missing (exit 1).
    torchrun's agents wait for one another at exit only when their worker exited 0: ranks that
    left with their own codes (1, 0, 0, 0) kept three launches waiting on a store whose host
    had gone. Every launch now ends with the world's code, within a moment of the others."""
    port = str(free_port())
    run = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "4", "--nproc-per-node", "1"]
    run += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "td-four"]
    args = ["-m", "topodoctor", "collectives", "--backend", "gloo", "--op", "all_reduce", "--size", "4K"]
    args += ["--iters", "2", "--pairwise", "--pair-size", "64K", "--expect-nodes", "nodeA,nodeB,nodeC,nodeD,nodeE"]
    args += ["--replay", "h200-x2", "--format", "json"]
    procs = []
    for k, node in enumerate("ABCD"):
        with open(tmp_path / f"node{node}.out", "wb") as out, open(tmp_path / f"node{node}.err", "wb") as err:
            cmd = [*run, "--node-rank", str(k), *args]
            procs.append(subprocess.Popen(cmd, env=_env(NCCL_HOSTID=f"node{node}"), stdout=out, stderr=err))
    with time_limit(90):
        ended = _ended(procs, 80)
    codes, times = [c for c, _ in ended], [t for _, t in ended]
    assert codes == [1, 1, 1, 1], (tmp_path / "nodeB.err").read_text()[-2000:]
    assert max(times) - min(times) < 4.0, times
    doc = json.loads((tmp_path / "nodeA.out").read_text())
    assert {v["node"]: v["verdict"] for v in doc["pairwise"]["verdicts"]}["nodeE"] == "failed_to_join"


@pytest.mark.slow
def test_a_peer_dead_at_the_end_does_not_keep_the_others(tmp_path: Path) -> None:
    """n2 dies after its work, before the world agrees on its code: rank 0's report is out,
    its code says a rank left early (1), n1 learns that code through the store (not through
    gloo, which would wait for the dead peer), and nobody waits for n2."""
    args = ["collectives", "--backend", "gloo", "--op", "all_reduce", "--size", "4K", "--iters", "2"]
    args += ["--replay", "h200-x2", "--format", "json"]
    t0 = time.monotonic()
    codes = _launch(tmp_path, ["n0", "n1", "n2"], args, {"n2": {"TOPODOCTOR_TEST_DIE_AT_EXIT": "1"}})
    assert codes == [1, 1, 9], (tmp_path / "rank1.err").read_text()[-2000:]
    assert time.monotonic() - t0 < 60
    assert "rank 2 did not reach the end of the run" in (tmp_path / "rank0.err").read_text()
    assert json.loads((tmp_path / "rank0.out").read_text())["world_size"] == 3


@pytest.mark.slow
def test_a_rank_that_fails_mid_run_stops_the_world_and_is_named(tmp_path: Path) -> None:
    """n1 fails as all_gather begins (the test hook, standing in for an NCCL error): it says so
    on the world's store, the others stop where they wait instead of waiting out the op
    timeout, and rank 0 reports the rows it has and the failure, naming n1's rank and node."""
    args = ["collectives", "--backend", "gloo", "--op", "all_reduce,all_gather", "--size", "4K", "--iters", "2"]
    args += ["--op-timeout", "60", "--replay", "h200-x2", "--format", "json"]
    t0 = time.monotonic()
    codes = _launch(tmp_path, ["n0", "n1", "n2"], args, {"n1": {"TOPODOCTOR_COLL_FAULT": "error:1:all_gather"}})
    took = time.monotonic() - t0
    assert codes == [1, 1, 1], (tmp_path / "rank0.err").read_text()[-2000:]
    assert took < 30, took  # well inside the 60 s op timeout
    doc = json.loads((tmp_path / "rank0.out").read_text())
    assert [r["op"] for r in doc["rows"]] == ["all_reduce"]
    (fail,) = doc["failures"]
    assert (fail["kind"], fail["op"], fail["rank"]) == ("error", "all_gather", 1), fail
    assert fail["message"].startswith("n1: RuntimeError: test fault"), fail
    assert any(f["code"] == "TD005" and "n1" in f["message"] for f in doc["findings"]), doc["findings"]
    assert "rank 1 stopped" in (tmp_path / "rank1.err").read_text()


@pytest.mark.slow
def test_a_node_that_never_joins_is_named_and_the_others_finish(tmp_path: Path) -> None:
    """Elastic torchrun (--nnodes 1:2): the world starts without host1 after the last call, and
    --expect-nodes names it; host0 alone cannot be paired, so it is left undetermined."""
    port = str(free_port())
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1:2", "--nproc-per-node", "2"]
    cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "td-missing"]
    cmd += ["--rdzv-conf", "last_call_timeout=1", "-m", "topodoctor", "collectives", "--backend", "gloo"]
    cmd += ["--op", "all_reduce", "--size", "4K", "--iters", "2", "--pairwise", "--pair-size", "64K"]
    cmd += ["--expect-nodes", "host0,host1", "--replay", "h200-x2", "--format", "json"]
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        procs = [subprocess.Popen(cmd, env=_env(NCCL_HOSTID="host0"), stdout=out, stderr=err)]
    with time_limit(90):
        codes = _finish(procs, 80)
    assert codes == [1], (tmp_path / "err").read_text()[-2000:]
    doc = json.loads((tmp_path / "out").read_text())
    assert {v["node"]: v["verdict"] for v in doc["pairwise"]["verdicts"]} == {
        "host0": "undetermined",
        "host1": "failed_to_join",
    }
    assert [(f["code"], f["subject"]) for f in doc["findings"] if f["severity"] == "error"] == [("TD010", "node:host1")]


def _launch(tmp_path: Path, nodes: list[str], args: list[str], extra: dict[str, dict[str, str]]) -> list[int]:
    """One rank per simulated node, started with the variables a launcher sets."""
    port, procs = str(free_port()), []
    for k, node in enumerate(nodes):
        env = _env(RANK=str(k), WORLD_SIZE=str(len(nodes)), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
        env.update(
            GROUP_RANK=str(k), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, NCCL_HOSTID=node, **extra.get(node, {})
        )
        with open(tmp_path / f"rank{k}.out", "wb") as stdout, open(tmp_path / f"rank{k}.err", "wb") as stderr:
            procs.append(subprocess.Popen([sys.executable, ENTRY, *args], env=env, stdout=stdout, stderr=stderr))
    with time_limit(90):
        return _finish(procs, 80)


@pytest.mark.slow
def test_each_node_through_its_own_nics(tmp_path: Path) -> None:
    """--nic-loopback: each node's local rank 0 runs the node alone, in processes of its own with
    NCCL's P2P and SHM off (two CPU ranks on gloo), before the world forms."""
    out = tmp_path / "world.json"
    args = ["collectives", "--backend", "gloo", "--op", "all_reduce", "--size", "4K", "--iters", "2"]
    args += ["--nic-loopback", "--replay", "h200-x2", "--format", "json", "-o", str(out)]
    codes = _launch(tmp_path, ["n0", "n1"], args, {})
    assert codes == [0, 0], (tmp_path / "rank0.err").read_text()[-2000:]
    doc = json.loads(out.read_text())
    assert [(s["scope"], s["nodes"]) for s in doc["spans"]] == [
        ("inter", ["n0", "n1"]),
        ("nic", ["n0"]),
        ("nic", ["n1"]),
    ]
    for nic in doc["spans"][1:]:
        (row,) = nic["rows"]
        assert row["op"] == "all_reduce" and row["in_place"]["wrong"] == 0, nic["account"]
        assert nic["account"].startswith("Backend gloo")
    text = runner.invoke(app, ["collectives", "--from", str(out)]).stdout
    assert "through its own NICs (P2P and SHM off)" in text


def test_ranks_that_never_met_are_a_launch_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """nccl-tests' trap: every process alone in a world of one. Caught before any torch import."""
    for k, v in dict(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", NCCL_HOSTID="nodeB").items():
        monkeypatch.setenv(k, v)
    r = runner.invoke(app, ["collectives", "--backend", "gloo", "--expect-nodes", "nodeA,nodeB,nodeC"])
    assert r.exit_code == 2
    assert "launch error: the ranks never met" in r.output and "on nodeB" in r.output
    r = runner.invoke(app, ["collectives", "--backend", "gloo", "--pairwise"])
    assert r.exit_code == 2 and "world size 1" in r.output


def test_prometheus_from_a_saved_run(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    prom = tmp_path / "coll.prom"
    src = str(NCCL_TESTS / "all_reduce.json")
    r = runner.invoke(
        app,
        ["collectives", "--from", src, "--replay", "h200-x2", "--format", "prometheus", "--metrics", str(prom)],
    )
    assert r.exit_code == 0, r.output
    fams = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    busbw = [s for s in fams["topodoctor_collective_busbw_bytes_per_second"].samples if s.labels["op"] == "all_reduce"]
    assert busbw and all(s.labels["in_place"] in ("true", "false") for s in busbw)
    biggest = max(busbw, key=lambda s: int(s.labels["size_bytes"]))
    assert biggest.value > 1e11  # NVLink all_reduce on the H200 pair: hundreds of GB/s
    assert not list(tmp_path.glob("*.tmp*"))


@pytest.mark.slow
def test_ranks_report_their_nccl_settings_and_the_odd_node_is_named(tmp_path: Path) -> None:
    """Each rank's NCCL variables travel with its identity; n1 alone caps NCCL's channels (gloo
    ignores it, so the run itself is healthy) and TD013 names n1, not the per-node NCCL_HOSTID."""
    args = ["collectives", "--backend", "gloo", "--op", "all_reduce", "--size", "4K", "--iters", "2"]
    args += ["--replay", "h200-x2", "--format", "json"]
    codes = _launch(tmp_path, ["n0", "n1", "n2"], args, {"n1": {"NCCL_MAX_NCHANNELS": "1"}})
    assert codes == [1, 1, 1], (tmp_path / "rank0.err").read_text()[-2000:]
    doc = json.loads((tmp_path / "rank0.out").read_text())
    assert [r["env"].get("NCCL_MAX_NCHANNELS") for r in doc["ranks"]] == [None, "1", None]
    (td013,) = [f for f in doc["findings"] if f["code"] == "TD013"]
    assert td013["subject"] == "env:NCCL_MAX_NCHANNELS" and "rank 1 (node n1)" in td013["message"], td013


@pytest.mark.slow
def test_the_whole_run_keeps_to_its_budget_under_a_launcher(tmp_path: Path) -> None:
    """--timeout under a launcher: n1 lags 3 s in every timed loop (the test hook), the budget of
    14 s runs out mid-sweep, every rank stops and rank 0 reports the rows it has and the budget.
    The budget counts from each rank's exec, as in every command: this test's entry point imports
    torch before the command starts, seconds on a loaded machine."""
    args = ["collectives", "--backend", "gloo", "--op", "all_reduce", "--size", "4K:64K", "--iters", "2"]
    args += ["--timeout", "14", "--replay", "h200-x2", "--format", "json"]
    t0 = time.monotonic()
    codes = _launch(tmp_path, ["n0", "n1"], args, {"n1": {"TOPODOCTOR_COLL_FAULT": "slow:1:3000"}})
    took = time.monotonic() - t0
    assert codes == [1, 1], (tmp_path / "rank0.err").read_text()[-2000:]
    doc = json.loads((tmp_path / "rank0.out").read_text())
    (fail,) = doc["failures"]
    assert fail["kind"] == "hang" and "time budget ran out" in fail["message"], fail
    assert 0 < len(doc["rows"]) < 5, doc["rows"]
    assert took < 30, took
