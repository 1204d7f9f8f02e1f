"""Ops whose tensors differ per rank by design (all_to_all, the *_v variants, gather and scatter
roots) are no size mismatch; the same difference in an op whose shapes must agree is (pure: the
dumps' entries in, the group's findings out)."""

from __future__ import annotations

import pytest

from topodoctor.job.analysis import analyse_group
from topodoctor.job.dumps import DumpEntry, RankDump


def _entry(seq: int, op: str, elements: int) -> DumpEntry:
    return DumpEntry(
        "0", "default_pg", seq, False, op, "nccl", ((elements,),), ((elements,),), ("Float",), ("Float",),
        "completed", True, seq * 1_000_000, None, 600_000, "train.py:88 step",
    )  # fmt: skip


def _kinds(op: str) -> list[str]:
    """Three ranks run ``op`` once, rank 1 with twice the elements of its peers."""
    dumps = [RankDump(r, f"rank{r}", "2.10", (), (), (_entry(1, op, 8 if r == 1 else 4),)) for r in range(3)]
    return [f.kind for f in analyse_group("0", "default_pg", dumps, (0, 1, 2)).findings]


@pytest.mark.parametrize("op", ["all_to_all", "alltoall_base", "all_gather_v", "reduce_scatter_v", "gather", "scatter"])
def test_sizes_that_differ_per_rank_by_design_are_no_mismatch(op: str) -> None:
    assert "size-mismatch" not in _kinds(op)


@pytest.mark.parametrize("op", ["all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor"])
def test_sizes_that_must_agree_and_do_not_are_a_mismatch(op: str) -> None:
    assert _kinds(op) == ["size-mismatch"]
