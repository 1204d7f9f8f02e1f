"""Collectives picture: bus bandwidth against message size, one line per op, beside what the
op should reach (a dashed line in the same colour) where an expectation is known; the subtitle
names where the expectations come from, and promises no dashed line the picture does not draw.

It reads a small plain shape, ``Series`` (per op: (size_bytes, busbw_gbps) points and an
optional expected GB/s); ``series_from_result`` builds it from a collectives result, or from
anything with ``rows`` of ``op``, ``size_bytes`` and ``best.busbw_gbps``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from topodoctor.report.svg import Svg

INK = "#1f2933"
MUTED = "#6b7280"
GRID = "#e5e7eb"
# Distinct on white and for the common colour-blind types (Okabe-Ito).
COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")


@dataclass(frozen=True)
class Series:
    """One op's line on the plot: its (size, busbw) points and the busbw expected of it, where known."""

    op: str
    points: tuple[tuple[int, float], ...]  # (size_bytes, busbw_gbps), any order
    expected_gbps: float | None = None


class _Timing(Protocol):
    @property
    def busbw_gbps(self) -> float: ...


class _Row(Protocol):
    @property
    def op(self) -> str: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def best(self) -> _Timing | None: ...


class _Result(Protocol):
    @property
    def rows(self) -> Sequence[_Row]: ...


def series_from_result(result: _Result, expected: Mapping[str, float] | None = None) -> list[Series]:
    """Series per op, in the order the ops first appear, from a collectives result's rows."""
    points: dict[str, list[tuple[int, float]]] = {}
    for row in result.rows:
        best = row.best
        if best is not None:
            points.setdefault(str(row.op), []).append((int(row.size_bytes), float(best.busbw_gbps)))
    return [Series(op, tuple(sorted(p)), (expected or {}).get(op)) for op, p in points.items()]


def _size(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(v))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * step >= v:
            return m * step
    return 10.0 * step


def draw_collectives(
    series: Iterable[Series],
    title: str = "Collectives: bus bandwidth by message size",
    expected_from: str = "what the op should reach",
) -> str:
    """The plot as SVG text: log-scale sizes across, GB/s up, a line per op and its expectation
    (``expected_from`` says where the expectations come from, in the subtitle, when any is drawn)."""
    # A log axis has no place for empty messages (nccl-tests prints size 0 where a rank's share rounds down).
    data = [Series(s.op, tuple(p for p in s.points if p[0] > 0), s.expected_gbps) for s in series]
    data = [s for s in data if s.points]
    width, height = 860.0, 520.0
    left, right, top, bottom = 70.0, 190.0, 70.0, 60.0
    pw, ph = width - left - right, height - top - bottom
    svg = Svg(width, height, title)
    svg.text(28, 32, title, 16, font_weight="bold", fill=INK)
    subtitle = "busbw as nccl-tests defines it (GB/s = 1e9 bytes/s)"
    if any(s.expected_gbps for s in data):
        subtitle += f"; dashed: {expected_from}"
    svg.text(28, 50, subtitle, 11, fill=MUTED)
    if not data:
        svg.text(left, top + ph / 2, "no collective measurements to plot", 13, fill=MUTED)
        return svg.render()
    sizes = [p[0] for s in data for p in s.points if p[0] > 0]
    lo = math.floor(math.log2(max(min(sizes), 1)))
    hi = math.ceil(math.log2(max(sizes)))
    hi = hi if hi > lo else lo + 1
    ymax = _nice_max(max([p[1] for s in data for p in s.points] + [s.expected_gbps or 0.0 for s in data]) * 1.05)

    def px(size: float) -> float:
        return left + pw * (math.log2(max(size, 1)) - lo) / (hi - lo)

    def py(gbps: float) -> float:
        return top + ph * (1 - gbps / ymax)

    for k in range(6):
        v = ymax * k / 5
        svg.line(left, py(v), left + pw, py(v), stroke=GRID)
        svg.text(left - 8, py(v) + 4, f"{v:g}", 10, fill=MUTED, text_anchor="end")
    step = max(1, (hi - lo) // 8)
    for e in range(lo, hi + 1, step):
        svg.line(px(2**e), top + ph, px(2**e), top + ph + 5, stroke=MUTED)
        svg.text(px(2**e), top + ph + 18, _size(2**e), 10, fill=MUTED, text_anchor="middle")
    svg.line(left, top + ph, left + pw, top + ph, stroke=MUTED)
    svg.line(left, top, left, top + ph, stroke=MUTED)
    svg.text(left + pw / 2, height - 14, "message size", 11, fill=MUTED, text_anchor="middle")
    svg.text(
        18,
        top + ph / 2,
        "busbw, GB/s",
        11,
        fill=MUTED,
        text_anchor="middle",
        transform=f"rotate(-90 18 {top + ph / 2:.1f})",
    )
    for k, s in enumerate(data):
        c = COLOURS[k % len(COLOURS)]
        pts = sorted(s.points)
        svg.open_group(class_="op", data_op=s.op)
        if s.expected_gbps:
            y = py(s.expected_gbps)
            svg.line(left, y, left + pw, y, stroke=c, stroke_width=1.2, stroke_dasharray="6 4", class_="expected")
        d = " ".join(f"{'M' if i == 0 else 'L'} {px(x):.1f} {py(v):.1f}" for i, (x, v) in enumerate(pts))
        svg.path(d, fill="none", stroke=c, stroke_width=2.2)
        for x, v in pts:
            svg.circle(px(x), py(v), 3.0, fill=c)
        ly = top + 14 + 20 * k
        svg.line(left + pw + 20, ly - 4, left + pw + 40, ly - 4, stroke=c, stroke_width=2.5)
        peak = max(v for _, v in pts)
        label = f"{s.op} {peak:.0f}" + (f" / {s.expected_gbps:.0f}" if s.expected_gbps else "")
        svg.text(left + pw + 46, ly, label, 11, fill=INK)
        svg.close_group()
    return svg.render()
