"""An op neither completed nor past its timeout (the third value between "done" and "timed out"):
two ranks completed collective #3 and the third is still in it when the dumps were written. Before
its timeout it is in flight, not timed out; at its timeout (torch's own test) it has timed out.
Pure: dumps in, the group's state out."""

from __future__ import annotations

import pytest

from topodoctor.job.analysis import TIMEOUT_SHARE, analyse_group
from topodoctor.job.dumps import DumpEntry, RankDump

TIMEOUT_MS = 600_000
START_NS = 1_000_000_000_000


def _entry(seq: int, state: str) -> DumpEntry:
    return DumpEntry(
        "0", "default_pg", seq, False, "all_reduce", "nccl", ((4,),), ((4,),), ("Float",), ("Float",),
        state, state == "completed", START_NS + seq * 1_000_000, None, TIMEOUT_MS, "train.py:88 step",
    )  # fmt: skip


def _dumps(written_after_ms: float) -> list[RankDump]:
    """Ranks 0 and 1 completed #0-#3; rank 2 completed #0-#2 and is in #3 (started, not done)."""
    written = START_NS + 3 * 1_000_000 + int(written_after_ms * 1e6)
    out = []
    for rank in range(3):
        last = "started" if rank == 2 else "completed"
        entries = (*(_entry(s, "completed") for s in range(3)), _entry(3, last))
        out.append(RankDump(rank, f"rank{rank}", "2.10", (), (), entries, written))
    return out


@pytest.mark.parametrize(
    ("after_ms", "timed_out"),
    [
        (0.5 * TIMEOUT_MS, ()),  # in flight: neither completed nor past its timeout
        (TIMEOUT_SHARE * TIMEOUT_MS - 1, ()),
        (TIMEOUT_SHARE * TIMEOUT_MS, (2,)),  # at its timeout, as torch's watchdog judges
    ],
)
def test_an_op_in_flight_is_not_a_timeout_until_its_timeout(after_ms: float, timed_out: tuple[int, ...]) -> None:
    state = analyse_group("0", "default_pg", _dumps(after_ms), (0, 1, 2))
    assert state.timed_out == timed_out
    assert dict(state.completed) == {0: 3, 1: 3, 2: 2}  # the in-flight op is not counted done


def test_a_dump_without_its_time_says_no_timeout() -> None:
    dumps = [RankDump(d.rank, d.source, d.version, d.groups, d.progress, d.entries, None) for d in _dumps(1e9)]
    assert analyse_group("0", "default_pg", dumps, (0, 1, 2)).timed_out == ()
