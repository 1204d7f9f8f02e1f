"""Where each rank ran: host, local rank, GPU and NIC.

A flight-recorder dump does not name its host (torch's analyser calls it ``host_rank<N>``), so
the map comes from the job itself. Three forms are read:

- a map file of lines ``RANK HOST [LOCAL_RANK [GPU [NIC]]]`` (``#`` starts a comment; ``-``
  stands for an unknown column), which one line in the job writes (docs/job.md);
- the same as JSON: a list of objects, or ``{"ranks": [...]}``, with ``rank``, ``host``,
  ``local_rank``, ``gpu`` (a bus id or UUID) and ``nic``;
- a ``topodoctor collectives`` result, whose workers recorded each rank's host, local rank and
  GPU bus id under the same launcher (valid for the job when it ran with the same layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topodoctor.core.errors import InputError


@dataclass(frozen=True)
class Place:
    """Where one rank ran; unknown parts are empty (never guessed)."""

    rank: int
    host: str
    local_rank: int | None = None
    gpu: str = ""  # a PCI bus id or a GPU UUID
    nic: str = ""

    def describe(self) -> str:
        """``node07 GPU 3 (0000:19:00.0)``: what an on-call person reads."""
        parts = [self.host or "unknown host"]
        if self.local_rank is not None:
            parts.append(f"local rank {self.local_rank}")
        if self.gpu:
            parts.append(f"GPU {self.gpu}")
        if self.nic:
            parts.append(f"NIC {self.nic}")
        return ", ".join(parts)


def _column(value: str) -> str:
    return "" if value == "-" else value


def parse_text(text: str, what: str) -> tuple[Place, ...]:
    """The line form of a map file; a line that is not ``RANK HOST ...`` is an InputError."""
    out: dict[int, Place] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        cols = line.split()
        if len(cols) < 2 or not cols[0].isdigit():
            raise InputError(f"{what} line {n}: expected 'RANK HOST [LOCAL_RANK [GPU [NIC]]]', got {line[:60]!r}")
        local = cols[2] if len(cols) > 2 else "-"
        if local != "-" and not local.isdigit():
            raise InputError(f"{what} line {n}: LOCAL_RANK {local[:20]!r} is not a number")
        place = Place(
            int(cols[0]),
            _column(cols[1]),
            int(local) if local != "-" else None,
            _column(cols[3]) if len(cols) > 3 else "",
            _column(cols[4]) if len(cols) > 4 else "",
        )
        _add(out, place, what)
    return tuple(out[r] for r in sorted(out))


def _add(out: dict[int, Place], place: Place, what: str) -> None:
    old = out.get(place.rank)
    if old is not None and old != place:
        raise InputError(f"{what}: rank {place.rank} is placed twice ({old.host} and {place.host})")
    out[place.rank] = place


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_json(doc: Any, what: str) -> tuple[Place, ...]:
    """The JSON form, or a collectives result's ``ranks``."""
    items = doc.get("ranks") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise InputError(f"{what}: expected a list of ranks or an object with 'ranks'")
    out: dict[int, Place] = {}
    for i, item in enumerate(items):
        rank = _int(item.get("rank")) if isinstance(item, dict) else None
        if not isinstance(item, dict) or rank is None:
            raise InputError(f"{what}: rank entry {i} has no non-negative integer 'rank'")
        node = item.get("node")  # a collectives result: NCCL's node (NCCL_HOSTID), else the host
        host = item.get("host") or item.get("hostname") or node or ""
        gpu = item.get("gpu") or item.get("bus_id") or item.get("uuid") or ""
        _add(out, Place(rank, str(host), _int(item.get("local_rank")), str(gpu), str(item.get("nic") or "")), what)
    return tuple(out[r] for r in sorted(out))


def by_rank(places: tuple[Place, ...]) -> dict[int, Place]:
    """The map as a dict; a later source's rank replaces an earlier one's."""
    return {p.rank: p for p in places}
