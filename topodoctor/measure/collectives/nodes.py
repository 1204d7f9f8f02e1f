"""Nodes of a collectives world: who is where, which subgroups to run, and what came of them.

Plain data and pure functions (no torch): the worker fills these in, the report and the rules
read them. A *node* is what NCCL takes for one host: ``NCCL_HOSTID`` when it is set (NCCL
then treats processes with different values as different hosts, and connects them through
its network transport), else the host name. The node rank comes from the launcher:
torchrun's ``GROUP_RANK``, Slurm's ``SLURM_NODEID``; without either, nodes are numbered in
the order of their lowest rank.

Phases after the world's own sweep, all at the plan's largest size:

- ``intra``: every node's ranks as one subgroup, all nodes at once (what NVLink / PCIe give);
- ``inter``: the ranks of one local index across all nodes (a "rail": one GPU per node, so
  every byte crosses the network), all rails at once;
- ``pair``: the pairwise finder's rounds (see ``topodoctor/model/pairwise.py``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def node_name(env: Mapping[str, str] | None = None) -> str:
    """The node this process runs on, as NCCL tells hosts apart."""
    env = os.environ if env is None else env
    return env.get("NCCL_HOSTID") or socket.gethostname()


def node_rank(env: Mapping[str, str] | None = None) -> int | None:
    """The launcher's index of this node: torchrun's GROUP_RANK, Slurm's SLURM_NODEID."""
    env = os.environ if env is None else env
    for name in ("GROUP_RANK", "SLURM_NODEID"):
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


@dataclass(frozen=True)
class Member:
    """One rank's place in the world (what each rank reports about itself)."""

    rank: int
    local_rank: int
    node: str
    node_rank: int | None
    world_size: int  # the world this process saw: 1 everywhere is a launch that never met


def nodes_of(members: Sequence[Member]) -> dict[str, list[int]]:
    """Global ranks per node, nodes ordered by node rank (else by their lowest rank)."""
    by: dict[str, list[int]] = {}
    for m in sorted(members, key=lambda m: m.rank):
        by.setdefault(m.node, []).append(m.rank)
    ranks = {m.node: m.node_rank for m in members if m.node_rank is not None}
    order = sorted(by, key=lambda n: (ranks.get(n, 1 << 30), by[n][0]))
    return {n: by[n] for n in order}


def node_ranks(members: Sequence[Member]) -> dict[str, int]:
    """Each node's rank: the launcher's when every node has one, else its order."""
    nodes = list(nodes_of(members))
    given = {m.node: m.node_rank for m in members if m.node_rank is not None}
    if len(given) == len(nodes) and len(set(given.values())) == len(nodes):
        return {n: int(given[n]) for n in nodes}
    return {n: i for i, n in enumerate(nodes)}


def rails(members: Sequence[Member]) -> list[list[int]]:
    """The ranks of each local index across nodes, for rails that reach at least two nodes."""
    by_node = nodes_of(members)
    local = {m.rank: m.local_rank for m in members}
    out: list[list[int]] = []
    for idx in sorted({local[r] for rs in by_node.values() for r in rs}):
        rail = [next(r for r in rs if local[r] == idx) for rs in by_node.values() if any(local[r] == idx for r in rs)]
        if len(rail) > 1:
            out.append(rail)
    return out


@dataclass(frozen=True)
class NodeSettings:
    """What the ranks run after the world's sweep, when the world spans nodes or pairwise is asked."""

    phases: bool = True  # intra- and inter-node figures when the world spans nodes
    pairwise: bool = False
    expect_nodes: tuple[str, ...] = ()  # nodes that should have joined (a missing one fails to join)
    pair_size_bytes: int = 64 << 20  # all_reduce of this size between the two nodes of a pair
    pair_iters: int = 5
    pair_timeout_s: float = 20.0  # one pair test, warm-up and timed iterations together
    tolerance: float = 0.1
    expected_gbps: float | None = None  # a healthy pair's busbw, from the NICs
    max_rounds: int = 6
    nic_loopback: bool = False  # each node's GPUs through its own NICs (see loopback.py)
    loopback: dict[str, Any] | None = None  # that run's outcome, on each node's local rank 0
