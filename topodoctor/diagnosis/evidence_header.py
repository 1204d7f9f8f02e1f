"""An nccl-tests table posted without its header (`# nThread ... nGpus ...` and the `#  Rank N ... on HOST
device D` lines): the table alone says neither how many ranks ran nor on how many nodes, and a guess of
one node would hold a multi-node run to NVLink. What the rest of the evidence says (NCCL's own count of
nodes, the hosts its log lines come from, a launch's nodes and processes, the GPUs one host lists) places
the run where it says enough; otherwise the header lines are what decides, and they are asked for."""

from __future__ import annotations

from dataclasses import replace

from topodoctor.diagnosis.evidence_facts import Facts, Measured
from topodoctor.diagnosis.evidence_seen import Quote

HEADER = ("the run's header: its `# nThread N nGpus N` line and the `#  Rank N ... on HOST device D` lines under "
          "`# Using devices` (how many ranks on how many nodes)")  # fmt: skip


def _nodes_elsewhere(f: Facts) -> tuple[int | None, str]:
    """The nodes the rest of the evidence says the run spans, and what says it."""
    if f.nccl_nodes:
        return f.nccl_nodes, f"NCCL's log: nNodes {f.nccl_nodes}"
    logged = sorted({c.host for c in f.conns if c.host} | {s.host for s in f.net if s.host})
    if len(logged) > 1:
        return len(logged), f"NCCL's log lines from {len(logged)} hosts"
    spans = {ln.nodes for ln in f.launches if ln.nodes}
    if len(spans) == 1:
        n = spans.pop()
        return n, f"the launch line: {n} node{'s' if n > 1 else ''}"
    return None, ""


def _ranks_elsewhere(f: Facts, nodes: int) -> tuple[int | None, str]:
    """The ranks the rest of the evidence says the run has: a launch's processes, else one host's GPUs
    per node (nvidia-smi's listing)."""
    if f.nccl_ranks:
        return f.nccl_ranks, f"NCCL's log: nRanks {f.nccl_ranks}"
    if (n := launched_ranks(f)) is not None:
        return n, f"{n} ranks launched"
    if f.gpus_per_node:
        return f.gpus_per_node * nodes, f"{f.gpus_per_node} GPUs listed per node"
    return None, ""


def launched_ranks(f: Facts) -> int | None:
    """The ranks the launch line starts: its processes times the GPUs each drives (nccl-tests' -g and -t), where
    the evidence holds one such count."""
    ranks = {ln.processes * (ln.gpus_per_process or 1) for ln in f.launches if ln.processes}
    return ranks.pop() if len(ranks) == 1 else None


def launched_per_node(f: Facts, nodes: int) -> int | None:
    """The GPUs a node runs as the launch line says, over ``nodes`` nodes; None where it does not say or the
    count does not divide."""
    ranks = launched_ranks(f)
    return ranks // nodes if ranks and nodes and ranks % nodes == 0 else None


def place(f: Facts, m: Measured) -> tuple[Measured | None, str]:
    """A header-less run placed by the rest of the evidence (its nodes and ranks filled, the quote saying
    where they come from), or None and the message that asks for the header lines."""
    nodes, said_nodes = _nodes_elsewhere(f)
    ranks, said_ranks = _ranks_elsewhere(f, nodes or 1)
    rates = [n for n in f.nics if n.rate_gbps]
    if nodes and ranks and (nodes == 1 or rates):
        note = f" (no header lines: {said_nodes}, {said_ranks})"
        return replace(m, nodes=nodes, nranks=ranks, quote=Quote(m.quote.where, m.quote.text + note)), ""
    msg = f"{m.op} busbw {m.busbw_gbps:.1f} GB/s not judged: the table comes without its header, so how many ranks "
    msg += "ran on how many nodes is not shown"
    known = [s for s in (said_nodes, said_ranks) if s]
    if known:
        msg += f" ({'; '.join(known)}"
        msg += "; between nodes the NICs' rate is not shown either: post `ibstat` or `ethtool` of a node too)" if (
            nodes and nodes > 1 and not rates) else ")"  # fmt: skip
    msg += f"; to decide, post {HEADER}"
    return None, msg
