"""The fleet roll-up's states, orders and ties: which of a node's two results of one kind its state
keeps (the worse, whichever file is last), a file's findings judged again at the fleet's fail level,
which outlier is told first (the furthest from its median, a latency above it as a rate below it),
which shared finding first (most nodes, then the worst), the example of a shared finding among
equals (the first node's), a fleet-wide finding on exactly as many nodes as a comparison needs, a
latency exactly at its tolerance, and figures under 1."""

from __future__ import annotations

import itertools

import pytest

from tests.fleet.test_fleet_edges import H200, _finding, _node
from topodoctor.fleet.request import FleetThresholds
from topodoctor.fleet.rollup import NodeFigure, NodeResult, robust_outliers, roll_up

# Each state a node's source can have, from the least to the most telling: a file that only
# measured, one that judged healthy, one slower than its own past (TD950), could not check, unhealthy.
STATES = ["measured", "healthy", "slow", "unknown", "unhealthy"]


def _result(state: str, path: str) -> NodeResult:
    if state == "slow":
        return _node("d", None, _finding("TD950"), kind="check", path=path)
    if state == "healthy":
        return _node("d", None, _finding("TD603", "warning"), kind="check", path=path)  # judged: under the fail level
    return _node("d", None, state=state, kind="check", path=path)


@pytest.mark.parametrize(("better", "worse"), list(itertools.pairwise(STATES)), ids=lambda s: s)
@pytest.mark.parametrize("worse_last", [False, True])
def test_a_node_s_source_keeps_the_worse_of_two_results_whichever_is_last(
    better: str, worse: str, worse_last: bool
) -> None:
    files = ("d/1.json", "d/2.json") if worse_last else ("d/2.json", "d/1.json")
    (d,) = roll_up([_result(better, files[0]), _result(worse, files[1])]).nodes
    assert d.sources == {"check": worse}
    assert d.state == VERDICT[worse]


VERDICT = {"measured": "healthy", "healthy": "healthy", "slow": "slow", "unknown": "unknown", "unhealthy": "unhealthy"}


@pytest.mark.parametrize(
    ("state", "findings", "judged"),
    [
        ("unhealthy", ("warning",), "healthy"),  # a file's own verdict at another fail level: judged again
        ("measured", ("error",), "unhealthy"),
        ("healthy", ("error",), "unhealthy"),
        ("measured", (), "measured"),
    ],
)
def test_a_file_s_findings_are_judged_again_at_the_fleet_s_fail_level(
    state: str, findings: tuple[str, ...], judged: str
) -> None:
    (d,) = roll_up([_node("d", None, *(_finding("TD101", sev) for sev in findings), state=state, kind="check")]).nodes
    assert d.sources == {"check": judged}


def test_a_node_slower_than_its_past_and_broken_too_is_unhealthy() -> None:
    (d,) = roll_up([_node("d", None, _finding("TD950"), _finding("TD101"), kind="check")]).nodes
    assert (d.state, d.sources) == ("unhealthy", {"check": "unhealthy"})


def test_a_file_that_says_unhealthy_with_no_finding_gives_its_reason() -> None:
    bad = NodeResult("d", "check", "d.json", "unhealthy", "GPU3 fell off the bus", (), (), H200)
    (d,) = roll_up([bad]).nodes
    assert (d.state, d.reasons, d.drain_reason) == (
        "unhealthy",
        ("check: GPU3 fell off the bus",),
        "topodoctor: GPU3 fell off the bus",
    )


def _latency(name: str, ms: float) -> NodeResult:
    fig = NodeFigure("collectives", "latency", "all_reduce 8B", ms, unit="us", better="lower")
    return NodeResult(name, "collectives", f"{name}.c.json", "measured", "", (), (fig,), H200)


def test_the_outlier_furthest_from_its_median_is_told_first() -> None:
    nodes = [_node(n, 100.0) for n in "pqrs"] + [_node("a", 88.0), _node("c", 50.0)]
    nodes += [_latency(n, 10.0) for n in "pqrs"] + [_latency("b", 11.5)]
    report = roll_up(nodes, settings=FleetThresholds(latency_tolerance=0.10))
    assert [(o.node, o.ratio) for o in report.outliers] == [("c", 0.5), ("b", 1.15), ("a", 0.88)]


def test_shared_findings_are_told_by_how_many_nodes_then_how_bad() -> None:
    nodes = [
        _node("a", None, _finding("TD100", "warning"), _finding("TD200"), _finding("TD300"), kind="check"),
        _node("b", None, _finding("TD100", "warning"), _finding("TD200"), _finding("TD300"), kind="check"),
        _node("c", None, _finding("TD300"), kind="check"),
    ]
    assert [s.code for s in roll_up(nodes).shared] == ["TD300", "TD200", "TD100"]


def test_the_example_of_a_shared_finding_among_equals_is_the_first_node_s() -> None:
    nodes = [_node(n, None, _finding("TD203", "error", f"GPU{i}"), kind="check") for i, n in enumerate("ab")]
    (s,) = roll_up(nodes).shared
    assert s.example == "TD203 GPU0: TD203 on GPU0"


@pytest.mark.parametrize(("nodes", "systemic"), [(3, True), (2, False)])
def test_a_finding_on_every_node_is_fleet_wide_from_exactly_min_nodes(nodes: int, systemic: bool) -> None:
    report = roll_up([_node(f"n{i}", None, _finding("TD601"), kind="check") for i in range(nodes)])
    assert report.shared[0].systemic is systemic
    assert [n.node for n in report.drain] == ([] if systemic else ["n0", "n1"])


@pytest.mark.parametrize(("ms", "slow"), [(5.0, False), (5.0005, True)])
def test_a_latency_exactly_at_its_tolerance_is_not_slow(ms: float, slow: bool) -> None:
    values = {"a": 4.0, "b": 4.0, "c": 4.0, "d": ms}  # 5.0 / 4.0 is 1.25 exactly: at the tolerance
    assert ("d" in robust_outliers(values, FleetThresholds(latency_tolerance=0.25), better="lower")[1]) is slow


def test_figures_under_one_are_judged_too() -> None:
    med, out = robust_outliers({"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.2}, FleetThresholds())
    assert med == 0.5 and list(out) == ["d"]


def test_a_fleet_report_has_nothing_unusable() -> None:
    report = roll_up([_node("a", 1.0)])
    assert (report.unusable, report.not_measured) == ((), ())


@pytest.mark.parametrize(("us", "slow"), [(105.0, False), (105.01, True)])
def test_a_latency_s_robust_z_exactly_at_the_threshold_is_not_slow(us: float, slow: bool) -> None:
    base = {"a": 100.0, "b": 101.0, "c": 99.0, "d": 100.0, "e": 102.0, "f": 98.0}  # median 100, MAD 1
    edge = FleetThresholds(latency_tolerance=0.0, z_threshold=0.6745 * (105.0 - 100.0))  # 105 sits exactly at it
    assert ("x" in robust_outliers({**base, "x": us}, edge, better="lower")[1]) is slow
