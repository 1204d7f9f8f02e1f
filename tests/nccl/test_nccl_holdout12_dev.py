"""The twelfth blind sets (fixtures/nccl-logs/holdout12, holdout12b, holdout12c), scored once and now development
sets: a completion error printed without the peer's address, a torch built without NCCL, a title that says the run
hangs above NCCL's own lines."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

LOGS = FIXTURES / "nccl-logs"


def _explain(path: str, *replace: tuple[str, str]) -> list[Finding]:
    return explained_with(LOGS / path, *replace)


def test_a_completion_error_without_the_peers_address() -> None:
    lead = _explain("holdout12/h12-012.log")[0]  # "Got completion from peer with error 4" (NCCL 2.18.5, RoCE)
    assert lead.code == "TD066" and "status 4" in lead.message and "ACS" in lead.fix
    with_peer = _explain("holdout12/h12-012.log", ("from peer with", "from peer 10.0.0.3<4711> with"))[0]
    assert with_peer.code == "TD066"


def test_a_torch_built_without_nccl() -> None:
    lead = _explain("holdout12b/h12b-002.log")[0]  # Windows: "Distributed package doesn't have NCCL built in"
    assert lead.code == "TD096" and "gloo" in lead.fix and "without NCCL" in lead.message


def test_a_hang_in_the_title_above_ncclS_own_lines() -> None:
    lead = _explain("holdout12b/h12b-007.log")[0]  # '"accelerate test" hangs after initialization'
    assert lead.code == "TD959" and lead.severity == "error"
    # the same title over lines that are not NCCL's says nothing of NCCL
    other = "\n".join(['"accelerate test" hangs after initialization and then timeouts', "loading the model ..."])
    assert not explain([parse_file("post.log", other + "\n")])


def test_two_ranks_of_one_communicator_on_one_gpu_from_their_init_lines() -> None:
    lead = _explain("holdout12/h12-004.log")[0]  # ranks 0 and 1, one commId, both busId 100000; the WARN cut
    assert lead.code == "TD042" and "ranks 0 and 1" in lead.message and "100000" in lead.message
    apart = _explain("holdout12/h12-004.log", ("rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 100000",
                                               "rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 200000"))  # fmt: skip
    assert "TD042" not in [f.code for f in apart]


def test_a_crash_in_ncclS_cumem_host_probe() -> None:
    lead = _explain("holdout12/h12-003.log")[0]  # sglang's crash handler: cuMemCreate under ncclCuMemHostEnable
    assert lead.code == "TD087" and "NCCL_CUMEM_HOST_ENABLE=0" in lead.fix
    other = _explain("holdout12/h12-003.log", ("ncclCuMemHostEnable", "ncclSomethingElse"))[0]
    assert other.code == "TD098"


def test_a_store_host_that_does_not_resolve() -> None:
    lead = _explain("holdout12b/h12b-019.log")[0]  # torch 1.1's TCPStore: host not found
    assert lead.code == "TD072" and "does not resolve" in lead.message and "MASTER_ADDR" in lead.fix


def test_nvswitches_unseen_in_a_vm_is_the_bug_2_7_6_fixed() -> None:
    lead = _explain("holdout12/h12-019.log")[0]  # NCCL 2.7.3 on an A100 VM: /sys/class/pci_bus/fffffff/../..
    assert lead.code == "TD083" and "2.7.6" in lead.message
    fixed = _explain("holdout12/h12-019.log", ("NCCL version 2.7.3", "NCCL version 2.7.8"))
    assert "TD083" not in [f.code for f in fixed]
