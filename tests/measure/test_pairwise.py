"""The bad-node finder's logic: rounds of disjoint pairs, re-pairing with nodes that passed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from topodoctor.model.pairwise import NodeVerdict, PairOutcome, PairwiseFinder, check_launch

Measure = Callable[[str, str], PairOutcome]


def network(
    speed: dict[str, float], hung: frozenset[str] = frozenset(), failed: frozenset[str] = frozenset()
) -> Measure:
    """A pair runs at the pace of its slower node (busbw 100 GB/s for a healthy pair)."""

    def run(a: str, b: str) -> PairOutcome:
        if {a, b} & hung:
            return PairOutcome(a, b, "hung", error="timeout after 30 s")
        if {a, b} & failed:
            return PairOutcome(a, b, "failed", error="NCCL error: unhandled system error")
        return PairOutcome(a, b, "ok", 100.0 * min(speed.get(a, 1.0), speed.get(b, 1.0)))

    return run


def drive(finder: PairwiseFinder, measure: Measure) -> dict[str, NodeVerdict]:
    while (rnd := finder.next_round()) is not None:
        assert len({n for p in rnd.pairs for n in p}) == 2 * len(rnd.pairs), "pairs of a round are disjoint"
        finder.record(measure(a, b) for a, b in rnd.pairs)
    return {v.node: v for v in finder.verdicts()}


NODES = [f"n{i}" for i in range(6)]


def test_a_slow_node_is_named_not_its_pair() -> None:
    f = PairwiseFinder(NODES, NODES)
    v = drive(f, network({"n3": 0.8}))
    assert {n: x.verdict for n, x in v.items()} == {**{n: "healthy" for n in NODES}, "n3": "slow"}
    assert v["n3"].slow_by == pytest.approx(0.2)
    assert len(f.rounds) == 2 and f.rounds[1].pairs == (("n2", "n0"), ("n3", "n1"))
    assert "round 2 with n1: busbw 80.0 GB/s (80% of 100.0)" in v["n3"].evidence


def test_a_node_within_tolerance_is_healthy() -> None:
    v = drive(PairwiseFinder(NODES, NODES), network({"n3": 0.93}))
    assert all(x.verdict == "healthy" for x in v.values())


def test_two_bad_nodes_in_one_pair_are_both_named() -> None:
    v = drive(PairwiseFinder(NODES, NODES), network({"n2": 0.7, "n3": 0.5}))
    assert (v["n2"].verdict, v["n3"].verdict) == ("slow", "slow")
    assert v["n2"].slow_by == pytest.approx(0.3) and v["n3"].slow_by == pytest.approx(0.5)


def test_hung_and_failed_nodes() -> None:
    v = drive(PairwiseFinder(NODES, NODES), network({}, hung=frozenset({"n1"}), failed=frozenset({"n4"})))
    assert v["n1"].verdict == "hung" and "timeout after 30 s" in v["n1"].evidence[-1]
    assert v["n4"].verdict == "failed"
    assert {v[n].verdict for n in ("n0", "n2", "n3", "n5")} == {"healthy"}


def test_a_node_that_never_joined_and_the_odd_one_out() -> None:
    nodes = [*NODES, "n6", "n7"]
    f = PairwiseFinder(nodes, [n for n in nodes if n != "n7"])
    v = drive(f, network({}))
    assert v["n7"].verdict == "failed_to_join"
    assert f.rounds[0].idle == ("n6",) and v["n6"].verdict == "healthy"  # tested in round 2 with a good node


def test_more_suspects_than_good_nodes_take_more_rounds() -> None:
    nodes = [f"n{i}" for i in range(8)]
    speed = {"n1": 0.6, "n3": 0.6, "n5": 0.6}
    f = PairwiseFinder(nodes, nodes, expected_gbps=100.0)
    v = drive(f, network(speed))
    assert {n for n, x in v.items() if x.verdict == "slow"} == {"n1", "n3", "n5"}
    assert all(v[n].verdict == "healthy" for n in ("n0", "n2", "n4", "n6", "n7"))
    assert len(f.rounds) >= 3


def test_two_nodes_alone_cannot_be_told_apart() -> None:
    v = drive(PairwiseFinder(["a", "b"], ["a", "b"], expected_gbps=100.0), network({"b": 0.5}))
    assert v["a"].verdict == v["b"].verdict == "undetermined"
    assert "no node that passed" in v["a"].evidence[-1]


def test_one_node_has_no_partner() -> None:
    (v,) = PairwiseFinder(["a"], ["a"]).verdicts()
    assert v.verdict == "undetermined" and v.evidence == ("not tested: no partner",)


def test_results_must_match_the_plan() -> None:
    f = PairwiseFinder(NODES, NODES)
    with pytest.raises(ValueError):
        f.record([PairOutcome("n0", "n1", "ok", 100.0)])
    f.next_round()
    with pytest.raises(ValueError, match="not planned"):
        f.record([PairOutcome("n0", "n2", "ok", 100.0)])


def test_launch_errors() -> None:
    alone = check_launch(16, {f"rank{i}": 1 for i in range(16)})
    assert alone is not None and "never met" in alone.cause and "torchrun" in alone.fix
    split = check_launch(16, {"a": 8, "b": 8, "c": 16})
    assert split is not None and "different worlds" in split.cause
    assert check_launch(16, {f"rank{i}": 16 for i in range(16)}) is None
    assert check_launch(1, {"rank0": 1}) is None
