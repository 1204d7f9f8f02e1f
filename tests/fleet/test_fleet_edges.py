"""The fleet roll-up at each of its edges: a figure exactly at the tolerance and just under, a robust
z exactly at the threshold and just past, exactly as many nodes as a comparison needs and one fewer,
a finding on exactly half the nodes and on one more, and what a node's state and its drain reason
say when its files disagree."""

from __future__ import annotations

import pytest

from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_OK, EXIT_UNHEALTHY
from topodoctor.fleet.request import FleetThresholds
from topodoctor.fleet.rollup import NodeFigure, NodeResult, NodeType, Unreadable, robust_outliers, roll_up
from topodoctor.model.findings import Finding

H200 = NodeType("NVIDIA H200", 8, "18 NVLinks/GPU to NVSwitch")


def _node(name: str, gbps: float | None = None, *findings: Finding, state: str = "healthy", kind: str = "bandwidth",
          path: str | None = None, figure: str = "oneway") -> NodeResult:  # fmt: skip
    figs = (NodeFigure("bandwidth", figure, "GPU0->GPU1", gbps),) if gbps is not None else ()
    return NodeResult(name, kind, path or f"{name}.{kind}.json", state, "", findings, figs, H200)  # type: ignore[arg-type]


def _finding(code: str, severity: str = "error", subject: str = "GPU1") -> Finding:
    return Finding(code, f"rule-{code}", severity, subject, f"{code} on {subject}", "fix it", {})  # type: ignore[arg-type]


@pytest.mark.parametrize(("ratio", "slow"), [(0.95, False), (0.9499, True)])
def test_a_figure_exactly_at_the_tolerance_is_not_an_outlier(ratio: float, slow: bool) -> None:
    values = {"a": 100.0, "b": 100.0, "c": 100.0, "d": 100.0 * ratio}  # MAD 0: the ratio alone decides
    med, out = robust_outliers(values, FleetThresholds(tolerance=0.05))
    assert med == 100.0 and (("d" in out) is slow)


def test_a_robust_z_exactly_at_the_threshold_is_not_an_outlier() -> None:
    base = {"a": 100.0, "b": 101.0, "c": 99.0, "d": 100.0, "e": 102.0, "f": 98.0}  # median 100, MAD 1
    edge = FleetThresholds(tolerance=0.0, z_threshold=-(0.6745 * (95.0 - 100.0)))  # x = 95 sits exactly at it
    assert "x" not in robust_outliers({**base, "x": 95.0}, edge)[1]
    ratio, z = robust_outliers({**base, "x": 94.99}, edge)[1]["x"]
    assert z is not None and z < -edge.z_threshold and ratio == pytest.approx(0.9499)
    assert robust_outliers({**base, "x": 95.0}, FleetThresholds(tolerance=0.0, z_threshold=3.0))[1]["x"][
        1
    ] == pytest.approx(-3.3725)


def test_a_fast_figure_is_never_an_outlier_and_a_zero_median_judges_nothing() -> None:
    assert robust_outliers({"a": 100.0, "b": 100.0, "c": 200.0}, FleetThresholds())[1] == {}
    assert robust_outliers({"a": 0.0, "b": 0.0, "c": 0.0}, FleetThresholds()) == (0.0, {})


@pytest.mark.parametrize(("nodes", "compared"), [(3, True), (2, False)])
def test_exactly_min_nodes_are_compared_and_one_fewer_are_not(nodes: int, compared: bool) -> None:
    report = roll_up([_node(f"n{i}", 100.0) for i in range(nodes - 1)] + [_node("slow", 50.0)])
    t = report.types[0]
    assert (t.figures_compared, t.figures_too_few) == ((1, 0) if compared else (0, 1))
    assert [o.node for o in report.outliers] == (["slow"] if compared else [])
    if compared:
        (o,) = report.outliers
        assert (o.gbps, o.fleet_median_gbps, o.ratio, o.robust_z, o.peers) == (50.0, 100.0, 0.5, None, 3)
        (slow,) = [n for n in report.nodes if n.node == "slow"]
        assert slow.state == "slow" and slow.drain
        assert slow.drain_reason == (
            "topodoctor: oneway GPU0->GPU1 50.0 GB/s, 0.50x the median of 3 nodes of its type (100.0 GB/s)"
        )


def test_a_figure_is_told_in_its_own_unit() -> None:
    def gemm(name: str, tflops: float) -> NodeResult:
        fig = NodeFigure("fitness", "compute", "GPU0", tflops, unit="TFLOP/s")
        return NodeResult(name, "check", f"{name}.json", "healthy", "", (), (fig,), H200)

    nodes = [gemm(f"n{i}", 660.0) for i in range(3)] + [gemm("slow", 500.0)]
    (slow,) = [n for n in roll_up(nodes).nodes if n.node == "slow"]
    assert slow.reasons == ("compute GPU0 500.0 TFLOP/s, 0.76x the median of 4 nodes of its type (660.0 TFLOP/s)",)


@pytest.mark.parametrize(("ratio", "slow"), [(1.10, False), (1.1001, True), (0.5, False)])
def test_a_latency_is_slow_above_its_tolerance_and_never_below(ratio: float, slow: bool) -> None:
    values = {"a": 2.0, "b": 2.0, "c": 2.0, "d": 2.0 * ratio}
    assert ("d" in robust_outliers(values, FleetThresholds(latency_tolerance=0.10), better="lower")[1]) is slow


@pytest.mark.parametrize(("holders", "systemic"), [(2, False), (3, True)])
def test_a_finding_on_exactly_half_the_nodes_is_not_fleet_wide(holders: int, systemic: bool) -> None:
    env = _finding("TD601", subject="env:NCCL_P2P_DISABLE")
    nodes = [_node(f"n{i}", None, *((env,) if i < holders else ()), kind="check") for i in range(4)]
    report = roll_up(nodes)
    (shared,) = report.shared
    assert (shared.share, shared.systemic) == (holders / 4, systemic)
    assert report.fleet_wide == ((f"TD601 on {holders} of 4 nodes",) if systemic else ())
    assert [n.node for n in report.drain] == ([] if systemic else [f"n{i}" for i in range(holders)])
    assert report.exit_code == EXIT_UNHEALTHY


def test_a_shared_finding_needs_two_nodes_a_failing_one_and_enough_nodes_to_be_fleet_wide() -> None:
    one = roll_up([_node("a", None, _finding("TD101"), kind="check"), _node("b", None, kind="check")])
    assert one.shared == ()
    warned = [_node(n, None, _finding("TD603", "warning"), kind="check") for n in "abc"]
    (w,) = roll_up(warned).shared
    assert not w.systemic and roll_up(warned).exit_code == EXIT_OK  # below the fail level: no drain, no gate
    small = roll_up([_node(n, None, _finding("TD601"), kind="check") for n in "ab"])  # 2 of 2, under min_nodes
    assert not small.shared[0].systemic and [n.node for n in small.drain] == ["a", "b"]


def test_the_example_of_a_shared_finding_is_its_worst() -> None:
    nodes = [
        _node("a", None, _finding("TD203", "warning", "GPU2"), kind="check"),
        _node("b", None, _finding("TD203", "error", "GPU5"), kind="check"),
    ]
    (s,) = roll_up(nodes).shared
    assert (s.severity, s.example) == ("error", "TD203 GPU5: TD203 on GPU5")


def test_a_node_s_state_and_drain_reason_when_its_files_disagree() -> None:
    nodes = [
        _node("a", None, _finding("TD101"), _finding("TD205", "critical", "GPU3"), kind="check"),
        _node("a", None, state="unknown", kind="bandwidth"),
        _node("b", None, state="unknown", kind="check"),
        _node("c", None, state="unhealthy", kind="check"),
    ]
    report = roll_up(nodes, [Unreadable("b.collectives.json", "b.collectives.json: not JSON", "b")])
    a, b, c = report.nodes
    assert (a.state, a.sources) == ("unhealthy", {"check": "unhealthy", "bandwidth": "unknown"})
    assert a.drain_reason == "topodoctor: TD205 GPU3: TD205 on GPU3 (+1 more)"  # the worst first
    assert a.reasons == ("bandwidth could not check: ", "TD205 GPU3: TD205 on GPU3", "TD101 GPU1: TD101 on GPU1")
    assert (b.state, b.drain) == ("unknown", False)
    assert "unreadable: b.collectives.json: not JSON" in b.reasons
    assert (c.state, c.drain) == ("unhealthy", True)  # a file that says unhealthy with no finding still drains
    assert report.exit_code == EXIT_UNHEALTHY


def test_could_not_judge_is_exit_3_only_without_a_node_to_drain() -> None:
    assert roll_up([_node("a", None, state="unknown", kind="check")]).exit_code == EXIT_CANNOT_CHECK
    assert roll_up([_node("a", 1.0)], [Unreadable("x.json", "x.json: empty")]).exit_code == EXIT_CANNOT_CHECK
    assert roll_up([_node("a", 1.0)]).exit_code == EXIT_OK


def test_a_node_with_two_results_of_a_kind_is_compared_by_its_last_file_and_told() -> None:
    nodes = [_node(n, 100.0) for n in "abc"] + [
        _node("d", 100.0, path="d/2026-11-01.json"),
        _node("d", 50.0, path="d/2026-11-02.json"),
    ]
    report = roll_up(nodes)
    assert report.notes == ("d: 2 bandwidth results; the figures of d/2026-11-02.json are compared",)
    assert [(o.node, o.gbps) for o in report.outliers] == [("d", 50.0)]
    assert roll_up([*nodes[:3], nodes[4], nodes[3]]).outliers == report.outliers  # by file name, not by order


def test_a_node_whose_results_describe_different_hardware_is_told_and_typed_once() -> None:
    h100 = NodeType("NVIDIA H100", 8, "18 NVLinks/GPU to NVSwitch")
    other = NodeResult("d", "check", "d.check.json", "healthy", "", (), (), h100)
    report = roll_up([_node(n, 100.0) for n in "abcd"] + [other])
    assert report.notes == (
        "d: its results describe different hardware (8x NVIDIA H100, 18 NVLinks/GPU to NVSwitch, "
        "8x NVIDIA H200, 18 NVLinks/GPU to NVSwitch)",
    )
    types = {t.node_type.split(",")[0]: t.nodes for t in report.types}
    assert types == {"8x NVIDIA H100": ("d",), "8x NVIDIA H200": ("a", "b", "c")}


def test_a_node_of_unknown_type_is_not_compared() -> None:
    untyped = NodeResult(
        "x", "bandwidth", "x.json", "measured", "", (), (NodeFigure("bandwidth", "oneway", "GPU0->GPU1", 1.0),)
    )
    report = roll_up([_node(n, 100.0) for n in "ab"] + [untyped])
    assert report.outliers == () and report.types[0].figures_too_few == 1
    (x,) = [n for n in report.nodes if n.node == "x"]
    assert (x.node_type, x.state, x.sources) == (None, "healthy", {"bandwidth": "measured"})
