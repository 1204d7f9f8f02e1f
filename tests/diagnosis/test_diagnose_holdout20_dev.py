"""The twentieth and twenty-first blind sets (fixtures/diagnose/holdout20, holdout21), scored once and now development
sets: a transfer engine's own benchmark figure (Mooncake's transfer_engine_bench over TCP) is no collective's busbw;
a run said to be slower with one release than another; GPUDirect RDMA said slower only where set against its off;
pods that each see one GPU, said in words; osu_bw from GPU memory far below it from host memory."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

SET = FIXTURES / "diagnose" / "holdout20"


def test_a_transfer_engine_s_figure_is_not_judged_as_busbw() -> None:
    found = judged_with(SET / "d20-03")  # "transfer_engine_bench ... only tcp ... only 0.26GB/s" on two H20 hosts
    assert not [f for f in found if f.severity in ("warning", "error")]
    as_nccl = judged_with(SET / "d20-03", ("transfer_engine_bench", "all_reduce_perf"))
    assert [f.code for f in as_nccl if f.severity == "warning"] == ["TD022"]


def _said_and_not(case: str, code: str, words: str, away: tuple[str, str]) -> None:
    """``case`` gives ``code`` at warning with ``words`` in its message, and not with the sentence changed by
    ``away``."""
    lead = next(f for f in judged_with(FIXTURES / "diagnose" / case) if f.code == code)
    assert lead.severity == "warning" and words in lead.message
    assert code not in [f.code for f in judged_with(FIXTURES / "diagnose" / case, away)]


def test_slower_with_one_release_than_another() -> None:
    # "lower with ucx 1.15.0rc3 than with 1.13.1"
    _said_and_not("holdout21/d21-08", "TD997", "regression", ("than with 1.13.1", "than the NIC"))


def test_gdr_in_a_post_about_a_release_is_no_gdr_slower_claim() -> None:
    found = judged_with(FIXTURES / "diagnose" / "holdout21" / "d21-08")  # "GPUDirect RDMA Performance issue"
    assert "TD026" not in [f.code for f in found]


def test_pods_of_one_gpu_each_said_in_words() -> None:
    # "in the pod we can just see the only one gpu"
    _said_and_not("holdout21/d21-06", "TD034", "CUDA IPC", ("just see the only one gpu", "see every gpu"))
    each = judged_with(FIXTURES / "diagnose" / "holdout22" / "d22-03")  # "two separate Pods ... each ... one GPU"
    assert "TD034" in [f.code for f in each]


def test_gpu_buffers_far_below_host_buffers_in_osu_bw() -> None:
    found = judged_with(SET / "d20-02")  # osu_bw H D 6.1 GB/s, D D 0.35 GB/s over FDR, stock OFED
    lead = next(f for f in found if f.code == "TD979")
    assert lead.severity == "warning" and "nv_peer_mem" in lead.message and "0.06 of it" in lead.message
    near = judged_with(SET / "d20-02", ("345.38", "5900.00"))  # D D near H D at 64 KiB: one path, one rate
    assert "TD979" not in [f.code for f in near]
