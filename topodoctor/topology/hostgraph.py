"""The small undirected graph the topology views are built on: what they need of networkx's
``Graph`` (attributes on nodes and edges, neighbours, an edge subgraph, a shortest path), with
networkx's own orders, so a check never imports networkx (its package import loads every algorithm
it has: 286 modules and half a second on the GPU hosts, most of a check's start-up).

Orders follow networkx, so results do not depend on which graph is used: nodes in insertion order,
neighbours in the order their edges were added, each undirected edge once (from the node seen
first), and ``shortest_path`` is networkx's bidirectional breadth-first search, meeting in the
middle the same way. ``to_networkx`` hands the same graph to networkx for export and drawing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

Node = str  # GPU0, numa:0, 0000:17:00.0, ...: every node of the host is named
Attrs = dict[str, Any]


class NoPath(Exception):
    """No path joins the two nodes (networkx's NetworkXNoPath)."""


class NodeNotFound(Exception):
    """A node the graph does not have (networkx's NodeNotFound)."""


class _Nodes:
    """``g.nodes``: iterate the nodes, ``g.nodes[n]`` for one's attributes, ``g.nodes(data=...)``."""

    def __init__(self, g: HostGraph) -> None:
        self._g = g

    def __iter__(self) -> Iterator[Node]:
        return iter(self._g._node)

    def __len__(self) -> int:
        return len(self._g._node)

    def __contains__(self, n: object) -> bool:
        return n in self._g._node

    def __getitem__(self, n: Node) -> Attrs:
        return self._g._node[n]

    def __call__(self, data: bool | str = False, default: Any = None) -> Iterator[Any]:
        """Nodes, with their attribute dicts (``data=True``) or one attribute's value (``data="kind"``)."""
        for n, attrs in self._g._node.items():
            if data is True:
                yield n, attrs
            elif data is False:
                yield n
            else:
                yield n, attrs.get(data, default)


class _Edges:
    """``g.edges``: each edge once, ``g.edges[a, b]`` for its attributes, ``g.edges(data=...)``."""

    def __init__(self, g: HostGraph) -> None:
        self._g = g

    def _pairs(self) -> Iterator[tuple[Node, Node, Attrs]]:
        seen: set[Node] = set()
        for n, nbrs in self._g._adj.items():
            for nbr, attrs in nbrs.items():
                if nbr not in seen:
                    yield n, nbr, attrs
            seen.add(n)

    def __iter__(self) -> Iterator[tuple[Node, Node]]:
        return ((u, v) for u, v, _ in self._pairs())

    def __len__(self) -> int:
        return sum(1 for _ in self._pairs())

    def __contains__(self, edge: object) -> bool:
        return isinstance(edge, tuple) and len(edge) == 2 and self._g.has_edge(edge[0], edge[1])

    def __getitem__(self, edge: tuple[Node, Node]) -> Attrs:
        u, v = edge
        return self._g._adj[u][v]

    def __call__(self, data: bool | str = False, default: Any = None) -> Iterator[Any]:
        """Edges, with their attribute dicts (``data=True``) or one attribute's value (``data="kind"``)."""
        for u, v, attrs in self._pairs():
            if data is True:
                yield u, v, attrs
            elif data is False:
                yield u, v
            else:
                yield u, v, attrs.get(data, default)


class HostGraph:
    """An undirected graph with attributes on its nodes and edges (the part of networkx.Graph the
    topology views use)."""

    def __init__(self) -> None:
        self._node: dict[Node, Attrs] = {}
        self._adj: dict[Node, dict[Node, Attrs]] = {}

    @property
    def nodes(self) -> _Nodes:
        """The nodes, as networkx's NodeView reads them."""
        return _Nodes(self)

    @property
    def edges(self) -> _Edges:
        """The edges, as networkx's EdgeView reads them."""
        return _Edges(self)

    @property
    def adj(self) -> dict[Node, dict[Node, Attrs]]:
        """Each node's neighbours and the attributes of the edge to each."""
        return self._adj

    def __iter__(self) -> Iterator[Node]:
        return iter(self._node)

    def __len__(self) -> int:
        return len(self._node)

    def __contains__(self, n: object) -> bool:
        return n in self._node

    def __getitem__(self, n: Node) -> dict[Node, Attrs]:
        return self._adj[n]

    def is_directed(self) -> bool:
        """Always False: links carry traffic both ways."""
        return False

    def add_node(self, n: Node, **attrs: Any) -> None:
        """Add ``n`` (or update its attributes)."""
        if n not in self._node:
            self._node[n] = {}
            self._adj[n] = {}
        self._node[n].update(attrs)

    def add_edge(self, u: Node, v: Node, **attrs: Any) -> None:
        """Join ``u`` and ``v`` (adding either if new), or update the edge's attributes."""
        for n in (u, v):
            if n not in self._node:
                self.add_node(n)
        data = self._adj[u].get(v, {})
        data.update(attrs)
        self._adj[u][v] = data
        self._adj[v][u] = data

    def has_node(self, n: Node) -> bool:
        """Whether ``n`` is in the graph."""
        return n in self._node

    def has_edge(self, u: Node, v: Node) -> bool:
        """Whether ``u`` and ``v`` are joined."""
        return u in self._adj and v in self._adj[u]

    def neighbors(self, n: Node) -> Iterator[Node]:
        """The nodes joined to ``n``, in the order their edges were added."""
        return iter(self._adj[n])

    def number_of_nodes(self) -> int:
        """How many nodes."""
        return len(self._node)

    def number_of_edges(self) -> int:
        """How many edges."""
        return len(self.edges)

    def degree(self, n: Node) -> int:
        """How many edges meet at ``n`` (a self-loop counts twice, as in networkx)."""
        return len(self._adj[n]) + (1 if n in self._adj[n] else 0)

    def edge_subgraph(self, edges: Iterable[tuple[Node, Node]]) -> HostGraph:
        """The graph of these edges and their ends, attributes shared, in this graph's orders."""
        keep = {(u, v) for u, v in edges} | {(v, u) for u, v in edges}
        ends = {n for pair in keep for n in pair}
        sub = HostGraph()
        for n, attrs in self._node.items():
            if n in ends:
                sub._node[n] = attrs
                sub._adj[n] = {m: d for m, d in self._adj[n].items() if (n, m) in keep}
        return sub

    def to_networkx(self) -> Any:
        """The same graph as a networkx Graph (for export and drawing): imports networkx."""
        import networkx as nx

        h = nx.Graph()
        for n, attrs in self._node.items():
            h.add_node(n, **attrs)
        for u, v, attrs in self.edges(data=True):
            h.add_edge(u, v, **attrs)
        return h


def shortest_path(g: HostGraph, source: Node, target: Node) -> list[Node]:
    """A shortest path from ``source`` to ``target``: networkx's bidirectional breadth-first search,
    so among paths of one length the same one is found."""
    if source not in g:
        raise NodeNotFound(f"source {source} is not in the graph")
    if target not in g:
        raise NodeNotFound(f"target {target} is not in the graph")
    pred, succ, w = _meet(g, source, target)
    path: list[Node] = []
    at: Node | None = w
    while at is not None:
        path.append(at)
        at = pred[at]
    path.reverse()
    at = succ[path[-1]]
    while at is not None:
        path.append(at)
        at = succ[at]
    return path


def _meet(g: HostGraph, source: Node, target: Node) -> tuple[dict[Node, Node | None], dict[Node, Node | None], Node]:
    if target == source:
        return {target: None}, {source: None}, source
    pred: dict[Node, Node | None] = {source: None}
    succ: dict[Node, Node | None] = {target: None}
    forward, reverse = [source], [target]
    while forward and reverse:
        if len(forward) <= len(reverse):
            level, forward = forward, []
            for v in level:
                for w in g._adj[v]:
                    if w not in pred:
                        forward.append(w)
                        pred[w] = v
                    if w in succ:
                        return pred, succ, w
        else:
            level, reverse = reverse, []
            for v in level:
                for w in g._adj[v]:
                    if w not in succ:
                        succ[w] = v
                        reverse.append(w)
                    if w in pred:
                        return pred, succ, w
    raise NoPath(f"no path between {source} and {target}")
