"""What the fleet roll-up and the metrics read from a collectives result.

The collectives runner owns its result type; readers here depend only on this protocol, one
row per (op, size, placement) as nccl-tests prints it. ``CollectiveRowData`` decodes the rows
of a saved result (the codec checks each field and ignores the ones not named here).
GB/s means 1e9 bytes per second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class CollectiveRow(Protocol):
    @property
    def op(self) -> str: ...  # all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, sendrecv
    @property
    def size_bytes(self) -> int: ...  # as nccl-tests defines the size of the op
    @property
    def in_place(self) -> bool: ...
    @property
    def busbw_gbps(self) -> float | None: ...  # None: the op did not finish at this size
    @property
    def algbw_gbps(self) -> float | None: ...
    @property
    def time_us(self) -> float | None: ...
    @property
    def wrong(self) -> int | None: ...  # elements that failed the data check


@dataclass(frozen=True)
class CollectiveRowData:
    op: str
    size_bytes: int
    busbw_gbps: float | None
    in_place: bool = False
    algbw_gbps: float | None = None
    time_us: float | None = None
    wrong: int | None = None
