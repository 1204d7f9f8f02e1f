"""One snapshot's derived views, each built once and shared: the rules' context, the renderers and
the commands all read the same graph, pair connections and NCCL host tree instead of rebuilding them."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from topodoctor.model.snapshot import HostSnapshot
from topodoctor.topology.graph import build_graph, connection, gpu_node, pcie_subgraph

if TYPE_CHECKING:
    from topodoctor.topology.graph import BestPath
    from topodoctor.topology.hostgraph import HostGraph
    from topodoctor.topology.hosttree import HostTree, NumaSource


class HostView:
    """The derived views of one snapshot, each computed on first use."""

    def __init__(self, snapshot: HostSnapshot) -> None:
        self.snapshot = snapshot
        self._trees: dict[tuple[bool, str], HostTree] = {}

    @cached_property
    def graph(self) -> HostGraph:
        """The host as a graph (topology.graph.build_graph)."""
        return build_graph(self.snapshot)

    @cached_property
    def connections(self) -> dict[tuple[int, int], BestPath]:
        """Best path for every pair of answering GPUs (a < b)."""
        g = self.graph
        sub = pcie_subgraph(g)
        idx = [gpu.index for gpu in self.snapshot.gpus if gpu.lost is None]
        return {(a, b): connection(self.snapshot, g, gpu_node(a), gpu_node(b), sub) for a in idx for b in idx if a < b}

    def tree(self, group_flat: bool = False, numa_from: NumaSource = "graph") -> HostTree:
        """The host as NCCL models it (topology.hosttree.build_tree), one per way of building it."""
        key = (group_flat, numa_from)
        if key not in self._trees:
            from topodoctor.topology.hosttree import build_tree  # NCCL's host tree: pictures and its file only

            self._trees[key] = build_tree(self.snapshot, self.graph, group_flat=group_flat, numa_from=numa_from)
        return self._trees[key]
