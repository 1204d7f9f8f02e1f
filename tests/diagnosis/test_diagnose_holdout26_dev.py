"""The twenty-sixth blind set (fixtures/diagnose/holdout26), scored once and now a development set: the figures of
a post about UCX's run are UCX's, not a collective's busbw, and the ask names cuda_ipc's remapping and CUDA's GPU
order among UCX's usual causes; the library's ask comes before the host's."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

SET = FIXTURES / "diagnose" / "holdout26"


def test_a_ucx_post_s_figures_are_not_judged_as_busbw() -> None:
    found = judged_with(SET / "d26-08")  # UCX-Py send/recv between two GPUs of a DGX-1: 9.68 GB/s, then 43
    (ask,) = [f for f in found if f.severity == "warning"]
    assert "why UCX's run is slow" in ask.message and "UCX_CUDA_IPC_CACHE" in ask.message
    as_nccl = judged_with(SET / "d26-08", ("CUDA IPC Performance of UCX", "NCCL all_reduce performance"),
                          ("ucx-py", "nccl-tests"))  # fmt: skip
    assert any(f.code == "TD022" and "busbw" in f.message for f in as_nccl if f.severity == "warning")


def test_the_library_s_ask_comes_before_the_host_s() -> None:
    found = judged_with(FIXTURES / "diagnose" / "holdout24" / "d24-08")  # UCX over Broadcom RoCE v2, across NUMA
    codes = [f.code for f in found if f.severity == "warning"]
    assert codes == ["TD022"] and "TD986" not in codes
