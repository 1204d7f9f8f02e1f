"""One node's stored results as the history judges them (by the thresholds of fleet/request.py
``HistoryRequest``). ``Past`` is one stored result, decoded as far as the judgement needs: its
verdict, the findings that fail it, its GPUs by index.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from topodoctor.fleet.rows import StoredRow
from topodoctor.model.findings import SEVERITY_ORDER

DAY_S = 86400.0
_GPU_SUBJECT = re.compile(r"^GPU(\d+)(?:(?:-|->)GPU(\d+))?")


def day(t: float) -> str:
    """A time as its UTC date: 2026-11-26."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d")


@lru_cache(maxsize=4096)  # a fleet's subjects repeat: the same few per GPU and link
def gpus_of(subject: str) -> tuple[int, ...]:
    """The GPU indices a finding's or figure's subject names: GPU3, GPU3/nvlink5, GPU0-GPU5, GPU0->GPU1."""
    m = _GPU_SUBJECT.match(subject)
    if m is None:
        return ()
    return (int(m.group(1)),) + ((int(m.group(2)),) if m.group(2) else ())


def _keys(text: str, fail_bar: int) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(every finding's (severity, code, subject), those at the fail level) of a compact list."""
    keys = []
    for line in text.split("\n") if text else ():
        sev, code, subject = [*line.split(" ", 2), "", ""][:3]
        keys.append((sev, code, subject))
    return keys, [k for k in keys if SEVERITY_ORDER.get(k[0], 0) >= fail_bar]


# Read once per report (cleared with each judge: blob ids belong to one database).
_KEYS: dict[tuple[str, int], tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]] = {}
_GPUS: dict[int | None, dict[int, tuple[str | None, str | None]]] = {}


def forget() -> None:
    """Drop what was read of one database (a report reads another, or the same one changed)."""
    _KEYS.clear()
    _GPUS.clear()


class Past:
    """One stored result of a node: time, kind, verdict, the findings that fail it, GPUs by index."""

    __slots__ = ("failing", "gpus", "keys", "kind", "row", "t", "verdict")

    def __init__(self, row: StoredRow, blobs: dict[int, Any], fail_bar: int) -> None:
        self.row, self.t, self.kind = row, row.measured_at, row.kind
        # A node's findings and GPUs are mostly the same day after day: each list is read once.
        keys = _KEYS.get((row.finding_keys, fail_bar))
        if keys is None:
            keys = _KEYS[(row.finding_keys, fail_bar)] = _keys(row.finding_keys, fail_bar)
        self.keys, self.failing = keys
        failed = bool(self.failing) or row.state == "unhealthy"
        self.verdict: str | None = "failed" if failed else "healthy" if row.state == "healthy" else None
        # NVML index -> (uuid, serial), where the result names its GPUs
        gpus = _GPUS.get(row.gpus)
        if gpus is None:
            gpus = _GPUS[row.gpus] = {int(g[0]): (g[1], g[2]) for g in blobs[row.gpus]} if row.gpus is not None else {}
        self.gpus: dict[int, tuple[str | None, str | None]] = gpus

    @property
    def usable(self) -> bool:
        """Whether the result's figures may stand in a baseline: it passed, or carries no verdict."""
        return self.verdict != "failed" and self.row.state in ("healthy", "measured")

    def uuid(self, index: int) -> str | None:
        """The UUID of the GPU at ``index`` when the result was measured, where it says."""
        return self.gpus.get(index, (None, None))[0]
