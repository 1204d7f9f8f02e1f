"""The multi-node part of the `collectives` report: each node's own figures, each rail's
figures between nodes, and the pairwise finder's verdict per node."""

from __future__ import annotations

from topodoctor.core.text import human_size, plural
from topodoctor.model.collectives import CollectivesResult, SpanRows


def _busbw(span: SpanRows) -> str:
    parts = [f"{r.op} {r.best.busbw_gbps:.1f}" for r in span.rows if r.best is not None]
    return ", ".join(parts) or "no figures"


def node_lines(res: CollectivesResult) -> list[str]:
    """Empty for a run on one node without pairwise."""
    lines: list[str] = []
    if len(res.nodes) > 1:
        where: dict[str, list[str]] = {}
        for r in res.ranks:
            rank = f"node rank {r.node_rank}" if r.node_rank is not None else "node rank ?"
            where.setdefault(f"{r.node or r.host} ({rank}, host {r.host})", []).append(str(r.rank))
        lines.append("")
        lines.append(f"# nodes: {len(res.nodes)}")
        lines += [f"#   {node}: ranks {' '.join(ranks)}" for node, ranks in where.items()]
    titles = (
        ("intra", "within each node"),
        ("nic", "within each node through its own NICs (P2P and SHM off)"),
        ("inter", "between nodes, one GPU per node"),
    )
    for scope, title in titles:
        spans = [s for s in res.spans if s.scope == scope]
        if not spans:
            continue
        size = max((r.size_bytes for s in spans for r in s.rows), default=0)
        when = {"intra": "all nodes at once", "inter": "all rails at once", "nic": "before the world formed"}[scope]
        lines.append(f"# busbw {title} (GB/s at {human_size(size)}, {when}):")
        for s in spans:
            nodes = f" ({' '.join(s.nodes)})" if scope == "inter" else ""
            lines.append(f"#   {s.name}{nodes}: {_busbw(s)}")
            if scope == "nic" and s.account:
                lines.append(f"#     {s.account}")
    p = res.pairwise
    if p is not None:
        ref = f"{p.reference_gbps:.1f} GB/s" if p.reference_gbps is not None else "none"
        lines.append(
            f"# pairwise: {p.op} {human_size(p.size_bytes)} per pair, {plural(len(p.rounds), 'round')}, "
            f"reference {ref}, slow below {1 - p.tolerance:.0%} of it"
        )
        for v in p.verdicts:
            how = v.verdict.replace("_", " ")
            if v.verdict == "slow" and v.slow_by is not None:
                how += f" by {v.slow_by:.0%}"
            lines.append(f"#   {v.node}: {how}" + (f"  [{'; '.join(v.evidence)}]" if v.evidence else ""))
    return lines
