"""Bandwidth heatmaps: a result's pair matrices as SVG, one panel per mode measured (one way and
both ways by the copy engine and by SM kernels, and the latencies), values and units in the cells.

Colour is a pair's share of what its path should carry, on a linear scale: a copy's share of its
links' nominal rate (the topology's), a latency's share of the host's norm for that mode (the
median over the pair's). A pair at 60 % of its peers reads three shades darker than they do,
where a log scale of GB/s had coloured 236 and 394 GB/s almost alike. A pair a finding names gets
a red frame and the finding's code in its cell. The colour is a scale for the eye; the rules judge.
"""

from __future__ import annotations

from collections.abc import Sequence

from topodoctor.core.stats import median
from topodoctor.model.copies import LATENCY_MODES, BandwidthResult, Measurement, Mode
from topodoctor.model.findings import SEVERITY_ORDER, Finding
from topodoctor.report.bandwidth import PAIR_ORDER, TITLES, marked, number, pair_cell, unit, unit_name
from topodoctor.report.svg import Svg
from topodoctor.topology.copy_rates import expected_pairs

# A perceptually even ramp (viridis stops), low to high.
RAMP = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")
CELL = 96.0
MARGIN = 28.0
GAP = 40.0
LABEL_W = 52.0
PER_ROW = 2  # panels side by side
INK = "#1f2933"
MUTED = "#6b7280"
FLAGGED = "#dc2626"


def _hex(c: str) -> tuple[int, int, int]:
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)


def colour(share: float) -> str:
    """A share (0 to 1, clipped) onto the ramp, linearly."""
    t = min(max(share, 0.0), 1.0) * (len(RAMP) - 1)
    i = min(int(t), len(RAMP) - 2)
    f = t - i
    a, b = _hex(RAMP[i]), _hex(RAMP[i + 1])
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def _ink_on(fill: str) -> str:
    r, g, b = _hex(fill)
    return INK if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#ffffff"


def shares(r: BandwidthResult, mode: Mode) -> dict[tuple[int, int], tuple[float, str]]:
    """(row, column) -> (share, what it is a share of) for every measured cell of a mode."""
    nominal: dict[tuple[int, int], float] = {}
    if r.snapshot is not None:
        nominal = {k: e.nominal_gbps for k, e in expected_pairs(r.snapshot).items() if e.nominal_gbps}
    idx = [g.index for g in r.gpus]
    values = {(a, b): pair_cell(r, mode, a, b)[1] for a in idx for b in idx if a != b}
    taken = {k: v for k, v in values.items() if v is not None and v > 0}
    out: dict[tuple[int, int], tuple[float, str]] = {}
    if mode in LATENCY_MODES:
        norm = median(list(taken.values())) if taken else 0.0
        for k, v in taken.items():
            out[k] = (norm / v, f"of {number(norm, mode)} {unit(mode)}")
        return out
    best = max(taken.values(), default=0.0)
    for k, v in taken.items():
        if k in nominal:
            out[k] = (v / nominal[k], f"of {nominal[k]:.0f} GB/s")
        else:
            out[k] = (v / best, "of the best pair")
    return out


def _label(m: Measurement | None) -> str | None:
    if m is None:
        return None
    if m.skipped is not None:
        return "n/a"
    if m.error is not None:
        return "HUNG" if m.error.startswith("timeout") else "ERR"
    return None


def _panel(
    svg: Svg, r: BandwidthResult, mode: Mode, x0: float, y0: float, flags: dict[tuple[int, int], tuple[str, str]]
) -> None:
    idx = [g.index for g in r.gpus]
    share = shares(r, mode)
    svg.text(x0, y0, f"{TITLES[mode]}, {unit_name(mode)}", 13, font_weight="bold", fill=INK)
    top, left = y0 + 30, x0 + LABEL_W
    for j, b in enumerate(idx):
        svg.text(left + j * CELL + CELL / 2, top - 6, f"GPU{b}", 11, fill=MUTED, text_anchor="middle")
    for i, a in enumerate(idx):
        y = top + i * CELL
        svg.text(x0, y + CELL / 2 + 4, f"GPU{a}", 11, fill=MUTED)
        for j, b in enumerate(idx):
            x, mid = left + j * CELL, left + j * CELL + CELL / 2 - 1
            if a == b:
                svg.rect(x, y, CELL - 2, CELL - 2, fill="#f3f4f6")
                continue
            m, v = pair_cell(r, mode, a, b)
            flag = flags.get((a, b))
            frame = {"stroke": FLAGGED, "stroke_width": 3} if flag else {}
            label = _label(m)
            if label is not None or v is None:
                failed = label not in (None, "n/a")
                fill, edge = ("#fee2e2", FLAGGED) if failed else ("#ffffff", "#e5e7eb")
                svg.rect(x, y, CELL - 2, CELL - 2, fill=fill, stroke=edge, data_pair=f"{a}-{b}")
                ink = "#b91c1c" if failed else MUTED
                svg.text(mid, y + CELL / 2 + 5, label or "-", 14, fill=ink, text_anchor="middle", font_weight="bold")
                continue
            s, of = share.get((a, b), (1.0, ""))
            fill = colour(s)
            ink = _ink_on(fill)
            value = {
                "data_us" if mode in LATENCY_MODES else "data_gbps": f"{v:.4g}" if mode in LATENCY_MODES else f"{v:.1f}"
            }
            svg.rect(x, y, CELL - 2, CELL - 2, fill=fill, data_pair=f"{a}-{b}", **value, **frame)
            svg.text(mid, y + 30, number(v, mode), 15, fill=ink, text_anchor="middle", font_weight="bold")
            svg.text(mid, y + 46, f"{unit(mode)} · {100 * s:.0f} %", 9.5, fill=ink, text_anchor="middle")
            svg.text(mid, y + 58, of, 8.5, fill=ink, text_anchor="middle")
            notes = [n for n, on in (("staged", m is not None and m.path == "staged"),
                                     ("DATA!", m is not None and m.verified is False)) if on]  # fmt: skip
            if flag:
                notes.append(flag[1])
            if notes:
                svg.text(mid, y + 76, " ".join(notes), 10, fill=ink, text_anchor="middle", font_weight="bold")


def _flags(findings: Sequence[Finding], mode: Mode) -> dict[tuple[int, int], tuple[str, str]]:
    """(row, column) -> (severity, codes) of the findings (warning and worse) about a cell of this
    mode's matrix."""
    worth = [f for f in findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["warning"]]
    out: dict[tuple[int, int], tuple[str, str]] = {}
    for cell, severity in marked(worth, mode).items():
        codes = sorted({f.code for f in worth if marked([f], mode).get(cell)})
        out[cell] = (severity, " ".join(codes[:2]))
    return out


def _scale(svg: Svg, x0: float, y0: float, width: float) -> None:
    steps = 50
    for k in range(steps):
        svg.rect(x0 + k * width / steps, y0, width / steps + 0.5, 12, fill=colour((k + 0.5) / steps))
    for tick in (0, 25, 50, 75, 100):
        x = x0 + width * tick / 100
        svg.line(x, y0 + 12, x, y0 + 17, stroke=MUTED)
        svg.text(x, y0 + 29, f"{tick} %", 10, fill=MUTED, text_anchor="middle")
    svg.text(
        x0, y0 + 46, "colour: a copy's share of its links' nominal rate, a latency's of the host's", 10, fill=MUTED
    )
    svg.text(x0, y0 + 60, "median for it (linear); a red frame: a pair a finding names", 10, fill=MUTED)


def draw_heatmap(r: BandwidthResult, findings: Sequence[Finding] = ()) -> str:
    """The pair matrices of a result (those it holds) as SVG text; pairs the findings name framed."""
    modes = [m for m in PAIR_ORDER if any(x.mode == m and x.skipped is None for x in r.measurements)]
    n = len(r.gpus)
    panel_w = LABEL_W + max(n, 1) * CELL
    panel_h = 30 + max(n, 1) * CELL + 40
    cols = min(PER_ROW, max(len(modes), 1))
    rows = max(1, -(-len(modes) // PER_ROW))
    width = max(MARGIN * 2 + cols * panel_w + (cols - 1) * GAP, 640.0)
    height = 86 + rows * panel_h + 100
    models = sorted({g.name for g in r.gpus})
    title = f"{r.host}: {n} × {', '.join(models) or 'GPU'}"
    svg = Svg(width, height, f"{title} bandwidth")
    svg.text(MARGIN, 30, title, 17, font_weight="bold", fill=INK)
    svg.text(MARGIN, 50, f"{r.method} · CUDA {r.cuda_version} · GB/s = 1e9 bytes/s", 11, fill=MUTED)
    for k, mode in enumerate(modes):
        x = MARGIN + (k % PER_ROW) * (panel_w + GAP)
        y = 86 + (k // PER_ROW) * panel_h
        _panel(svg, r, mode, x, y, _flags(findings, mode))
    if not modes:
        svg.text(MARGIN, 100, "no GPU pair measurements in this result", 13, fill=MUTED)
    _scale(svg, MARGIN + LABEL_W, height - 80, min(width - 2 * MARGIN - 60, 420.0))
    return svg.render()
