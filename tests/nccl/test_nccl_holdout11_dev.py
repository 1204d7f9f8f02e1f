"""The eleventh blind sets (fixtures/nccl-logs/holdout11, holdout11b, holdout11c), scored once and now development
sets: NCCL 2.25 on a Blackwell workstation GPU is its known bug whatever the log shows; the link editor's words
for a build against NCCL; libibverbs missing while NCCL's sockets run over IPoIB; a first collective past its
timeout puts the GPUs' peer-to-peer path first."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

LOGS = FIXTURES / "nccl-logs"


def _explain(path: str, *replace: tuple[str, str]) -> list[Finding]:
    return explained_with(LOGS / path, *replace)


def test_nccl_2_25_on_an_rtx_5090_is_the_known_bug_even_cut_before_the_error() -> None:
    lead = _explain("holdout11/h11-004.log")[0]  # alltoall_perf on an RTX 5090, NCCL 2.25.1, cut at Init START
    assert lead.code == "TD083" and lead.severity == "error" and "2.26.2" in lead.message
    assert "RTX 5090" in lead.message
    # the fixed release, or another GPU, is no sign of it
    assert not [
        f for f in _explain("holdout11/h11-004.log", ("2.25.1+cuda12.4", "2.26.2+cuda12.4")) if f.code == "TD083"
    ]
    assert not [
        f for f in _explain("holdout11/h11-004.log", ("GeForce RTX 5090", "H100 80GB HBM3")) if f.code == "TD083"
    ]


def test_the_link_editor_missing_libnccl_or_its_symbols() -> None:
    lead = _explain("holdout11b/h11b-019.log")[0]  # building caffe2: libnccl.so.1 not found, undefined references
    assert lead.code == "TD085" and "libnccl.so.1" in lead.message and "LIBRARY_PATH" in lead.fix
    text = "/usr/bin/ld: build/libx.so: undefined reference to `ncclCommInitRank'\n"
    found = explain([parse_file("build.log", text)])
    assert found[0].code == "TD085" and "ncclCommInitRank" in found[0].message


def test_no_verbs_library_while_the_sockets_run_over_ipoib() -> None:
    found = _explain("holdout11c/h11c-016.log")  # Failed to open libibverbs, NET/Socket on ib0
    assert found[0].code == "TD050" and found[0].severity == "warning" and "libibverbs" in found[0].fix
    # the same over an Ethernet interface: a host without RDMA NICs, sockets are all there is
    assert not [f for f in _explain("holdout11c/h11c-016.log", ("ib0.", "eth0.")) if f.code == "TD050"]


def test_a_first_collective_past_its_timeout_names_peer_to_peer_first() -> None:
    lead = _explain("holdout11c/h11c-010.log")[0]  # BROADCAST, SeqNum=1, 600 s
    assert lead.code == "TD047"
    first = lead.evidence["candidates"][0]  # type: ignore[index]
    assert "NCCL_P2P_DISABLE=1" in first
    later = _explain("holdout11c/h11c-010.log", ("SeqNum=1,", "SeqNum=4512,"))[0]
    assert "NCCL_P2P_DISABLE" not in later.evidence["candidates"][0]  # type: ignore[index]


def test_a_hang_with_a_path_forcing_variable_names_it_first() -> None:
    lead = _explain("holdout11b/h11b-011.log")[0]  # the title says it hangs; NCCL_SHM_DISABLE=1 on the command line
    assert lead.code == "TD959" and "NCCL_SHM_DISABLE=1" in lead.message
    assert "a variable the run sets" in lead.evidence["candidates"][0]  # type: ignore[index]
    # NCCL_P2P_DISABLE=1, the usual cure, tried and said: the PCIe peer path stays the first suspect
    first = _explain("holdout11/h11-005.log")[0].evidence["candidates"][0]  # type: ignore[index]
    assert first.startswith("PCIe peer-to-peer")
    plain = _explain("holdout11b/h11b-011.log", ("NCCL_SHM_DISABLE=1 ", ""))[0]
    assert "a variable the run sets" not in plain.evidence["candidates"][0]  # type: ignore[index]


def test_a_store_address_that_is_a_file_path() -> None:
    lead = _explain("holdout11b/h11b-016.log")[0]  # MASTER_ADDR=/root/cuda11.8.bashrc
    assert lead.code == "TD072" and "/root/cuda11.8.bashrc" in lead.message and "MASTER_ADDR" in lead.fix
    # an IPv6 lookup of a real host name fails harmlessly where the host has no IPv6 address
    line = "[W socket.cpp:601] [c10d] The IPv6 network addresses of (node-1, 29500) cannot be retrieved (gai error: -3)"
    assert not explain([parse_file("w.log", line + "\n")])


def test_an_error_text_of_unknown_result_code_is_two_libraries() -> None:
    lead = _explain("holdout11c/h11c-002.log")[0]  # TensorRT-LLM's NCCL check: 'unknown result code'
    assert lead.code == "TD085" and "two libnccl builds" in lead.evidence["candidates"][0]  # type: ignore[index]


def test_a_title_cut_before_the_bus_id_and_a_bare_reverse_path() -> None:
    assert _explain("holdout11c/h11c-015.log")[0].message == "ranks 7 and 5 both use one GPU"
    assert _explain("holdout11/h11-018.log")[0].code == "TD071"


def test_a_killed_rank_leads_the_store_that_broke_with_it() -> None:
    found = _explain("holdout11c/h11c-014.log")  # store Broken pipe, then the launcher's return code -9
    assert found[0].code == "TD090" and any(f.code == "TD072" for f in found[1:])
    alone = _explain("holdout11c/h11c-014.log", ("exits with return code = -9", "exits with return code = 1"))
    assert alone[0].code == "TD072"


def test_a_title_that_says_it_stalls() -> None:
    lead = _explain("holdout11c/h11c-005.log")[0]  # vLLM TP 2 on two RTX 6000 Ada: later runs stall
    assert lead.code == "TD959" and lead.evidence["candidates"][0].startswith("PCIe peer-to-peer")  # type: ignore[index]


def test_loopback_sockets_in_a_launch_of_two_nodes() -> None:
    lead = _explain("holdout11b/h11b-020.log")[0]  # NCCL_SOCKET_IFNAME=lo, torch.distributed.launch --nnode=2
    assert lead.code == "TD072" and "NCCL_SOCKET_IFNAME=lo" in lead.message and "2 nodes" in lead.message
    one = _explain("holdout11b/h11b-020.log", ("--nnode=2", "--nnode=1"))
    assert "TD072" not in [f.code for f in one]
