"""A two-node sweep's result as people post it: one line per pair of nodes, the two names (joined by a
comma or apart) and the pair's figure, with a comment after it where the poster added one::

    se02gn644,se02gn699     49.36
    se02gn404,se02gn699     86.81  # crossing TOR

Two such lines in a row at least (one line of two words and a number is too loose a shape to be a
sweep); the table is read as far as its lines go. A header line of words above it is left to the
other readers.
"""

from __future__ import annotations

import re

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import SweepPair

_HOST = r"[A-Za-z][\w.-]{0,62}"
_ROW = re.compile(rf"^\s*({_HOST})\s*(?:,\s*|\s+)({_HOST})\s+(\d+(?:\.\d+)?)\s*(?:(?:#|//)\s*(.*?))?\s*$")
# device and column names of other tools' tables (topo -m's "GPU0 GPU1", a matrix's "D\D"): no nodes
_NOT_NODE = re.compile(r"^(?:GPU|NIC|CPU|NUMA|cuda|mlx\d|D)\d*$", re.IGNORECASE)
MIN_ROWS = 2


def _row(line: str) -> re.Match[str] | None:
    m = _ROW.match(line)
    if m is None or m.group(1) == m.group(2) or _NOT_NODE.match(m.group(1)) or _NOT_NODE.match(m.group(2)):
        return None
    return m


def starts(lines: list[str], i: int) -> bool:
    """Whether a sweep table begins at line ``i``: this line and the next are pairs with a figure."""
    return i + MIN_ROWS <= len(lines) and all(_row(lines[k]) for k in range(i, i + MIN_ROWS))


def read(lines: list[str], i: int, piece: int) -> Block:
    """Every pair from line ``i`` while the lines are pairs."""
    parts = Parts()
    j = i
    while j < len(lines) and (m := _row(lines[j])):
        parts.sweeps.append(SweepPair(piece, m.group(1), m.group(2), float(m.group(3)), m.group(4) or "", j + 1))
        j += 1
    return Block("pair-sweep", i, j, parts)
