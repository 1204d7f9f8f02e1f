"""The twenty-third and twenty-fourth blind sets (fixtures/diagnose/holdout23, holdout24), scored once and now
development sets: a post about UCX's and MPI's run (osu_bw) is asked nothing of NCCL; a bullet list is no sentence
for the claims read across its lines; a send/recv figure under the post's all_reduce on the same network is NCCL's
per-peer channels."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

H23 = FIXTURES / "diagnose" / "holdout23"
H24 = FIXTURES / "diagnose" / "holdout24"


def test_a_post_about_ucx_s_run_asks_for_ucx_s_outputs_not_nccl_s() -> None:
    found = judged_with(H23 / "d23-06")  # osu_bw with UCX_IB_GPU_DIRECT_RDMA=n on 2 DGX-A100, OMB 5.7
    (ask,) = [f for f in found if f.severity in ("warning", "error")]
    assert (
        "why UCX's run is slow" in ask.message and "UCX_PROTO_INFO=y" in ask.message and "NCCL_DEBUG" not in ask.message
    )
    as_nccl = judged_with(H23 / "d23-06", ("- OMB 5.7", "- NCCL 2.8"), ("osu_bw", "all_reduce_perf"),
                          ("ucx main branch", "main branch"), ("ompi 4.1.x", "torch"),
                          ("UCX_IB_GPU_DIRECT_RDMA=n", "NCCL_NET_GDR_LEVEL=LOC"))  # fmt: skip
    assert "TD022" in [f.code for f in as_nccl if f.severity == "warning"]


def test_gdr_named_in_one_bullet_and_a_drop_in_the_next_is_no_gdr_slower_claim() -> None:
    found = judged_with(H23 / "d23-06")  # "... GPUDirectRDMA is disabled" / "- Seeing a big drop ..."
    assert "TD026" not in [f.code for f in found]


def test_send_recv_under_the_post_s_all_reduce_is_the_per_peer_channels() -> None:
    found = judged_with(H24 / "d24-02")  # ~28Gbps send/recv; "the allreduce can saturate over 50Gbps"
    normal = next(f for f in found if f.code == "TD021")
    assert normal.severity == "info" and "NCCL_NCHANNELS_PER_NET_PEER" in normal.message
    assert not [f for f in found if f.severity in ("warning", "error")]
    alone = judged_with(H24 / "d24-02", ("the `allreduce` can saturate over 50Gbps", "the run repeats"))
    assert "TD022" in [f.code for f in alone if f.severity == "warning"]


def test_another_library_s_variable_in_a_sentence_keeps_it_a_sentence() -> None:
    found = judged_with(H24 / "d24-03")  # "In the UCX_LOG_LEVEL=data logs, ..." in a NIXL + UCX post over two servers
    (ask,) = [f for f in found if f.severity == "warning"]
    assert "why UCX's run is slow" in ask.message and "UCX_NET_DEVICES" in ask.message
