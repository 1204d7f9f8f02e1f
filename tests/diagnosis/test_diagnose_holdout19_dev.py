"""The nineteenth blind sets (fixtures/diagnose/holdout19, holdout19b), scored once and now development sets: the
same RDMA test over two NICs of one host far apart; AMD GPUs, whose figures the model table does not judge, asking
for ROCm's own outputs; a post that says the run is slower with GPUDirect RDMA on than off."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

SET = FIXTURES / "diagnose"


def test_one_host_s_nics_far_apart_in_the_same_rdma_test() -> None:
    found = judged_with(SET / "holdout19b" / "d19b-01")  # ib_write_bw over rdmap85s0 and rdmap87s0 (EFA, p5en)
    uneven = [f for f in found if f.code == "TD982" and f.severity == "warning"]
    assert [f.subject for f in uneven] == ["nic:rdmap87s0"] and "LnkSta" in uneven[0].fix
    even = judged_with(SET / "holdout19b" / "d19b-01", ("132.18", "170.02"))
    assert not [f for f in even if f.code == "TD982" and f.severity == "warning"]


def test_amd_gpus_ask_for_rocm_s_outputs() -> None:
    found = judged_with(SET / "holdout19" / "d19-05")  # 2 x Radeon Instinct MI25, rocm_bandwidth_test figures
    ask = next(f for f in found if f.code == "TD022")
    assert "rocm-smi --showtopo" in ask.fix + ask.message
    assert not [f for f in found if f.severity in ("warning", "error")]


def test_slower_with_gpudirect_rdma_on_than_off() -> None:
    found = judged_with(SET / "holdout19" / "d19-07")  # nv_peer_memory over RoCE: "slower" with GDR
    lead = next(f for f in found if f.code == "TD026")
    assert lead.severity == "warning" and "GPUDirect RDMA across the CPU" in lead.message
    said_faster = judged_with(
        SET / "holdout19" / "d19-07",
        ("deteriorating", "improving"),
        ("dramatically worse", "better"),
        ("worse", "better"),
    )
    assert "TD026" not in [f.code for f in said_faster]
