"""The twenty-fifth blind set (fixtures/diagnose/holdout25), scored once and now a development set: Horovod built
without NCCL, from its own `--check-build` account or in the reporter's words."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

SET = FIXTURES / "diagnose" / "holdout25"


def test_a_horovod_build_without_nccl() -> None:
    found = judged_with(SET / "d25-01")  # --check-build: [ ] NCCL ... [X] Gloo; 2 GPUs at half the rate of 1
    lead = next(f for f in found if f.code == "TD978")
    assert lead.severity == "warning" and "Gloo" in lead.message and "HOROVOD_GPU_OPERATIONS" in lead.fix
    built = judged_with(SET / "d25-01", ("[ ] NCCL", "[X] NCCL"))
    assert "TD978" not in [f.code for f in built]


def test_horovod_on_gloo_in_the_reporter_s_words() -> None:
    found = judged_with(SET / "d25-08")  # "no way for Horovod with Gloo to use NCCL"; NVLink not used
    lead = next(f for f in found if f.code == "TD978")
    assert lead.severity == "warning" and "horovodrun --check-build" in lead.message
    other = judged_with(SET / "d25-08", ("Horovod with Gloo", "the library"), ("building Gloo", "building it"))
    assert "TD978" not in [f.code for f in other]


def test_a_slow_transfer_engine_over_rdma_asks_for_the_path_s_own_rate() -> None:
    found = judged_with(SET / "d25-07")  # Mooncake's transfer_engine_bench at 6.56 GB/s where ib_send_bw gives 11.47
    (ask,) = [f for f in found if f.severity == "warning"]
    assert "the transfer engine" in ask.message and "ib_read_bw" in ask.message and "NCCL_DEBUG" not in ask.message


def test_a_slow_ucx_run_within_a_node_asks_for_ucx_s_outputs() -> None:
    found = judged_with(SET / "d25-04")  # "VRAM TO VRAM over RDMA/UCX Backend is too slow", H200, CX7 400G
    (ask,) = [f for f in found if f.severity == "warning"]
    assert "UCX" in ask.message and "ucx_info -d" in ask.message
    other = judged_with(SET / "d25-04", ("RDMA/UCX  Backend", "RDMA backend"))
    assert not [f for f in other if "UCX" in f.message]
