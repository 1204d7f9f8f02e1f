"""TD010-TD012 on multi-node scenarios derived from real results (fixtures/derive_multinode.py),
and the pieces they read: node identity, rails, the report's node lines."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from collectives_support import FIXTURES

from topodoctor.measure.collectives.nodes import Member, node_name, node_rank, node_ranks, nodes_of, rails
from topodoctor.model.collectives import load_result
from topodoctor.report.collectives_nodes import node_lines
from topodoctor.service.collectives import judge

MULTI = FIXTURES / "collectives" / "multinode"
SCENARIOS = json.loads((MULTI / "index.json").read_text())


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s["name"])
def test_scenario_raises_exactly_its_codes(sc: dict) -> None:  # type: ignore[type-arg]
    res = load_result(MULTI / sc["file"])
    codes = sorted({f.code for f in judge(res, None)})
    assert codes == sc["codes"], sc["change"]


def test_findings_name_the_node_and_the_rail() -> None:
    slow = judge(load_result(MULTI / "hgx-4nodes-pairwise-slow.json"), None)
    (f,) = [f for f in slow if f.code == "TD010"]
    assert f.subject == "node:nodeC" and f.evidence["verdict"] == "slow" and f.evidence["slow_by"] == 0.5
    rail = [f for f in judge(load_result(MULTI / "hgx-2nodes-rail-socket.json"), None) if f.code == "TD011"]
    assert {f.subject for f in rail} == {"rail:local rank 0", "rail:local rank 1"}
    assert all(f.evidence["expected_gbps"] == 50.0 for f in rail)
    intra = [f for f in judge(load_result(MULTI / "hgx-2nodes-intra-maxch1.json"), None) if f.code == "TD012"]
    assert {f.subject for f in intra} == {"node:nodeB"}


def test_report_gives_each_node_and_rail_apart() -> None:
    lines = node_lines(load_result(MULTI / "hgx-4nodes-pairwise-slow.json"))
    text = "\n".join(lines)
    assert "#   nodeA (node rank 0, host nodea): ranks 0 1" in text
    assert "# busbw within each node" in text and "# busbw between nodes" in text
    assert "#   local rank 1 (nodeA nodeB nodeC nodeD): all_reduce 45.0, all_gather 45.0" in text
    assert "nodeC: slow by 50%" in text


@pytest.mark.slow
def test_derived_fixtures_are_reproducible() -> None:
    script = FIXTURES / "derive_multinode.py"
    r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_node_identity_and_grouping() -> None:
    assert node_name({"NCCL_HOSTID": "nodeB"}) == "nodeB"
    assert node_rank({"GROUP_RANK": "3"}) == 3 and node_rank({"SLURM_NODEID": "7"}) == 7 and node_rank({}) is None
    # two nodes of 2 ranks and one of 1, ranks interleaved as srun --distribution=cyclic gives them
    mems = [Member(0, 0, "b", None, 5), Member(1, 0, "a", None, 5), Member(2, 1, "b", None, 5)]
    mems += [Member(3, 1, "a", None, 5), Member(4, 0, "c", None, 5)]
    assert nodes_of(mems) == {"b": [0, 2], "a": [1, 3], "c": [4]}
    assert node_ranks(mems) == {"b": 0, "a": 1, "c": 2}
    assert rails(mems) == [[0, 1, 4], [2, 3]]
    given = [Member(0, 0, "b", 1, 2), Member(1, 0, "a", 0, 2)]
    assert list(nodes_of(given)) == ["a", "b"] and node_ranks(given) == {"a": 0, "b": 1}
