"""The twentieth blind set (fixtures/diagnose/holdout20), scored once and now a development set: a transfer
engine's own benchmark figure (Mooncake's transfer_engine_bench over TCP) is no collective's busbw."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

SET = FIXTURES / "diagnose" / "holdout20"


def test_a_transfer_engine_s_figure_is_not_judged_as_busbw() -> None:
    found = judged_with(SET / "d20-03")  # "transfer_engine_bench ... only tcp ... only 0.26GB/s" on two H20 hosts
    assert not [f for f in found if f.severity in ("warning", "error")]
    as_nccl = judged_with(SET / "d20-03", ("transfer_engine_bench", "all_reduce_perf"))
    assert [f.code for f in as_nccl if f.severity == "warning"] == ["TD022"]
