"""The check path's light graph (topology/hostgraph.py) answers as networkx.Graph does, on every
bundled recording and derived host: the graph built through the same code on networkx has the same
nodes, edges and attributes in the same orders, the same neighbours and degrees, the same edge
subgraph, the same shortest path between every two nodes, and the same connection matrix."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from conftest import DERIVED, RECORDINGS, scenario_path

from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.sources import probe_host
from topodoctor.topology import graph as topo_graph
from topodoctor.topology.graph import build_graph, connection_matrix, pcie_subgraph
from topodoctor.topology.hostgraph import HostGraph, NodeNotFound, NoPath, shortest_path

# The bundled recordings in every run; the derived hosts (the larger ones a second each) with the slow tests.
HOSTS = [str(p) for p in RECORDINGS] + [
    pytest.param(str(scenario_path(s["name"])), marks=pytest.mark.slow)
    for s in DERIVED
    if s["name"] != "x4-nvml-hang"  # never answers
]


def _snapshot(source: str) -> HostSnapshot:
    return probe_host(source).snapshot


def _on_networkx(snap: HostSnapshot, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The host's graph built by the same code on networkx.Graph, paths found by networkx."""
    with monkeypatch.context() as m:
        m.setattr(topo_graph, "HostGraph", nx.Graph)
        return build_graph(snap)


def _path(g: Any, a: str, b: str) -> list[str] | None:
    try:
        return shortest_path(g, a, b) if isinstance(g, HostGraph) else list(nx.shortest_path(g, a, b))
    except (NoPath, nx.NetworkXNoPath):
        return None


@pytest.mark.parametrize("source", HOSTS, ids=lambda s: Path(str(s)).stem)
def test_the_light_graph_answers_as_networkx(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = _snapshot(source)
    g, h = build_graph(snap), _on_networkx(snap, monkeypatch)
    assert isinstance(h, nx.Graph) and len(g) == len(h) > 0
    assert list(g.nodes(data=True)) == list(h.nodes(data=True))
    assert list(g.edges(data=True)) == list(h.edges(data=True))
    assert list(g.nodes(data="kind")) == list(h.nodes(data="kind"))
    assert list(g.edges(data="gbps", default=-1)) == list(h.edges(data="gbps", default=-1))
    assert (g.number_of_nodes(), g.number_of_edges(), len(g.edges)) == (
        h.number_of_nodes(),
        h.number_of_edges(),
        len(h.edges),
    )
    # The views a user reaches for, with their defaults: plain iteration, lengths, adj, direction.
    assert (list(g), list(g.nodes()), list(g.edges()), len(g.nodes)) == (
        list(h),
        list(h.nodes()),
        list(h.edges()),
        len(h.nodes),
    )
    assert {n: dict(nbrs) for n, nbrs in g.adj.items()} == {n: dict(nbrs) for n, nbrs in h.adj.items()}
    assert g.is_directed() is h.is_directed() is False
    for n in h:
        assert (list(g.neighbors(n)), g.degree(n), dict(g[n])) == (list(h.neighbors(n)), h.degree(n), dict(h[n]))
        assert g.nodes[n] == h.nodes[n] and g.has_node(n) and n in g.nodes
    for u, v in itertools.combinations(h.nodes, 2):
        assert g.has_edge(u, v) == h.has_edge(u, v) == ((u, v) in g.edges) == ((v, u) in h.edges)
        assert _path(g, u, v) == _path(h, u, v), (u, v)
    exported = g.to_networkx()
    assert list(exported.nodes(data=True)) == list(h.nodes(data=True))
    assert list(exported.edges(data=True)) == list(h.edges(data=True))


@pytest.mark.parametrize("source", HOSTS, ids=lambda s: Path(str(s)).stem)
def test_the_pcie_subgraph_and_the_matrix_match_networkx(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = _snapshot(source)
    g, h = build_graph(snap), _on_networkx(snap, monkeypatch)
    sub_g, sub_h = pcie_subgraph(g), pcie_subgraph(h)
    assert list(sub_g.nodes(data=True)) == list(sub_h.nodes(data=True))
    assert sorted(map(sorted, sub_g.edges)) == sorted(map(sorted, sub_h.edges))
    ends = [n for n, k in sub_h.nodes(data="kind") if k in ("gpu", "nic")]
    for u, v in itertools.permutations(ends, 2):
        assert _path(sub_g, u, v) == _path(sub_h, u, v), (u, v)
    with monkeypatch.context() as m:
        m.setattr(topo_graph, "shortest_path", nx.shortest_path)
        m.setattr(topo_graph, "NoPath", nx.NetworkXNoPath)
        on_nx = connection_matrix(snap, h)
    assert connection_matrix(snap, g) == on_nx


def test_missing_nodes_and_no_path_fail_as_networkx_does() -> None:
    g, h = HostGraph(), nx.Graph()
    for graph in (g, h):
        graph.add_edge("a", "b", kind="pcie")
        graph.add_node("c")
    assert _path(g, "a", "c") is None and _path(h, "a", "c") is None
    with pytest.raises(NodeNotFound, match="source x"):
        shortest_path(g, "x", "a")
    with pytest.raises(NodeNotFound, match="target y"):
        shortest_path(g, "a", "y")
    with pytest.raises(nx.NodeNotFound):
        nx.shortest_path(h, "a", "y")
    assert shortest_path(g, "a", "a") == nx.shortest_path(h, "a", "a") == ["a"]
    g.add_edge("a", "b", gbps=3.0)  # an edge added again updates its attributes, as networkx does
    h.add_edge("a", "b", gbps=3.0)
    assert g.edges["a", "b"] == h.edges["b", "a"] == {"kind": "pcie", "gbps": 3.0}
    g.add_edge("c", "c")
    h.add_edge("c", "c")
    assert g.degree("c") == h.degree("c") == 2  # a self-loop counts twice


def test_shortest_paths_on_small_random_graphs_are_networkx_s() -> None:
    """Ties between paths of one length are where a breadth-first search's order shows: graphs of
    8 nodes and 11 edges, added in a shuffled order and direction, hold many (a fixed seed)."""
    rng = random.Random(7)
    nodes = [f"n{i}" for i in range(8)]
    for _ in range(60):
        g, h = HostGraph(), nx.Graph()
        for n in nodes:
            g.add_node(n)
            h.add_node(n)
        for u, v in rng.sample(list(itertools.combinations(nodes, 2)), 11):
            u, v = (v, u) if rng.random() < 0.5 else (u, v)
            g.add_edge(u, v)
            h.add_edge(u, v)
        for a, b in itertools.permutations(nodes, 2):
            assert _path(g, a, b) == _path(h, a, b), (a, b)
