"""`topodoctor bandwidth` output: matrices as text (rich) and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from topodoctor.core.codec import to_jsonable
from topodoctor.core.text import plural, printable
from topodoctor.model.copies import BandwidthResult, Measurement, Mode
from topodoctor.model.findings import Finding
from topodoctor.report.terminal import literal
from topodoctor.rules.bandwidth import SLOW_VS_NOMINAL
from topodoctor.topology.copy_rates import expected_pairs

_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow"}

_TITLES: dict[Mode, str] = {
    "oneway": "One-way bandwidth, GB/s",
    "bidir": "Both-ways bandwidth, GB/s, sum of the two directions",
    "latency": "Latency of one small copy, microseconds",
}


def _cell(m: Measurement | None, bidir: bool = False) -> str:
    if m is None:
        return "-"
    if m.error is not None:
        return "HUNG" if m.error.startswith("timeout") else "ERR"
    assert m.value is not None
    v = m.value.median + (m.reverse.median if bidir and m.reverse else 0.0)
    mark = "*" if m.path == "staged" else ""
    bad = "!" if m.verified is False else ""
    return f"{v:.1f}{mark}{bad} ±{m.value.spread_pct:.1f}%"


def _ratio_style(expected: dict[tuple[int, int], Any], mode: Mode, a: int, b: int, m: Measurement | None) -> str:
    """Colour by share of the path's nominal rate: red below the share the bandwidth rules flag
    (SLOW_VS_NOMINAL), yellow below 0.7, green above. A scale for the eye; the rules judge."""
    if mode == "latency" or m is None or m.value is None:
        return ""
    exp = expected.get((a, b))
    if exp is None or not exp.nominal_gbps:
        return ""
    value = m.value.median + (m.reverse.median if mode == "bidir" and m.reverse else 0.0)
    ratio = value / (exp.nominal_gbps * (2 if mode == "bidir" else 1))
    return "red" if ratio < SLOW_VS_NOMINAL else "yellow" if ratio < 0.7 else "green"


def _expected(r: BandwidthResult) -> dict[tuple[int, int], Any]:
    if r.snapshot is None:
        return {}

    return dict(expected_pairs(r.snapshot))


def _pair_table(r: BandwidthResult, mode: Mode) -> Table:
    from rich.text import Text

    idx = [g.index for g in r.gpus]
    cells = r.matrix(mode)
    expected = _expected(r)
    unit = "" if mode == "latency" else "; GB/s = 1e9 bytes/s"
    t = Table(title=f"{_TITLES[mode]} (rows: source GPU, columns: destination GPU{unit})")
    t.add_column("src \\ dst")
    for b in idx:
        t.add_column(f"GPU{b}", justify="right")
    for a in idx:
        row: list[Text] = []
        for b in idx:
            if a == b:
                row.append(Text(""))
                continue
            m = cells.get((min(a, b), max(a, b))) if mode == "bidir" else cells.get((a, b))
            row.append(Text(_cell(m, bidir=mode == "bidir"), style=_ratio_style(expected, mode, a, b, m)))
        t.add_row(f"GPU{a}", *row)
    return t


def _host_table(r: BandwidthResult) -> Table:
    t = Table(title="Host copies, GB/s (pinned memory)")
    for col in ("GPU", "bus id", "host -> GPU", "GPU -> host"):
        t.add_column(col, no_wrap=col == "bus id")
    for g in r.gpus:
        t.add_row(
            f"GPU{g.index}", printable(g.bus_id), _cell(r.find("h2d", -1, g.index)), _cell(r.find("d2h", g.index, -1))
        )
    return t


def print_bandwidth(
    r: BandwidthResult, console: Console, findings: Sequence[Finding] = (), matrix: bool = True
) -> None:
    """The result (matrices unless ``matrix`` is off) and the bandwidth rules' findings."""
    if matrix:
        _print_matrices(r, console)
    for f in findings:
        console.print(literal(f"{f.code} {f.severity} {f.subject}: {f.message}", _STYLE.get(f.severity, "")))


def _print_matrices(r: BandwidthResult, console: Console) -> None:
    console.print(
        literal(
            f"{r.method}; torch {r.torch_version}, CUDA {r.cuda_version}; {r.wall_s:.1f} s; "
            "* = staged through host memory (no P2P), ! = data mismatch, ±spread = (max-min)/median"
        )
    )
    busy = [a for a in r.activity if (a.processes or 0) > 0 or (a.utilization_pct or 0) > 5]
    for a in busy:
        busy_with = plural(a.processes, "process")
        console.print(Text(f"GPU{a.index} was not idle: {a.utilization_pct}% busy, {busy_with}", "yellow"))
    seen = [m for m in r.measurements if m.mode == "oneway" and m.nvlink_bytes is not None and m.value]
    if seen:
        over = sum(1 for m in seen if m.nvlink_bytes and m.nvlink_bytes >= m.size_bytes)
        console.print(f"NVLink byte counters: {over} of {len(seen)} one-way pairs sent their copies over NVLink")
    modes = {m.mode for m in r.measurements}
    for mode in ("oneway", "bidir", "latency"):
        if mode in modes:
            console.print(_pair_table(r, mode))
    if modes & {"h2d", "d2h"}:
        console.print(_host_table(r))
    for m in r.measurements:
        if m.error:
            console.print(literal(f"{m.mode} {m.src}->{m.dst}: {m.error}", "red"))


def _median(m: Measurement | None) -> float | None:
    return m.value.median if m is not None and m.value is not None else None


def bandwidth_json(r: BandwidthResult) -> dict[str, Any]:
    """The result as ``bandwidth --format json`` prints it: the result itself plus the median matrices
    (one way, latency, and both ways summed per pair)."""
    idx = [g.index for g in r.gpus]
    doc: dict[str, Any] = to_jsonable(r)
    matrices: dict[str, Any] = {}
    for mode in ("oneway", "latency"):
        cells = r.matrix(mode)
        if cells:
            matrices[mode] = [[_median(cells.get((a, b))) for b in idx] for a in idx]
    bid = r.matrix("bidir")
    if bid:

        def total(a: int, b: int) -> float | None:
            m = bid.get((min(a, b), max(a, b)))
            if m is None or m.value is None:
                return None
            return m.value.median + (m.reverse.median if m.reverse else 0.0)

        matrices["bidir_total"] = [[None if a == b else total(a, b) for b in idx] for a in idx]
    matrices["gpus"] = idx
    doc["matrices"] = matrices
    return doc
