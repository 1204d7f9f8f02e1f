"""NCCL's account of a run in one paragraph: what the collectives report prints and what a
node's loopback run keeps as its evidence."""

from __future__ import annotations

from topodoctor.core.text import plural
from topodoctor.model.collectives import CollectivesResult, NcclAccount


def _transports(acc: NcclAccount) -> str:
    by: dict[str, int] = {}
    for c in acc.connections:
        by[c.transport] = by.get(c.transport, 0) + c.channels
    if not by:
        return "no peer connections reported"
    return ", ".join(f"{n} peer connection{'s' if n != 1 else ''} over {t}" for t, n in sorted(by.items()))


def nccl_paragraph(res: CollectivesResult) -> str:
    """NCCL's account in one paragraph: version, ranks and nodes, transports, channels, NVLS, GDR, settings."""
    acc = res.nccl
    if acc is None:
        if res.backend != "nccl":
            return f"Backend {res.backend}: no NCCL in this run."
        if res.source == "nccl-tests":
            return "nccl-tests' JSON carries no NCCL log: transports and channels unknown (NCCL_DEBUG=INFO shows them)."
        return "NCCL left no INFO log for this run (NCCL_DEBUG_FILE set elsewhere?): no account of transports."
    parts = [f"NCCL {acc.version or '(version not logged)'}"]
    if acc.ranks is not None:
        parts.append(f"{plural(acc.ranks, 'rank')} on {plural(acc.nodes, 'node')}")
    parts.append(_transports(acc))
    if acc.channels is not None:
        p2p = f" ({acc.p2p_channels} for point-to-point)" if acc.p2p_channels is not None else ""
        parts.append(f"{plural(acc.channels, 'channel')}{p2p}")
    nvls_env = acc.env.get("NCCL_NVLS_ENABLE") or res.env.get("NCCL_NVLS_ENABLE")
    if acc.nvls is True:
        parts.append(f"NVLS on ({plural(acc.nvls_channels, 'channel')})")
    elif acc.nvls is False:
        parts.append("NVLS off" + (f": NCCL_NVLS_ENABLE={nvls_env}" if nvls_env is not None else ""))
    if acc.gdr is not None:
        parts.append("GPUDirect RDMA " + ("on" if acc.gdr else "off"))
    if acc.rings:
        parts.append("ring " + " | ".join(acc.rings[:2]))
    others = {k: v for k, v in acc.env.items() if k != "NCCL_NVLS_ENABLE"}
    if others:
        parts.append("set: " + ", ".join(f"{k}={v}" for k, v in others.items()))
    text = "; ".join(parts) + "."
    if acc.warnings:
        text += f" NCCL warned: {acc.warnings[0]}"
    return text
