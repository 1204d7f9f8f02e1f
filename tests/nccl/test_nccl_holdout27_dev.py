"""The twenty-seventh blind set (fixtures/nccl-logs/holdout27), scored once and now a development set: two NCCL wheels
in a pasted package listing, a /dev/shm segment that failed with the CUDA error class (its pinning, not its file),
RCCL's P2P transport failing a HIP call, and wrong results across nodes that GPUDirect RDMA may cause."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

LOGS = FIXTURES / "nccl-logs" / "holdout27"


def test_two_nccl_wheels_in_the_package_listing() -> None:
    lead = explained_with(LOGS / "h27-010.log")[0]  # config blocking -2147483648; pip list: cu11 2.14.3 and cu12 2.18.1
    assert lead.code == "TD085" and "`pip uninstall nvidia-nccl-cu11`" in lead.fix
    one = explained_with(LOGS / "h27-010.log", ("nvidia-nccl-cu12", "nvidia-cudnn-cu12"))[0]
    assert one.code == "TD085" and "pip uninstall" not in one.fix


def test_a_segment_that_failed_with_the_cuda_error_class_was_not_pinned() -> None:
    lead = explained_with(LOGS / "h27-004.log")[0]  # WSL2: unhandled cuda error, "Error while creating shared memory"
    assert lead.code == "TD056" and "cudaHostRegister" in lead.message and "NCCL_SHM_DISABLE=1" in lead.fix
    as_system = (("unhandled cuda error", "unhandled system error"), ("ncclUnhandledCudaError", "ncclSystemError"))
    system = explained_with(LOGS / "h27-004.log", *as_system, ("Call to CUDA function failed", "failed"))
    assert system[0].code == "TD043"


def test_rccl_s_p2p_transport_failing_a_hip_call() -> None:
    lead = explained_with(LOGS / "h27-007.log")[0]  # rccl/build/hipify/src/transport/p2p.cc:287 Cuda failure
    assert lead.code == "TD057" and "HIP IPC" in lead.message and "XGMI" in lead.fix and "NCCL_CUMEM" not in lead.fix


def test_wrong_values_across_nodes_name_gpudirect_rdma_and_the_driver() -> None:
    lead = explained_with(LOGS / "h27-003.log")[0]  # NCCL_IB_CUDA_SUPPORT=1 on driver 390: Out of bounds values : 248
    assert lead.code == "TD079" and "NCCL_NET_GDR_LEVEL=LOC" in lead.fix and "driver" in lead.fix
