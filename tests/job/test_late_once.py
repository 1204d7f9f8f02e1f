"""One collective entered very late, judged on the enqueue times alone (pure: entries in, finding out)."""

from __future__ import annotations

import pytest

from topodoctor.job.dumps import DumpEntry
from topodoctor.job.stragglers import LATE_ONCE_MS, LATE_ONCE_SPREAD, late_once


def _entry(seq: int, created_ms: float, timeout_ms: int | None = None) -> DumpEntry:
    return DumpEntry(
        "0", "default_pg", seq, False, "all_reduce", "nccl", ((4,),), ((4,),), ("Float",), ("Float",),
        "completed", True, int(created_ms * 1e6), None, timeout_ms, "train.py:88 step",
    )  # fmt: skip


def _rows(
    late_ms: float, spread_ms: float = 2.0, timeout_ms: int | None = None, n: int = 40
) -> list[dict[int, DumpEntry]]:
    """n collectives of three ranks, 100 ms apart: rank 1 trails by ``spread_ms``; at #20 rank 2 by ``late_ms``."""
    rows = []
    for seq in range(n):
        t = seq * 100.0
        late = late_ms if seq == 20 else 0.0
        rows.append(
            {
                0: _entry(seq, t, timeout_ms),
                1: _entry(seq, t + spread_ms, timeout_ms),
                2: _entry(seq, t + late, timeout_ms),
            }
        )
    return rows


def test_past_the_peers_timeout_is_an_error_even_below_a_second() -> None:
    f = late_once(_rows(600.0, timeout_ms=500), "default_pg")
    assert f is not None and (f.kind, f.severity, f.ranks, f.seq) == ("late-rank", "error", (2,), 20)
    assert "0.6 s after the first rank" in f.message and "timeout" in f.message


def test_just_under_the_timeout_and_a_second_is_quiet() -> None:
    assert late_once(_rows(499.0, timeout_ms=500), "default_pg") is None


@pytest.mark.parametrize(("late_ms", "fires"), [(LATE_ONCE_MS, True), (LATE_ONCE_MS - 1, False)])
def test_a_second_beyond_a_tight_group_fires(late_ms: float, fires: bool) -> None:
    assert (late_once(_rows(late_ms), "default_pg") is not None) is fires


def test_a_group_that_always_spreads_wide_needs_more() -> None:
    spread = 100.0  # rank 1 always trails by 100 ms: 20 x that is the bar
    assert late_once(_rows(LATE_ONCE_SPREAD * spread - 1, spread), "g") is None
    assert late_once(_rows(LATE_ONCE_SPREAD * spread, spread), "g") is not None
