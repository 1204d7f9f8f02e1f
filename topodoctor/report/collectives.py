"""`topodoctor collectives` output: nccl-tests' table, NCCL's account in one paragraph, JSON.

The table keeps nccl-tests' columns and number formatting, so the two can be read side by
side (or diffed): size, count, type, redop, root, then time / algbw / busbw / #wrong for the
out-of-place and in-place forms. A form torch.distributed does not offer prints ``n/a``.
On a terminal narrower than that table (COLUMNS, or the terminal's own width) the type, redop
and root move into each op's heading and every longer line is wrapped; a pipe gets the whole
table, as nccl-tests prints it. JSON keeps everything either way.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from topodoctor.core.codec import to_jsonable
from topodoctor.core.text import human_size, plural
from topodoctor.core.text import text_width as core_width
from topodoctor.diagnosis.load import loads
from topodoctor.diagnosis.run import run_expectation
from topodoctor.model.collective_ops import SPECS
from topodoctor.model.collectives import CollectivesResult, Timing
from topodoctor.model.findings import Finding, finding_json
from topodoctor.model.nccl_summary import nccl_paragraph
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.report.causes import cause_line
from topodoctor.topology.busbw import PLATEAU_BYTES, Prediction
from topodoctor.topology.busbw_expect import Expectation, model_expectation

_HEAD = "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}"
_COMPACT = "# {:>10}  {:>12}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}"  # no type, redop, root
TABLE_WIDTH = 118  # nccl-tests' table, all columns
MODEL_MIN_BYTES = 64 << 20  # the model is of large messages: the table and --predict state it from here
MIN_WIDTH = 60  # narrower than this, wrapping helps nobody


def text_width() -> int:
    """The columns text may take (the one width policy, ``core.text.text_width``), never fewer
    than ``MIN_WIDTH``: in a pipe or a file nccl-tests' table stays whole."""
    return max(core_width(), MIN_WIDTH)


def fit(lines: Sequence[str], width: int | None) -> list[str]:
    """Every line no wider than ``width`` (None: as they are): a longer one wrapped at spaces, its
    continuation indented (a comment's still a comment)."""
    if not width:
        return list(lines)
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = "#   " if line.startswith("#") else "    "
        first = line[: len(line) - len(line.lstrip(" #"))]
        out += textwrap.wrap(
            line,
            width=width,
            initial_indent="",
            subsequent_indent=lead if len(first) < len(lead) else first,
            break_on_hyphens=False,
        ) or [line[:width]]
    return out


def _redop(op: str, redop: str) -> str:
    """nccl-tests' redop column: ``none`` for an op that reduces nothing, whatever a file said."""
    return "none" if SPECS[op].redop == "none" else redop


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


def table_lines(res: CollectivesResult, width: int | None = None) -> list[str]:
    """The results as nccl-tests prints them, one table per op; narrower than ``width`` allows,
    without the type, redop and root columns (each op's heading says them)."""
    compact = width is not None and width < TABLE_WIDTH
    out: list[str] = []
    for op in dict.fromkeys(r.op for r in res.rows):
        rows = [r for r in res.rows if r.op == op]
        if compact:
            r0 = rows[0]
            out.append(
                f"# {op} ({plural(res.world_size, 'rank')}, {res.backend}; {r0.dtype}, redop "
                f"{_redop(op, r0.redop)}, root {r0.root})"
            )
            out.append(f"# {'':>10}  {'':>12}  {'out-of-place':>29}  {'in-place':>29}")
            out.append(_COMPACT.format("size", "count", *("time", "algbw", "busbw", "#wrong") * 2))
            out.append(_COMPACT.format("(B)", "(elements)", *("(us)", "(GB/s)", "(GB/s)", "") * 2))
            out += [f"  {r.size_bytes:>10}  {r.count:>12}" + _cols(r.out_of_place) + _cols(r.in_place) for r in rows]
            continue
        out.append(f"# {op} ({plural(res.world_size, 'rank')}, {res.backend})")
        out.append(f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}  {'out-of-place':>29}  {'in-place':>29}")
        out.append(_HEAD.format("size", "count", "type", "redop", "root", *("time", "algbw", "busbw", "#wrong") * 2))
        out.append(_HEAD.format("(B)", "(elements)", "", "", "", *("(us)", "(GB/s)", "(GB/s)", "") * 2))
        for r in rows:
            out.append(
                f"  {r.size_bytes:>10}  {r.count:>12}  {r.dtype:>8}  {_redop(r.op, r.redop):>6}  {r.root:>6}"
                + _cols(r.out_of_place)
                + _cols(r.in_place)
            )
    return [ln.rstrip() for ln in out]


def text_report(
    res: CollectivesResult, findings: list[Finding], snap: HostSnapshot | None = None, width: int | None = None
) -> list[str]:
    """The whole text report: the table, NCCL's account of the run, the failures, busy GPUs and
    findings, fitted to ``width`` columns (None: unwrapped)."""
    lines = table_lines(res, width)
    lines += model_lines(res, snap or res.snapshot)
    for fail in res.failures:
        at = f" at {human_size(fail.size_bytes)}" if fail.size_bytes else ""
        lines.append(f"# FAILED {fail.kind}: {fail.op or 'run'}{at}: {fail.message}")
    for load in loads(snap or res.snapshot, res.activity).values():
        if load.busy:
            lines.append(f"# {load.describe()} when the run started")
    lines.append("")
    lines.append(nccl_paragraph(res))
    where = f"{plural(res.world_size, 'rank')} on {plural(len(res.nodes) or 1, 'node')}"
    wall = f", wall {res.wall_s:.1f} s" if res.wall_s else ""
    lines.append(f"{res.source} on {res.host or 'unknown host'}: {where}{wall}")
    for f in findings:
        lines.append(f"{f.code} {f.severity} {f.subject}: {f.message}")
        why = cause_line(f)
        if why is not None:
            lines.append(f"    {why}")
    return fit(lines, width)


def collectives_json(
    res: CollectivesResult, findings: list[Finding], snap: HostSnapshot | None = None
) -> dict[str, Any]:
    """The result as numbers (schema ``collectives`` v1, without the host snapshot) plus the
    topology's model per row (the table's model column) and the findings."""
    doc: dict[str, Any] = to_jsonable(res)
    doc.pop("snapshot", None)
    doc["account"] = nccl_paragraph(res)
    doc["expected"] = [
        {"op": e.op, "size_bytes": e.size_bytes, **e.evidence()}
        for e in expected_rows(res, snap or res.snapshot).values()
    ]
    doc["findings"] = [finding_json(f) for f in findings]
    return doc


def prediction_lines(
    preds: Sequence[Prediction],
    nccl_link_gbps: float | None = None,
    signalling_gbps: float | None = None,
    sizes: Sequence[int] = (),
) -> list[str]:
    """``collectives --predict``: the model's busbw per op (GB/s), the bottleneck it assumed, and
    which per-link rate that is (NCCL's model of the link, not the signalling rate ``scan`` shows);
    with ``sizes``, the model at each of them (busbw_expect.py: what TD001 and TD020 judge a run
    of that size by)."""
    if not preds:
        return []
    b = preds[0].bottleneck
    out = [
        f"# busbw the topology gives at 1 GiB: {plural(preds[0].ranks, 'rank')} on {plural(preds[0].nodes, 'node')}",
        f"# bottleneck: {b.what}; NCCL's channels fill {b.ring_gbps:g} of its {b.gbps:g} GB/s",
    ]
    if nccl_link_gbps:
        rate = f"{nccl_link_gbps:g} GB/s per NVLink is NCCL's own model of the link (its topology code)"
        if signalling_gbps and abs(signalling_gbps - nccl_link_gbps) > 0.05:
            rate += f"; `scan` shows {signalling_gbps:.4g} GB/s, the link's signalling rate"
        out.append(f"# {rate}")
    out.append(f"# {'op':<16} {'busbw (GB/s)':>12}  {'algorithm':<9} {'efficiency':>10}")
    out += [
        f"  {p.op:<16} {model_expectation(p, PLATEAU_BYTES).gbps:>12.1f}  {p.algorithm:<9} {p.efficiency:>10.3f}"
        for p in preds
    ]
    judged = [n for n in sizes if n >= MODEL_MIN_BYTES]
    if len(judged) < len(sizes):
        out.append(f"# under {human_size(MODEL_MIN_BYTES)} latency decides busbw: the model states no figure there")
    if judged:
        out.append(f"# busbw (GB/s) the topology's model gives at each size: {', '.join(map(human_size, judged))}")
        out.append(f"# {'op':<16} " + " ".join(f"{human_size(n):>7}" for n in judged))
        out += [f"  {p.op:<16} " + " ".join(f"{model_expectation(p, n).gbps:>7.1f}" for n in judged) for p in preds]
    return out


def prediction_doc(
    preds: Sequence[Prediction],
    nccl_link_gbps: float | None = None,
    signalling_gbps: float | None = None,
    sizes: Sequence[int] = (),
) -> dict[str, Any]:
    """The same as JSON (busbw in GB/s, 1e9 bytes per second); ``at_sizes``: the model at each of
    ``sizes``, with its basis, as a finding on a run of that size carries it."""
    link = {"nccl_model_gbps": nccl_link_gbps, "signalling_gbps": signalling_gbps}
    doc: dict[str, Any] = {"predictions": [to_jsonable(p) for p in preds], "nvlink_per_link": link}
    if sizes:  # from 64 MiB, where busbw is bandwidth's (the table and the rules state it from there)
        doc["at_sizes"] = [
            {"op": p.op, "size_bytes": n, **model_expectation(p, n).evidence()}
            for p in preds
            for n in sizes
            if n >= MODEL_MIN_BYTES
        ]
    return doc


def expected_rows(res: CollectivesResult, snap: HostSnapshot | None) -> dict[tuple[str, int], Expectation]:
    """The topology's model for each row of 64 MiB and more (busbw_expect.py: the one figure TD001
    and TD020 judge the row by and ``--predict`` states), keyed by (op, size); {} without a snapshot,
    across nodes, or where the topology does not say enough."""
    if snap is None:
        return {}
    out: dict[tuple[str, int], Expectation] = {}
    for r in res.rows:
        if r.size_bytes >= MODEL_MIN_BYTES and (r.op, r.size_bytes) not in out:
            e = run_expectation(snap, res, r.op, r.size_bytes)
            if e is not None and e.basis == "model":
                out[(r.op, r.size_bytes)] = e
    return out


def model_lines(res: CollectivesResult, snap: HostSnapshot | None) -> list[str]:
    """Per row: busbw measured, NCCL's own prediction (its TUNING log) and the topology's model.
    Rows of 64 MiB and more get the model (it is of large messages); any row NCCL logged a
    choice for gets NCCL's."""
    ours = expected_rows(res, snap)
    acc = res.nccl
    lines = []
    for r in res.rows:
        ch = acc.choice(r.op, r.size_bytes) if acc is not None else None
        e = ours.get((r.op, r.size_bytes))
        if r.best is None or (ch is None and e is None):
            continue
        nccl = "-" if ch is None or ch.predicted_busbw_gbps is None else f"{ch.predicted_busbw_gbps:.1f}"
        how = "-" if ch is None else f"{ch.algorithm}/{ch.protocol}/{ch.channels if ch.channels else '?'}"
        lines.append(
            f"  {r.op:<16} {human_size(r.size_bytes):>6} {r.best.busbw_gbps:>9.1f} {nccl:>8} {how:<18}"
            f" {'-' if e is None else f'{e.gbps:.1f}':>7}"
        )
    if not lines:
        return []
    head = f"# {'op':<16} {'size':>6} {'measured':>9} {'NCCL':>8} {'algo/proto/ch':<18} {'model':>7}"
    return ["# busbw (GB/s): measured, NCCL's own prediction and choice, the topology's model", head, *lines]


def model_busbw(res: CollectivesResult, snap: HostSnapshot | None) -> dict[str, float]:
    """The topology model's busbw at 1 GiB per op of a one-node run on ``snap`` ({} without a
    snapshot, across nodes, or where the topology does not say enough): the plot's dashed lines."""
    if snap is None:
        return {}
    got = {op: run_expectation(snap, res, op, PLATEAU_BYTES) for op in dict.fromkeys(r.op for r in res.rows)}
    return {op: e.gbps for op, e in got.items() if e is not None and e.basis == "model"}
