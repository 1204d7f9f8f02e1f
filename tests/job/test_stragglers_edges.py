"""A straggler is the rank last in at least half the collectives of its group: a rank last in exactly
half is one, a rank last in one fewer is not, however late it runs on the whole."""

from __future__ import annotations

import pytest

from topodoctor.job.analysis import GroupState
from topodoctor.job.dumps import DumpEntry, RankDump
from topodoctor.job.stragglers import lateness


def _entry(seq: int, created_ms: float) -> DumpEntry:
    return DumpEntry(
        "0", "default_pg", seq, False, "all_reduce", "nccl", ((4,),), ((4,),), ("Float",), ("Float",),
        "completed", True, int(created_ms * 1e6), None, None, "train.py:88 step",
    )  # fmt: skip


def _dumps(last_of_rank2: int, n: int = 10) -> list[RankDump]:
    """n collectives 100 ms apart: rank 2 is last (20 ms) in the first ``last_of_rank2``; in the others
    rank 0 or 1 is last (20 ms) and rank 2 trails by 10 ms, so its median lateness is 10 ms or more."""
    late: dict[int, list[float]] = {0: [], 1: [], 2: []}
    for seq in range(n):
        if seq < last_of_rank2:
            row = {0: 0.0, 1: 0.0, 2: 20.0}
        else:
            row = {0: 20.0, 1: 0.0, 2: 10.0} if seq % 2 else {0: 0.0, 1: 20.0, 2: 10.0}
        for r, ms in row.items():
            late[r].append(seq * 100.0 + ms)
    return [
        RankDump(r, f"rank{r}", "2.7", (), (), tuple(_entry(seq, t) for seq, t in enumerate(ts)))
        for r, ts in late.items()
    ]


GROUP = GroupState("0", "default_pg", (0, 1, 2), {0: 9, 1: 9, 2: 9}, {0: 9, 1: 9, 2: 9}, ())


@pytest.mark.parametrize(("last", "straggler"), [(5, True), (4, False)])
def test_a_rank_last_in_exactly_half_the_collectives_is_a_straggler(last: int, straggler: bool) -> None:
    got = lateness(GROUP, _dumps(last))
    assert got is not None
    rank2 = next(x for x in got.ranks if x.rank == 2)
    assert rank2.latest == last and rank2.median_ms >= 10.0  # late enough on the whole either way
    if straggler:
        assert got.finding is not None and (got.finding.kind, got.finding.ranks) == ("straggler", (2,))
        assert f"rank 2 entered {last} of the last 10 collectives" in got.finding.message
    else:
        assert got.finding is None
