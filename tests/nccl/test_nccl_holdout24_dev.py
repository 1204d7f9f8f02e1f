"""The twenty-fourth and twenty-fifth blind sets (fixtures/nccl-logs/holdout24, holdout25), scored once and now
development sets: output of the libraries beside NCCL with no NCCL line of its own (libfabric's EFA provider, XLA's
rendezvous before NCCL's init, NVSHMEM's IBGDA), a Ray worker's SIGBUS beside a pasted `df` of a small /dev/shm, a
hang said of several GeForce cards by their number."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

H24 = FIXTURES / "nccl-logs" / "holdout24"
H25 = FIXTURES / "nccl-logs" / "holdout25"


def test_libfabric_s_own_lines_without_the_plugin_s() -> None:
    lead = explained_with(H25 / "h25-001.log")[0]  # efa: ibv_open_device errno 2, fi_getinfo output empty list
    assert lead.code == "TD084" and lead.message.startswith("libfabric failed") and "fi_info -p efa" in lead.fix
    assert not explained_with(H25 / "h25-001.log", ("fi_getinfo", "fi_query"))


def test_xla_s_rendezvous_for_an_nccl_clique_still_waiting() -> None:
    lead = explained_with(H25 / "h25-004.log")[0]  # 8 threads expected of a clique of 16 devices: two processes
    assert lead.code == "TD959" and "clique holds devices of other processes" in lead.message
    assert "RoCE" in lead.fix
    alone = explained_with(H25 / "h25-004.log", ("clique=devices=[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]",
                                                 "clique=devices=[0,1,2,3,4,5,6,7]"))[0]  # fmt: skip
    assert alone.code == "TD959" and "other processes" not in alone.message


def test_nvshmem_skipping_a_nic_that_is_not_mlx5() -> None:
    lead = explained_with(H25 / "h25-009.log")[0]  # erdma_0 on Alibaba Cloud: IBGDA has no NIC
    assert lead.code == "TD106" and lead.severity == "error" and "erdma_0" in lead.message
    went_on = explained_with(H25 / "h25-009.log", ("Skipping...", "Skipping...\nzz:1:1 [0] NCCL INFO comm 0x1 rank 0"
                                                   " nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"),
                             ("[ERROR] Run ```test_low_latency.py``` failed in both one node and two nodes", "Run"),
                             ("The error is as follows", "Output"))  # fmt: skip
    assert all(f.severity != "error" for f in went_on)


def test_a_ray_worker_s_sigbus_beside_a_small_dev_shm() -> None:
    lead = explained_with(H24 / "h24-002.log")[0]  # vLLM in docker, shm 64M in the pasted `df -h`
    assert lead.code == "TD094" and "The log shows it: `shm" in lead.fix and "--shm-size" in lead.fix
    large = explained_with(
        H24 / "h24-002.log", ("shm              64M   20M   45M", "shm               16G   20M   15G")
    )
    assert large[0].code == "TD094" and "The log shows it" not in large[0].fix


def test_a_hang_of_several_geforce_cards_named_by_their_number() -> None:
    lead = explained_with(H24 / "h24-007.log")[0]  # "Deadlock in distribution with multiple 4090"
    assert lead.code == "TD959" and "NCCL_P2P_DISABLE=1" in lead.fix.split("(2)")[0]
    assert not explained_with(H24 / "h24-007.log", ("with multiple 4090", "of my script"), ("gpus", "steps"))
