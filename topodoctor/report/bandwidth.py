"""`topodoctor bandwidth` output: matrices as text (rich), a verdict line, and JSON.

Every number carries its unit: in the cell where the matrix fits the console with it, else in
each column's heading. A cell a finding names is marked (``#``) and coloured by the finding's
severity, so the pair the verdict is about is found in the matrix at a glance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from topodoctor.core.codec import to_jsonable
from topodoctor.core.pci import long_bus_id
from topodoctor.core.text import plural, printable
from topodoctor.diagnosis.load import BUSY_UTIL_PCT
from topodoctor.model.copies import BOTH_WAYS_MODES, LATENCY_MODES, Activity, BandwidthResult, Measurement, Mode
from topodoctor.model.findings import SEVERITY_ORDER, Finding, failing
from topodoctor.report.check import counts
from topodoctor.report.terminal import literal

_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}
NOISY_PCT = 5.0  # a spread above this marks the cell: its median is less certain

TITLES: dict[Mode, str] = {
    "oneway": "One way, copy engine",
    "bidir": "Both ways at once, copy engine, each way",
    "latency": "Latency of a small copy, copy engine",
    "sm_oneway": "One way, SM kernel (receiver reads)",
    "sm_bidir": "Both ways at once, SM kernels, each way",
    "sm_latency": "Load latency, SM pointer chase (row reads column)",
}
PAIR_ORDER: tuple[Mode, ...] = ("oneway", "bidir", "latency", "sm_oneway", "sm_bidir", "sm_latency")
UNITS: dict[Mode, str] = {m: "us" if m in LATENCY_MODES else "GB/s" for m in PAIR_ORDER}
UNITS.update({"h2d": "GB/s", "d2h": "GB/s"})


def unit(mode: Mode) -> str:
    """The unit of a mode's values: GB/s (1e9 bytes/s) for copies, microseconds for latencies."""
    return UNITS[mode]


def unit_name(mode: Mode) -> str:
    """The unit as a title says it: ``GB/s``, ``microseconds (us)``."""
    return "microseconds (us)" if unit(mode) == "us" else unit(mode)


def number(v: float, mode: Mode) -> str:
    """A value as the matrices print it, without its unit: latencies to the nanosecond under 10 us."""
    if mode in LATENCY_MODES:
        return f"{v:.3f}" if v < 10 else f"{v:.1f}"
    return f"{v:.1f}"


def pair_value(m: Measurement | None, mode: Mode, forward: bool = True) -> float | None:
    """A pair's median in one direction: a both-ways measurement holds the pair's two directions."""
    if m is None or m.value is None:
        return None
    if mode in BOTH_WAYS_MODES and not forward:
        return m.reverse.median if m.reverse else None
    return m.value.median


def pair_cell(r: BandwidthResult, mode: Mode, a: int, b: int) -> tuple[Measurement | None, float | None]:
    """The measurement behind matrix cell (row ``a``, column ``b``) and its value: both-ways modes
    hold one measurement per pair, its reverse the row's higher GPU's direction."""
    if mode in BOTH_WAYS_MODES:
        m = r.find(mode, min(a, b), max(a, b))
        return m, pair_value(m, mode, forward=a < b)
    m = r.find(mode, a, b)
    return m, pair_value(m, mode)


def finding_modes(f: Finding) -> frozenset[str] | None:
    """The modes a finding is about (its evidence's ``mode`` or ``modes``), None for every mode."""
    ev = f.evidence if isinstance(f.evidence, dict) else {}
    modes = ev.get("modes") or ([ev["mode"]] if isinstance(ev.get("mode"), str) else None)
    return frozenset(str(m) for m in modes) if modes else None


def marked(findings: Sequence[Finding], mode: Mode) -> dict[tuple[int, int], str]:
    """(row, column) -> worst severity of the findings about that cell of ``mode``'s matrix: a pair's
    finding about this mode or about every mode; both cells of a pair unless it names one direction."""
    out: dict[tuple[int, int], str] = {}
    for f in findings:
        pair = _pair_of(f.subject)
        modes = finding_modes(f)
        if pair is None or (modes is not None and mode not in modes):
            continue
        copies = f.evidence.get("copies") if isinstance(f.evidence, dict) else None
        if copies:  # the measured copies it names: their cells (a both-ways copy's two)
            cells = [(c[1], c[2]) for c in copies if c[0] == mode]
            cells += [(b, a) for a, b in cells] if mode in BOTH_WAYS_MODES else []
        else:
            one_way = modes is not None and mode not in BOTH_WAYS_MODES and f.code.startswith("TD7")
            cells = [pair] if one_way else [pair, pair[::-1]]
        for cell in cells:
            seen = out.get(cell)
            if seen is None or SEVERITY_ORDER[f.severity] > SEVERITY_ORDER[seen]:
                out[cell] = f.severity
    return out


def _pair_of(subject: str) -> tuple[int, int] | None:
    a, dash, b = subject.partition("-")
    if not dash or not (a.startswith("GPU") and b.startswith("GPU")) or not (a[3:].isdigit() and b[3:].isdigit()):
        return None
    return int(a[3:]), int(b[3:])


def _text(m: Measurement | None, v: float | None, mode: Mode, with_unit: bool, flagged: bool) -> str:
    if m is None:
        return "-"
    if m.skipped is not None:
        return "n/a"
    if m.error is not None:
        return "HUNG" if m.error.startswith("timeout") else "ERR"
    if v is None:
        return "-"
    marks = ("*" if m.path == "staged" else "") + ("!" if m.verified is False else "")
    marks += "~" if m.value is not None and m.value.spread_pct > NOISY_PCT else ""
    marks += "#" if flagged else ""
    return f"{number(v, mode)}{' ' + unit(mode) if with_unit else ''}{marks}"


def _pair_table(r: BandwidthResult, mode: Mode, findings: Sequence[Finding], width: int) -> Table:
    idx = [g.index for g in r.gpus]
    marks = marked(findings, mode)
    cells: dict[tuple[int, int], tuple[Measurement | None, float | None, str | None]] = {}
    for a in idx:
        for b in idx:
            if a != b:
                cells[(a, b)] = (*pair_cell(r, mode, a, b), marks.get((a, b)))
    # the unit in every cell where the table still fits; else in every column's heading
    longest = max((len(_text(m, v, mode, True, f is not None)) for m, v, f in cells.values()), default=4)
    with_unit = 10 + len(idx) * (max(longest, 6) + 3) <= width
    title = f"{TITLES[mode]}, {unit_name(mode)}"
    t = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", min_width=min(len(title), width))
    t.add_column("from \\ to")
    for b in idx:
        t.add_column(f"GPU{b}" if with_unit else f"GPU{b} {unit(mode)}", justify="right", no_wrap=True)
    for a in idx:
        row: list[Text] = []
        for b in idx:
            if a == b:
                row.append(Text(""))
                continue
            m, v, f = cells[(a, b)]
            style = _STYLE[f] if f is not None else ""
            row.append(Text(_text(m, v, mode, with_unit, f is not None), style=style))
        t.add_row(f"GPU{a}", *row)
    return t


def _host_cell(m: Measurement | None) -> str:
    return _text(m, m.value.median if m is not None and m.value is not None else None, "h2d", True, False)


def _host_table(r: BandwidthResult) -> Table:
    t = Table(title="Host copies (pinned memory), GB/s", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("GPU", "bus id", "host -> GPU", "GPU -> host"):
        t.add_column(col, no_wrap=True)
    for g in r.gpus:
        t.add_row(
            f"GPU{g.index}",
            printable(long_bus_id(g.bus_id)),
            _host_cell(r.find("h2d", -1, g.index)),
            _host_cell(r.find("d2h", g.index, -1)),
        )
    return t


def print_bandwidth(
    r: BandwidthResult,
    console: Console,
    findings: Sequence[Finding] = (),
    matrix: bool = True,
    fail_level: str = "error",
) -> None:
    """The result (matrices unless ``matrix`` is off), the bandwidth rules' findings and the
    verdict line."""
    if matrix:
        _print_matrices(r, console, findings)
    for f in findings:
        console.print(literal(f"{f.code} {f.severity} {f.subject}: {f.message}", _STYLE.get(f.severity, "")))
    console.print(verdict_line(r, findings, fail_level))


def not_measured(r: BandwidthResult) -> list[str]:
    """Why the modes that could not run here did not (each reason once)."""
    return list(dict.fromkeys(f"{m.mode.replace('_', '-')}: {m.skipped}" for m in r.measurements if m.skipped))


def verdict_line(r: BandwidthResult, findings: Sequence[Finding], fail_level: str = "error") -> Text:
    """``HEALTHY``/``UNHEALTHY``, the findings counted, what was measured, what was not."""
    bad = failing(findings, fail_level)
    taken = [m for m in r.measurements if m.skipped is None]
    skipped = sorted({m.mode.replace("_", "-") for m in r.measurements if m.skipped})
    if len(skipped) == 3 and all(m.startswith("sm-") for m in skipped):
        skipped = ["SM modes"]  # the usual case: no SM kernels here, said in full above
    style = "bold red" if bad else "yellow" if skipped else "green"
    word = "UNHEALTHY" if bad else "COULD NOT CHECK" if skipped and not taken else "HEALTHY"
    line = Text(word, style=style)
    why = f"; {', '.join(sorted({f.code for f in bad}))} failed" if bad else ""
    missed = f"; {', '.join(skipped)} not measured" if skipped else ""
    line.append(
        printable(
            f": {counts(findings)}{why}; {plural(len(taken), 'measurement')} on {plural(len(r.gpus), 'GPU')} "
            f"in {r.wall_s:.1f} s{missed} (fail level: {fail_level})"
        )
    )
    return line


def _others(r: BandwidthResult, a: Activity) -> tuple[int | None, int]:
    """(the processes on a GPU at the start that are not topodoctor's own, every process seen
    there): from the snapshot's list where it has one (the copy timer is on it by then, ours),
    else every process NVML counted, none of them known to be ours."""
    gpu = next((g for g in r.snapshot.gpus if g.index == a.index), None) if r.snapshot is not None else None
    listed = gpu.compute_processes if gpu is not None else None
    if isinstance(listed, tuple):
        return sum(1 for p in listed if not p.ours), len(listed)
    return a.processes, a.processes or 0


def _print_matrices(r: BandwidthResult, console: Console, findings: Sequence[Finding]) -> None:
    if r.settings.get("posted"):  # another tool's matrices: neither torch nor a wall time of ours
        console.print(literal(f"{r.method}, judged against {r.host}'s topology"))
        left = r.settings.get("left_out")
        if isinstance(left, list) and left:
            console.print(literal(f"not judged: {'; '.join(map(str, left))}"))
    else:
        console.print(literal(f"{r.method}; torch {r.torch_version or '-'}, CUDA {r.cuda_version}; {r.wall_s:.1f} s"))
    console.print(
        literal(
            "rows: source GPU, columns: destination GPU; GB/s = 1e9 bytes/s; * staged through host memory "
            "(no P2P), ! data mismatch, "
            f"~ spread (max-min)/median over {NOISY_PCT:.0f} %, # named by a finding below"
        )
    )
    for a in r.activity:
        others, listed = _others(r, a)
        # as TD707 judges it: someone else's process, or where none shows at all, half the GPU busy
        if others or (not listed and (a.utilization_pct or 0) >= BUSY_UTIL_PCT):
            busy_with = plural(others, "other process")
            console.print(Text(f"GPU{a.index} was not idle: {a.utilization_pct} % busy, {busy_with}", "yellow"))
    seen = [m for m in r.measurements if m.mode == "oneway" and m.nvlink_bytes is not None and m.value]
    if seen:
        over = sum(1 for m in seen if m.nvlink_bytes and m.nvlink_bytes >= m.size_bytes)
        console.print(f"NVLink byte counters: {over} of {len(seen)} one-way pairs sent their copies over NVLink")
    modes = {m.mode for m in r.measurements if m.skipped is None}
    for mode in PAIR_ORDER:
        if mode in modes:
            console.print(_pair_table(r, mode, findings, console.width))
            spread = [m.value.spread_pct for m in r.measurements if m.mode == mode and m.value is not None]
            if spread:
                lo, hi = f"{min(spread):.1f}", f"{max(spread):.1f}"
                console.print(literal(f"  spread (max-min)/median: {lo if lo == hi else f'{lo}-{hi}'} %"))
    if modes & {"h2d", "d2h"}:
        console.print(_host_table(r))
    for why in not_measured(r):
        console.print(literal(f"not measured: {why}", "yellow"))
    for m in r.measurements:
        if m.error:
            console.print(literal(f"{m.mode} {m.src}->{m.dst}: {m.error}", "red"))


def _median(m: Measurement | None) -> float | None:
    return m.value.median if m is not None and m.value is not None else None


def bandwidth_json(r: BandwidthResult) -> dict[str, Any]:
    """The result as ``bandwidth --format json`` prints it: the result itself plus the median matrices
    (one way and latency per mode, both ways each direction and summed per pair) and their units."""
    idx = [g.index for g in r.gpus]
    doc: dict[str, Any] = to_jsonable(r)
    matrices: dict[str, Any] = {}
    units: dict[str, str] = {}
    measured = {m.mode for m in r.measurements if m.skipped is None}
    for mode in ("oneway", "latency", "sm_oneway", "sm_latency"):
        cells = r.matrix(mode)
        if mode in measured:
            matrices[mode] = [[_median(cells.get((a, b))) for b in idx] for a in idx]
            units[mode] = unit(mode)
    for mode in BOTH_WAYS_MODES:
        if mode not in measured:
            continue

        def each(a: int, b: int, mode: Mode = mode) -> float | None:
            return None if a == b else pair_cell(r, mode, a, b)[1]

        def total(a: int, b: int, mode: Mode = mode) -> float | None:
            m = r.find(mode, min(a, b), max(a, b))
            if a == b or m is None or m.value is None:
                return None
            return m.value.median + (m.reverse.median if m.reverse else 0.0)

        matrices[f"{mode}_total"] = [[total(a, b) for b in idx] for a in idx]
        matrices[f"{mode}_each"] = [[each(a, b) for b in idx] for a in idx]
        units[f"{mode}_total"] = units[f"{mode}_each"] = "GB/s"
    matrices["gpus"] = idx
    matrices["units"] = units
    doc["matrices"] = matrices
    doc["not_measured"] = not_measured(r)
    return doc
