"""The ninth blind set (fixtures/diagnose/holdout9), scored once and now a development set: a link's own rate
said in words ("whose highest bandwidth is around 1000 Mbit/s", the rate restated later) is the NIC's, not a
figure of the run; and nodes joined by a gigabit network, said of a slow multi-node run, name that network as
its likeliest bound."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.evidence.prose import read
from topodoctor.model.findings import Finding

SET = FIXTURES / "diagnose" / "holdout9"
GIGABIT_POST = (SET / "d9-06" / "evidence-1.txt").read_text()  # fairscale on 1 GbE NICs


def _findings(text: str) -> list[Finding]:
    return list(judge(join([read_input("post.txt", text)])))


def _roles(text: str) -> list[tuple[str, str]]:
    block = read(text.splitlines(), (), 1)
    assert block is not None
    return [(f.text, f.role) for c in block.parts.prose for f in c.figures]


def test_a_nics_highest_rate_is_the_nics_not_the_runs() -> None:
    assert _roles("My NIC is a GB NIC, whose highest bandwidth is around 1000 Mbit/s.") == [("1000 Mbit/s", "nic")]
    # what a run got over the network stays the run's
    assert _roles("Over our 100 Gbps network we got around 60 Gbps with all_reduce_perf.")[1][1] == "measured"


def test_a_rate_stated_for_the_network_and_said_again_is_the_line() -> None:
    text = "network: 10Gbps (neither InfiniBand nor RoCE)\nI think the 10Gbps bandwidth is not fully used.\n"
    assert [r for _, r in _roles(text)] == ["nic", "nic"]


def test_a_slow_multi_node_run_over_gigabit_names_the_network() -> None:
    found = [f for f in _findings(GIGABIT_POST) if f.severity == "warning"]
    assert len(found) == 1 and "1 Gb/s network" in found[0].message and "RDMA" in found[0].message
    faster = GIGABIT_POST.replace("GB NIC", "100G NIC").replace("1000 Mbit/s", "100 Gbit/s")
    assert not [f for f in _findings(faster) if "Gb/s network" in f.message]


def test_a_figure_per_node_count_judges_the_run_at_the_most_nodes() -> None:
    text = (SET / "d9-02" / "evidence-1.txt").read_text() + "\n" + (SET / "d9-02" / "evidence-2.txt").read_text()
    block = read(text.splitlines(), (), 1)
    assert block is not None
    nodes = [(f.gbps, f.nodes) for c in block.parts.prose for f in c.figures if f.role == "measured"]
    assert (70.0, 3) in nodes and (40.0, 6) in nodes
    lead = [f for f in _findings(text) if f.severity == "warning"]
    assert lead and "40.0 GB/s" in lead[0].message and "cause not found" in lead[0].message
