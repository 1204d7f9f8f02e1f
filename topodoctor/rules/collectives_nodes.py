"""Collectives across nodes (TD0xx): the pairwise finder's verdicts, and inter-node busbw
against what the NICs the probe found can carry. Both read ``ctx.collectives``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from topodoctor.core.text import noun, plural
from topodoctor.rules.collectives import judged_against, low_busbw
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.nics import expected_rail_gbps, nearest_nics

INTER_MIN_RATIO = 0.75  # NCCL over a healthy RDMA fabric reaches 0.85-0.95 of line rate at large sizes

_SAYS = {
    "slow": "is slow",
    "hung": "hung: its pairs did not finish",
    "failed": "failed: its pairs ended in an error",
    "failed_to_join": "never joined the world",
    "undetermined": "could not be judged",
}


def _result(ctx: Context) -> Any:
    return ctx.collectives


@rule(
    "TD010",
    "coll-node-bad",
    "error",
    also=("warning",),
    tags=("collectives", "multinode"),
)
def coll_node_bad(ctx: Context) -> Iterator[Issue]:
    """A node the pairwise finder judged slow, hung, failed, or missing from the world.

    ``collectives --pairwise`` tests the nodes in disjoint pairs, all pairs of a round at once, and
    pairs each node of a slow or stuck pair again with a node that passed: the verdict names the
    node, not the pair. Slow means below ``(1 - tolerance)`` of the reference (an expectation when
    given, else the median of the first round's pairs). A node that could not be re-paired (no node
    passed) is undetermined and reported as a warning.

    Why it matters: a multi-node job runs at the pace of its slowest node and hangs with its worst
    one; one bad node holds back every job placed on it.

    How to fix: drain the node and look at its NICs (`ibstat`, link errors, `topodoctor check` on
    it), its GPUs (`topodoctor collectives` alone on it) and its cabling; a node that never joined:
    its launcher's log.
    """
    res = _result(ctx)
    report = getattr(res, "pairwise", None)
    if report is None:
        return
    for v in report.verdicts:
        if v.verdict == "healthy":
            continue
        how = _SAYS[v.verdict]
        if v.verdict == "slow" and v.slow_by is not None:
            how = f"is slow: {v.slow_by:.0%} below the reference of {report.reference_gbps:.1f} GB/s"
        yield Issue(
            f"node:{v.node}",
            f"node {v.node} {how}",
            {"verdict": v.verdict, "slow_by": v.slow_by, "evidence": list(v.evidence)},
            severity="warning" if v.verdict == "undetermined" else None,
        )


def _rank_gpus(ctx: Context, res: Any) -> dict[int, int]:
    """Global rank -> GPU index of this host's snapshot, by PCI bus id (nodes of one type)."""
    by_bus = {str(g.bus_id).lower(): g.index for g in ctx.snap.gpus if isinstance(g.bus_id, str)}
    return {r.rank: by_bus[r.bus_id.lower()] for r in res.ranks if r.bus_id and r.bus_id.lower() in by_bus}


@rule(
    "TD011",
    "coll-internode-busbw-low",
    "error",
    tags=("collectives", "multinode"),
)
def coll_internode_busbw_low(ctx: Context) -> Iterator[Issue]:
    """A collective between nodes is far below what the GPUs' NICs can carry.

    The inter-node figure is the op run on a *rail*: the ranks of one local index across the nodes,
    one GPU per node, all rails at once, so every byte crosses the network. What it can reach is
    each GPU's share of its nearest RDMA NIC's line rate (Gb/s / 8; a NIC that several GPUs are
    nearest to is split among them), the slowest GPU's. The nodes are taken to be of one type: the
    snapshot is the reporting rank's host. Below 0.75 of it is a finding. Hosts without RDMA NICs
    (TCP sockets) and CPU runs are not judged.

    Why it matters: across nodes the network is the narrowest path a collective takes, so the whole
    job's communication runs at this rate.

    How to fix: check the NICs of the rail's GPUs (`ibstat`: state, rate), NCCL's account (NET/IB or
    NET/Socket, GDR), NCCL_IB_HCA / NCCL_SOCKET_IFNAME, and TD210 for GPUs without GPUDirect RDMA.
    """
    res = _result(ctx)
    spans = [s for s in getattr(res, "spans", ()) if s.scope == "inter"]
    if not spans or res.backend != "nccl":
        return
    paths = nearest_nics(ctx.snap, ctx.graph)
    if not paths:
        return
    gpus = _rank_gpus(ctx, res)
    for span in spans:
        if any(r not in gpus for r in span.ranks):
            ctx.missing(
                f"rail:{span.name}", "rank GPUs", "ranks not matched to GPUs of this host by bus id", "collectives"
            )
            continue
        want = expected_rail_gbps(paths, [gpus[r] for r in span.ranks])
        if want is None:
            continue
        for row in span.rows:
            t = row.best
            if t is None or t.busbw_gbps >= INTER_MIN_RATIO * want:
                continue
            yield Issue(
                f"rail:{span.name}",
                f"{row.op} between nodes ({span.name}, {plural(len(span.nodes), 'node')}) "
                f"reaches {t.busbw_gbps:.1f} GB/s "
                f"busbw, {t.busbw_gbps / want:.0%} of the {want:.1f} GB/s its GPUs' NICs carry",
                {
                    "op": row.op,
                    "size_bytes": row.size_bytes,
                    "busbw_gbps": round(t.busbw_gbps, 2),
                    "expected_gbps": round(want, 2),
                    "nodes": list(span.nodes),
                },
            )


@rule(
    "TD012",
    "coll-intranode-busbw-low",
    "error",
    tags=("collectives", "multinode"),
)
def coll_intranode_busbw_low(ctx: Context) -> Iterator[Issue]:
    """A node's own collectives (its ranks as one subgroup, all nodes at once) are far below what its topology gives.

    The same judgement as TD001, node by node: the world's own figures cross the network and are
    judged by TD011 instead. The expectation is this host's (the nodes are taken to be of one type),
    on TD001's bases: ``--expect-busbw``, the topology's model for the node's ranks, a bandwidth
    result, the link rate.

    Why it matters: a node slow inside itself slows every collective of a multi-node job, whose
    intra-node steps wait for it.

    How to fix: run `topodoctor collectives` and `topodoctor check` on that node alone; read its
    NCCL account (transports, channels) and TD002/TD003.
    """
    from dataclasses import replace

    res = _result(ctx)
    for span in getattr(res, "spans", ()):
        if span.scope != "intra":
            continue
        ranks = tuple(r for r in res.ranks if r.rank in span.ranks)
        view = replace(res, rows=span.rows, ranks=ranks, world_size=len(ranks))  # the node as a world of its own
        for row, t, e in low_busbw(ctx, view):
            yield Issue(
                f"node:{span.name}",
                f"{row.op} on node {span.name} alone reaches {t.busbw_gbps:.1f} GB/s busbw, "
                f"{t.busbw_gbps / e.gbps:.0%} of {judged_against(e)}",
                {"op": row.op, "size_bytes": row.size_bytes, "measured_gbps": round(t.busbw_gbps, 1), **e.evidence()},
            )


# Variables that name something of the node itself (its host id, interfaces, log files): they
# may differ between nodes by design. Every other NCCL setting is expected to be the same on
# every rank: NCCL negotiates some (channels, protocols) and hangs or fails on others.
PER_NODE_VARIABLES = frozenset(
    {
        "NCCL_HOSTID",
        "NCCL_DEBUG_FILE",
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_HCA",
        "NCCL_TOPO_FILE",
        "NCCL_TOPO_DUMP_FILE",
        "NCCL_GRAPH_DUMP_FILE",
        "NCCL_COMM_ID",
    }
)


@rule(
    "TD013",
    "coll-env-mismatch",
    "error",
    tags=("collectives", "multinode"),
)
def coll_env_mismatch(ctx: Context) -> Iterator[Issue]:
    """The ranks of one run had different NCCL settings.

    Each rank reports the NCCL_* and TORCH_NCCL_* variables it ran with. One finding per variable,
    naming the ranks and nodes in the minority.

    Why it matters: NCCL reconciles few of them and trusts the rest to agree: on the 2-GPU H200
    host, four simulated nodes under NCCL 2.28 hung when one of them alone had NCCL_MAX_NCHANNELS=1,
    and two ranks ended in an NCCL internal error when that node also had a single socket thread.
    Even where a run survives, the node that differs is the one to look at.

    How to fix: give every node the same NCCL settings (the job's environment, /etc/nccl.conf,
    ~/.nccl.conf, the container image); the odd ones out are named.
    """
    res = _result(ctx)
    ranks = [r for r in getattr(res, "ranks", ()) if r.env]
    if len(ranks) < 2:
        return
    names = sorted({k for r in ranks for k in r.env} - PER_NODE_VARIABLES)
    for name in names:
        groups: dict[str | None, list[Any]] = {}
        for r in ranks:
            groups.setdefault(r.env.get(name), []).append(r)
        if len(groups) < 2:
            continue
        common = max(groups, key=lambda v: (len(groups[v]), v is None, v or ""))
        odd = [(v, rs) for v, rs in groups.items() if v != common]
        said = "; ".join(
            f"{_value(v)} on {_where(rs)}" for v, rs in sorted(odd, key=lambda x: min(r.rank for r in x[1]))
        )
        yield Issue(
            f"env:{name}",
            f"{name} differs between ranks: {said} ({_value(common)} on the other {len(groups[common])})",
            {"variable": name, "values": {_value(v): [r.rank for r in rs] for v, rs in groups.items()}},
        )


def _value(v: str | None) -> str:
    return "unset" if v is None else f"={v}"


def _where(ranks: list[Any]) -> str:
    nodes = list(dict.fromkeys(r.node or r.host for r in ranks))
    listed = ", ".join(str(r.rank) for r in ranks)
    return f"{noun(len(ranks), 'rank')} {listed} ({noun(len(nodes), 'node')} {', '.join(nodes)})"
