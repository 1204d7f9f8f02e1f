"""Bandwidth heatmaps: one-way and both-ways GPU pair matrices as SVG, values in the cells.

The colour scale is fixed (log, 1 to 2000 GB/s) rather than stretched to each result, so the
pictures of two hosts compare at a glance. Each cell also gives the share of the path's
nominal rate (from the topology), which is a scale, not a verdict: the bandwidth rules judge.
"""

from __future__ import annotations

import math

from topodoctor.model.copies import BandwidthResult, Measurement
from topodoctor.report.svg import Svg
from topodoctor.topology.copy_rates import expected_pairs

SCALE_GBPS = (1.0, 2000.0)  # PCIe Gen3 x1 to NVLink 5 both ways
# A perceptually even ramp (viridis stops), low to high.
RAMP = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")
CELL = 82.0
MARGIN = 28.0
INK = "#1f2933"
MUTED = "#6b7280"


def _hex(c: str) -> tuple[int, int, int]:
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)


def colour(gbps: float) -> str:
    """The fixed scale: log10 of GB/s from 1 to 1000 onto the ramp."""
    lo, hi = (math.log10(v) for v in SCALE_GBPS)
    t = (math.log10(max(gbps, SCALE_GBPS[0])) - lo) / (hi - lo)
    t = min(max(t, 0.0), 1.0) * (len(RAMP) - 1)
    i = min(int(t), len(RAMP) - 2)
    f = t - i
    a, b = _hex(RAMP[i]), _hex(RAMP[i + 1])
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def _ink_on(fill: str) -> str:
    r, g, b = _hex(fill)
    return INK if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#ffffff"


def _value(m: Measurement | None, both: bool) -> float | None:
    if m is None or m.value is None:
        return None
    return m.value.median + (m.reverse.median if both and m.reverse else 0.0)


def _panel(
    svg: Svg, r: BandwidthResult, mode: str, x0: float, y0: float, nominal: dict[tuple[int, int], float]
) -> None:
    idx = [g.index for g in r.gpus]
    both = mode == "bidir"
    cells = r.matrix("bidir" if both else "oneway")
    title = (
        "Both ways, GB/s (sum of the two directions)" if both else "One way, GB/s (row: source, column: destination)"
    )
    svg.text(x0, y0, title, 13, font_weight="bold", fill=INK)
    top = y0 + 30
    left = x0 + 52
    for j, b in enumerate(idx):
        svg.text(left + j * CELL + CELL / 2, top - 6, f"GPU{b}", 11, fill=MUTED, text_anchor="middle")
    for i, a in enumerate(idx):
        y = top + i * CELL
        svg.text(x0, y + CELL / 2 + 4, f"GPU{a}", 11, fill=MUTED)
        for j, b in enumerate(idx):
            x = left + j * CELL
            key = (min(a, b), max(a, b)) if both else (a, b)
            m = cells.get(key)
            if a == b:
                svg.rect(x, y, CELL - 2, CELL - 2, fill="#f3f4f6")
                continue
            v = _value(m, both)
            if m is not None and m.error is not None:
                svg.rect(x, y, CELL - 2, CELL - 2, fill="#fee2e2", stroke="#dc2626", data_pair=f"{a}-{b}")
                label = "HUNG" if m.error.startswith("timeout") else "ERR"
                svg.text(
                    x + CELL / 2 - 1,
                    y + CELL / 2 + 5,
                    label,
                    14,
                    fill="#b91c1c",
                    text_anchor="middle",
                    font_weight="bold",
                )
                continue
            if v is None:
                svg.rect(x, y, CELL - 2, CELL - 2, fill="#ffffff", stroke="#e5e7eb")
                svg.text(x + CELL / 2 - 1, y + CELL / 2 + 4, "-", 12, fill=MUTED, text_anchor="middle")
                continue
            fill = colour(v)
            ink = _ink_on(fill)
            svg.rect(x, y, CELL - 2, CELL - 2, fill=fill, data_pair=f"{a}-{b}", data_gbps=f"{v:.1f}")
            svg.text(
                x + CELL / 2 - 1, y + CELL / 2 - 2, f"{v:.1f}", 15, fill=ink, text_anchor="middle", font_weight="bold"
            )
            ref = nominal.get((a, b))
            notes = []
            if ref:
                ref = ref * (2 if both else 1)
                notes.append(f"{100 * v / ref:.0f}% of {ref:.0f}")
            if m is not None and m.path == "staged":
                notes.append("staged")
            if m is not None and m.verified is False:
                notes.append("DATA!")
            if notes:
                svg.text(x + CELL / 2 - 1, y + CELL / 2 + 16, " · ".join(notes), 9.5, fill=ink, text_anchor="middle")


def _scale(svg: Svg, x0: float, y0: float, width: float) -> None:
    steps = 60
    lo, hi = (math.log10(v) for v in SCALE_GBPS)
    for k in range(steps):
        v = 10 ** (lo + (hi - lo) * (k + 0.5) / steps)
        svg.rect(x0 + k * width / steps, y0, width / steps + 0.5, 12, fill=colour(v))
    lo, hi = (math.log10(v) for v in SCALE_GBPS)
    for tick in (1, 10, 100, 1000):
        x = x0 + width * (math.log10(tick) - lo) / (hi - lo)
        svg.line(x, y0 + 12, x, y0 + 17, stroke=MUTED)
        svg.text(x, y0 + 29, f"{tick} GB/s", 10, fill=MUTED, text_anchor="middle")


def draw_heatmap(r: BandwidthResult) -> str:
    """The one-way and both-ways matrices of a result (those it holds) as SVG text."""
    modes = [m for m in ("oneway", "bidir") if r.matrix(m)]
    n = len(r.gpus)
    nominal: dict[tuple[int, int], float] = {}
    if r.snapshot is not None:
        nominal = {k: e.nominal_gbps for k, e in expected_pairs(r.snapshot).items() if e.nominal_gbps}
    panel_w = 52 + max(n, 1) * CELL
    width = max(MARGIN * 2 + len(modes) * panel_w + (len(modes) - 1) * 40, 560.0)
    height = 70 + 30 + max(n, 1) * CELL + 80
    models = sorted({g.name for g in r.gpus})
    title = f"{r.host}: {n} × {', '.join(models) or 'GPU'}"
    svg = Svg(width, height, f"{title} bandwidth")
    svg.text(MARGIN, 30, title, 17, font_weight="bold", fill=INK)
    svg.text(
        MARGIN, 50, f"{r.method} · torch {r.torch_version}, CUDA {r.cuda_version} · GB/s = 1e9 bytes/s", 11, fill=MUTED
    )
    for k, mode in enumerate(modes):
        _panel(svg, r, mode, MARGIN + k * (panel_w + 40), 86, nominal)
    if not modes:
        svg.text(MARGIN, 100, "no GPU pair measurements in this result", 13, fill=MUTED)
    _scale(svg, MARGIN + 52, height - 50, min(width - 2 * MARGIN - 60, 420.0))
    return svg.render()
