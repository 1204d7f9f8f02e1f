"""Collectives figures as the fleet roll-up and the metrics read them: one per op, size and
placement. The result's ``Row`` (model/collectives.py, one line of nccl-tests' table
with its out-of-place and in-place columns) is the schema; this is a flat view of it, never
decoded from a file on its own. GB/s means 1e9 bytes per second.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from topodoctor.model.collectives import Row


@dataclass(frozen=True)
class Column:
    """One column of one row (out of place or in place), flat: the op, size, bandwidths, time and #wrong."""

    op: str  # all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, sendrecv
    size_bytes: int  # as nccl-tests defines the size of the op
    in_place: bool
    busbw_gbps: float
    algbw_gbps: float
    time_us: float
    wrong: int | None  # elements that failed the data check; None = not checked


def columns(rows: Iterable[Row]) -> Iterator[Column]:
    """Every measured column of every row (a form torch does not offer has none)."""
    for r in rows:
        for place, t in r.timings():
            yield Column(r.op, r.size_bytes, place == "in-place", t.busbw_gbps, t.algbw_gbps, t.time_us, t.wrong)
