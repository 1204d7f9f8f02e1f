"""A fleet's heat strip: one figure, nodes by days (``fleet --history --heat-strip FILE``).

Each cell is the node's value that day over the median of every node's value that day: a node
that drifted turns from the date it drifted, a node slower than its peers all along is a row of
its own colour. The colour scale is fixed (0.80 to 1.20 of the day's median, slow side red,
fast side blue; for a latency the sides swap), so two pictures compare at a glance. The nodes
furthest from the median come first; a picture holds at most ``MAX_ROWS`` of them.
"""

from __future__ import annotations

from collections import defaultdict

from topodoctor.core.stats import median
from topodoctor.core.text import plural
from topodoctor.report.svg import Svg, fit

MAX_ROWS = 60
CELL = 14.0
LABEL_W = 150.0
TOP = 64.0
INK = "#1f2933"
MUTED = "#6b7280"
MISSING = "#f3f4f6"
SLOW = (200, 30, 45)
FAST = (40, 90, 200)
NEUTRAL = (236, 238, 241)
SPAN = 0.20  # the scale's reach on either side of the median


def colour(ratio: float, better: str = "higher") -> str:
    """A ratio to the day's median as a colour: neutral at 1, red the slow way, blue the other."""
    slow = (1.0 - ratio) if better == "higher" else (ratio - 1.0)
    t = min(abs(slow) / SPAN, 1.0)
    end = SLOW if slow > 0 else FAST
    return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(NEUTRAL, end))


def heat_strip_svg(
    cells: tuple[tuple[str, str, float], ...], figure: str, unit: str = "", better: str = "higher"
) -> str:
    """The picture of ``cells`` ((node, day, value)) for ``figure``."""
    days = sorted({d for _, d, _ in cells})
    per_day: dict[str, list[float]] = defaultdict(list)
    rows: dict[str, dict[str, float]] = defaultdict(dict)
    for node, d, v in cells:
        per_day[d].append(v)
        rows[node][d] = v
    mid = {d: median(vs) for d, vs in per_day.items()}

    def off(node: str) -> float:
        return max((abs(v / mid[d] - 1.0) for d, v in rows[node].items() if mid[d] > 0), default=0.0)

    order = sorted(rows, key=lambda n: (-off(n), n))
    shown = order[:MAX_ROWS]
    width = LABEL_W + CELL * max(len(days), 1) + 24.0
    height = TOP + CELL * len(shown) + 60.0
    more = f"; the {len(shown)} of {plural(len(order), 'node')} furthest off" if len(order) > len(shown) else ""
    title = f"{figure} ({unit}), each day over the day's median of {plural(len(order), 'node')}{more}"
    svg = Svg(width, height, title)
    svg.text(12.0, 22.0, fit(title, 13, width - 24.0), 13, fill=INK, font_weight="bold")
    for i, d in enumerate(days):
        if i % 5 == 0 or i == len(days) - 1:
            svg.text(LABEL_W + CELL * i, TOP - 8.0, d[5:], 9, fill=MUTED)
    for r, node in enumerate(shown):
        y = TOP + CELL * r
        svg.text(12.0, y + CELL - 3.0, fit(node, 10, LABEL_W - 20.0), 10, fill=INK)
        for i, d in enumerate(days):
            got = rows[node].get(d)
            fill = MISSING if got is None or mid[d] <= 0 else colour(got / mid[d], better)
            svg.rect(LABEL_W + CELL * i, y, CELL - 1.0, CELL - 1.0, fill=fill)
    y = TOP + CELL * len(shown) + 20.0
    for i, ratio in enumerate((0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2)):
        x = 12.0 + 64.0 * i
        svg.rect(x, y, CELL, CELL, fill=colour(ratio, better))
        svg.text(x + CELL + 4.0, y + CELL - 3.0, f"{ratio:.2f}x", 9, fill=MUTED)
    svg.text(12.0, y + CELL + 18.0, "grey: no result that day; red: the slow side", 9, fill=MUTED)
    return svg.render()
