"""`collectives --algo` and `--scaling` under a launcher, on gloo: processes started as torchrun
starts them (one rank each, "nodes" told apart by NCCL_HOSTID), each run of the sweep a process
group of that world, rank 0 reporting. gloo ignores NCCL_ALGO; what is checked is the plumbing
(the variable set on every rank while a run's group is made, restored after), the groups, the
tables and JSON, the exit codes, and that a failure in one run is reported, not hung."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.measure.test_multinode import _launch
from topodoctor.measure.collectives.sweeps import joined_runs
from topodoctor.model.collective_ops import Plan
from topodoctor.model.collectives import load_result
from topodoctor.nccl.account import account

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
FAILURES = ROOT / "fixtures" / "nccl-logs" / "failures"
BASE = ["collectives", "--backend", "gloo", "--iters", "2", "--replay", "h200-x2"]
SMALL = [*BASE, "--size", "64K"]


def _rank0(tmp_path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((tmp_path / "rank0.out").read_text())
    return doc


def test_runs_in_a_launched_world_in_the_order_the_sweeps_ask() -> None:
    plan = Plan(ops=("all_reduce", "broadcast", "sendrecv"), sizes=(1 << 16,))
    runs = joined_runs(plan, ["ring", "tree", "pat"], True, 4)
    assert [(r.kind, r.label, r.ranks) for r in runs] == [
        ("algo", "default", (0, 1, 2, 3)),
        ("algo", "ring", (0, 1, 2, 3)),
        ("algo", "tree", (0, 1, 2, 3)),
        ("scaling", "0,1", (0, 1)),
        ("scaling", "2,3", (2, 3)),
        ("scaling", "0,1,2,3", (0, 1, 2, 3)),
    ]  # pat serves none of these ops: no run
    assert [r.env for r in runs[:3]] == [{}, {"NCCL_ALGO": "ring"}, {"NCCL_ALGO": "tree"}]
    assert runs[2].plan.ops == ("all_reduce",) and runs[1].plan.ops == ("all_reduce", "broadcast")


@pytest.mark.slow
def test_algo_under_a_launcher(tmp_path: Path) -> None:
    """Each algorithm's run is a group of the world made with NCCL_ALGO set on every rank, and
    destroyed before the variable is restored; rank 0 prints the same tables as a spawned run."""
    log = tmp_path / "groups.log"
    args = [*SMALL, "--op", "all_reduce,broadcast", "--algo", "ring,tree", "--format", "json"]
    codes = _launch(tmp_path, ["n0", "n1"], args, {n: {"TOPODOCTOR_TEST_GROUP_LOG": str(log)} for n in ("n0", "n1")})
    assert codes == [0, 0], (tmp_path / "rank0.err").read_text()[-2000:]
    doc = _rank0(tmp_path)["algorithms"]
    assert doc["algorithms"] == ["ring", "tree"] and doc["failures"] == [] and doc["crossovers"] is not None
    cells = {(c["op"], c["algorithm"]): c for c in doc["cells"]}
    assert sorted(cells) == [
        ("all_reduce", "default"),
        ("all_reduce", "ring"),
        ("all_reduce", "tree"),
        ("broadcast", "default"),
        ("broadcast", "ring"),
    ]  # tree serves all_reduce only
    assert all(c["busbw_gbps"] and c["size_bytes"] == 1 << 16 for c in cells.values())
    assert (tmp_path / "rank1.out").read_text() == ""  # rank 0 reports for the world
    lines = log.read_text().splitlines()
    # Each run: the bookkeeping group made before the variable is set, the measured group after it.
    per_rank = [
        "new_group 0,1 NCCL_ALGO=-",
        "new_group 0,1 NCCL_ALGO=-",
        "destroyed NCCL_ALGO=-",
        "destroyed NCCL_ALGO=-",
    ]
    for algo in ("ring", "tree"):
        per_rank += ["new_group 0,1 NCCL_ALGO=-", f"new_group 0,1 NCCL_ALGO={algo}"]
        per_rank += [f"destroyed NCCL_ALGO={algo}", f"destroyed NCCL_ALGO={algo}"]
    assert sorted(lines[: len(per_rank) * 2]) == sorted(per_rank * 2), lines
    assert all(line.endswith("NCCL_ALGO=-") for line in lines[len(per_rank) * 2 :])  # restored after


@pytest.mark.slow
def test_scaling_under_a_launcher(tmp_path: Path) -> None:
    args = [*SMALL, "--op", "all_reduce", "--scaling"]
    codes = _launch(tmp_path, ["n0", "n1", "n2", "n3"], args, {})
    text = (tmp_path / "rank0.out").read_text()
    assert len(set(codes)) == 1 and codes[0] == (1 if "# SLOW" in text else 0), (codes, text)
    assert "# busbw (GB/s) per group of ranks" in text
    for group in ("ranks 0,1 ", "ranks 2,3 ", "ranks 0,1,2,3 "):
        assert group in text, text
    assert "# scaling efficiency: median busbw of each group size / that of 2 ranks" in text
    assert "  4 ranks all_reduce" in text and "FAILED" not in text


@pytest.mark.slow
def test_a_hang_in_one_run_is_reported_and_the_runs_before_kept(tmp_path: Path) -> None:
    """Rank 2 of the three-rank group never joins its all_reduce (the test hook; the group's
    rank 2 exists in that run only): every rank stops within the op timeout and a poll, rank 0
    reports the two-rank run and the hang, and every process leaves with exit 1."""
    args = [*SMALL, "--op", "all_reduce", "--scaling", "--op-timeout", "3", "--format", "json"]
    fault = {"TOPODOCTOR_COLL_FAULT": f"hang:2:all_reduce:{1 << 16}"}
    t0 = time.monotonic()
    codes = _launch(tmp_path, ["n0", "n1", "n2"], args, {n: fault for n in ("n0", "n1", "n2")})
    assert codes == [1, 1, 1], (tmp_path / "rank0.err").read_text()[-2000:]
    assert time.monotonic() - t0 < 40
    runs = _rank0(tmp_path)["scaling"]["runs"]
    assert [r["gpus"] for r in runs] == [[0, 1], [0, 1, 2]]
    assert runs[0]["failures"] == [] and runs[0]["busbw"][0][2] > 0
    (hang,) = runs[1]["failures"]
    assert "all_reduce at 64K did not finish within 3 s" in hang, hang
    assert runs[1]["busbw"][0][2] is None


@pytest.mark.slow
def test_a_failure_every_member_meets_is_that_runs_and_the_next_goes_on(tmp_path: Path) -> None:
    """Both ranks refuse broadcast (as NCCL refuses a forced algorithm on every rank): the default
    and ring runs fail on it, keep their all_reduce rows, and the tree run still runs."""
    args = [*SMALL, "--op", "all_reduce,broadcast", "--algo", "ring,tree", "--format", "json"]
    fault = {"TOPODOCTOR_COLL_FAULT": "error:0:broadcast,error:1:broadcast"}
    codes = _launch(tmp_path, ["n0", "n1"], args, {"n0": fault, "n1": fault})
    assert codes == [1, 1], (tmp_path / "rank0.err").read_text()[-2000:]
    doc = _rank0(tmp_path)["algorithms"]
    assert [f.split(":")[0] for f in doc["failures"]] == ["default", "ring"]
    assert all("test fault" in f for f in doc["failures"])
    bw = {(c["op"], c["algorithm"]): c["busbw_gbps"] for c in doc["cells"]}
    assert bw[("broadcast", "default")] is None and bw[("broadcast", "ring")] is None
    assert all(bw[("all_reduce", a)] for a in ("default", "ring", "tree"))


@pytest.mark.slow
def test_a_failure_of_one_rank_stops_the_sweep_and_names_it(tmp_path: Path) -> None:
    args = [*SMALL, "--op", "all_reduce,broadcast", "--algo", "ring,tree", "--op-timeout", "20", "--format", "json"]
    t0 = time.monotonic()
    codes = _launch(tmp_path, ["n0", "n1"], args, {"n1": {"TOPODOCTOR_COLL_FAULT": "error:1:broadcast"}})
    assert codes == [1, 1], (tmp_path / "rank0.err").read_text()[-2000:]
    assert time.monotonic() - t0 < 20  # inside the op timeout: the store's alarm stopped rank 0
    doc = _rank0(tmp_path)["algorithms"]
    default, ring, tree = doc["failures"]
    assert default.startswith("default: n1: RuntimeError: test fault: rank 1 refused broadcast")
    assert ring.startswith("ring: not run: the sweep stopped at run default (n1: RuntimeError")
    assert tree.startswith("tree: not run")
    bw = {(c["op"], c["algorithm"]): c["busbw_gbps"] for c in doc["cells"]}
    assert bw[("all_reduce", "default")]  # the row done before the failure is kept


@pytest.mark.slow
def test_the_budget_holds_under_a_launcher(tmp_path: Path) -> None:
    args = [*BASE, "--op", "all_reduce", "--size", "4K:64K", "--algo", "ring,tree", "--timeout", "12"]
    args += ["--format", "json"]
    t0 = time.monotonic()
    codes = _launch(tmp_path, ["n0", "n1"], args, {"n1": {"TOPODOCTOR_COLL_FAULT": "slow:1:2000"}})
    assert codes == [1, 1], (tmp_path / "rank0.err").read_text()[-2000:]
    assert time.monotonic() - t0 < 35
    fails = _rank0(tmp_path)["algorithms"]["failures"]
    assert any("time budget ran out" in f for f in fails), fails
    assert fails[-1].startswith("tree: not run"), fails


def test_nccls_account_of_one_run_is_its_part_of_rank_0s_log(tmp_path: Path) -> None:
    """Under a launcher one NCCL log holds every run's communicators: each run's account is the
    part written while it ran (here a real ring run's log followed by a real tree run's)."""
    from dataclasses import replace

    from topodoctor.measure.collectives.sweep_world import _with_account

    ring = (FAILURES / "algo-ring" / "info" / "rank0.txt").read_bytes()
    tree = (FAILURES / "algo-tree" / "info" / "rank0.txt").read_bytes()
    log = tmp_path / "nccl.0.log"
    log.write_bytes(ring + tree)
    res = replace(load_result(ROOT / "fixtures" / "collectives" / "derived" / "x2-healthy.json"), nccl=None)
    got = _with_account(res, [len(ring), len(ring) + len(tree)], str(log))
    assert got.nccl is not None and {c.algorithm for c in got.nccl.choices} == {"Tree"}
    whole = account([(ring + tree).decode()])
    assert whole is not None and {c.algorithm for c in whole.choices} == {"Ring", "Tree"}  # both runs mixed
    assert _with_account(res, [None, None], str(log)).nccl is None  # no span: rank 0 not in the run
