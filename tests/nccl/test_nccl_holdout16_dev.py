"""The sixteenth blind sets (fixtures/nccl-logs/holdout16, holdout16b), scored once and now development sets: a recv
that timed out on socket.cc, socket()'s refused address family, NCCL's result words in a post's title over
nccl-tests' output, the shared-memory EINTR of the releases before 2.4, NVML's lookup of a peer's bus id, and c10d's
own words for a port in use."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

LOGS = FIXTURES / "nccl-logs"


def test_a_recv_that_timed_out_is_a_peer_that_stopped_answering() -> None:
    lead = explained_with(LOGS / "holdout16/h16-001.log")[
        0
    ]  # "Net : Call to recv from ... failed : Connection timed out"
    assert lead.code == "TD046" and "timed out" in lead.message and "network" in lead.message


def test_sockets_refused_address_family_ranks_its_causes() -> None:
    lead = explained_with(LOGS / "holdout16/h16-006.log")[0]  # "Socket creation failed : Address family not supported"
    assert lead.code == "TD041" and "NCCL_SOCKET_FAMILY=AF_INET" in str(lead.evidence["candidates"][0])  # type: ignore[index]


def test_ncclS_result_words_as_the_title_of_nccl_tests_output() -> None:
    lead = explained_with(LOGS / "holdout16/h16-014.log")[0]  # "unhandled cuda error during test", cut at Init START
    assert lead.code == "TD049" and "unhandled cuda error" in lead.message


def test_the_shared_memory_eintr_of_the_releases_before_2_4() -> None:
    lead = explained_with(LOGS / "holdout16/h16-005.log")[0]  # "Unable to allocate ... : Interrupted system call"
    assert lead.code == "TD083" and "2.4.2" in lead.message and "2.3.7 and earlier" in lead.fix
    full = explained_with(LOGS / "holdout16/h16-005.log", ("Interrupted system call", "No space left on device"))[0]
    assert full.code == "TD043" and "No space left on device" in full.message  # /dev/shm full: not the bug


def test_nvmls_lookup_of_a_peers_bus_id_not_found_is_gpus_another_container_holds() -> None:
    lead = explained_with(LOGS / "holdout16b/h16b-004.log")[0]  # two containers on one node, a GPU each
    assert lead.code == "TD078" and "NVIDIA_VISIBLE_DEVICES" in lead.fix
    other = explained_with(LOGS / "holdout16b/h16b-004.log", ("Not Found", "Unknown Error"))[0]
    assert "NVIDIA_VISIBLE_DEVICES" not in other.fix


def test_c10ds_own_words_for_a_port_in_use_are_the_store() -> None:
    lead = explained_with(LOGS / "holdout12c/h12c-002.log")[0]  # "执行中报错：RuntimeError: Address already in use"
    assert lead.code == "TD091" and "MASTER_PORT" in lead.fix
    python_own = parse_file("x.log", "OSError: [Errno 98] Address already in use\n")  # Python's socket: no store
    assert not python_own.events and not explain([python_own])
