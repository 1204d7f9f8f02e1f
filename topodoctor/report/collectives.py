"""`topodoctor collectives` output: nccl-tests' table, NCCL's account in one paragraph, JSON.

The table keeps nccl-tests' columns and number formatting, so the two can be read side by
side (or diffed): size, count, type, redop, root, then time / algbw / busbw / #wrong for the
out-of-place and in-place forms. A form torch.distributed does not offer prints ``n/a``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from topodoctor.core.codec import to_jsonable
from topodoctor.model.collective_ops import human_size
from topodoctor.model.collectives import CollectivesResult, NcclAccount, Timing
from topodoctor.rules.registry import Finding

_HEAD = "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}"


def fmt_float(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals while they fit, then fewer, then exponent."""
    for spec in (".2f", ".1f", ".0f"):
        s = f"{value:{width}{spec}}"
        if len(s) <= width:
            return s
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def _cols(t: Timing | None) -> str:
    if t is None:
        return f"  {'n/a':>7}  {'':>6}  {'':>6}  {'':>6}"
    wrong = "N/A" if t.wrong is None else f"{t.wrong:g}"
    return f"  {fmt_float(t.time_us, 7)}  {fmt_float(t.algbw_gbps, 6)}  {fmt_float(t.busbw_gbps, 6)}  {wrong:>6}"


def table_lines(res: CollectivesResult) -> list[str]:
    out: list[str] = []
    for op in dict.fromkeys(r.op for r in res.rows):
        out.append(f"# {op} ({res.world_size} ranks, {res.backend})")
        out.append(f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}  {'out-of-place':>29}  {'in-place':>29}")
        out.append(
            _HEAD.format(
                "size",
                "count",
                "type",
                "redop",
                "root",
                "time",
                "algbw",
                "busbw",
                "#wrong",
                "time",
                "algbw",
                "busbw",
                "#wrong",
            )
        )
        out.append(
            _HEAD.format(
                "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""
            )
        )
        for r in (r for r in res.rows if r.op == op):
            out.append(
                f"  {r.size_bytes:>10}  {r.count:>12}  {r.dtype:>8}  {r.redop:>6}  {r.root:>6}"
                + _cols(r.out_of_place)
                + _cols(r.in_place)
            )
    return [ln.rstrip() for ln in out]


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
        parts.append(f"{acc.ranks} ranks on {acc.nodes} node{'s' if acc.nodes != 1 else ''}")
    parts.append(_transports(acc))
    if acc.channels is not None:
        p2p = f" ({acc.p2p_channels} for point-to-point)" if acc.p2p_channels is not None else ""
        parts.append(f"{acc.channels} channels{p2p}")
    nvls_env = acc.env.get("NCCL_NVLS_ENABLE") or res.env.get("NCCL_NVLS_ENABLE")
    if acc.nvls is True:
        parts.append(f"NVLS on ({acc.nvls_channels} channels)")
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


def text_report(res: CollectivesResult, findings: list[Finding]) -> list[str]:
    lines = table_lines(res)
    for fail in res.failures:
        at = f" at {human_size(fail.size_bytes)}" if fail.size_bytes else ""
        lines.append(f"# FAILED {fail.kind}: {fail.op or 'run'}{at}: {fail.message}")
    busy = [a for a in res.activity if (a.processes or 0) > 0 or (a.utilization_pct or 0) > 5]
    for a in busy:
        lines.append(f"# GPU{a.index} was busy: {a.utilization_pct}% utilisation, {a.processes} other processes")
    lines.append("")
    lines.append(nccl_paragraph(res))
    where = f"{res.world_size} ranks on {len(res.nodes) or 1} node(s)"
    wall = f", wall {res.wall_s:.1f} s" if res.wall_s else ""
    lines.append(f"{res.source} on {res.host or 'unknown host'}: {where}{wall}")
    for f in findings:
        lines.append(f"{f.code} {f.severity} {f.subject}: {f.message}")
    return lines


def collectives_json(res: CollectivesResult, findings: list[Finding]) -> dict[str, Any]:
    """The result as numbers (schema ``collectives`` v1, without the host snapshot) plus findings."""
    doc: dict[str, Any] = to_jsonable(res)
    doc.pop("snapshot", None)
    doc["account"] = nccl_paragraph(res)
    doc["findings"] = [asdict(f) for f in findings]
    return doc
