"""The twenty-third blind set (fixtures/nccl-logs/holdout23), scored once and now a development set: a verbs call
that creates a queue failing with ENOMEM (the limit or the adapter's queues, not a registration); a hang said far
down a post's prose; RCCL's WARN that names the HIP call; NCCL's message quoted in a title, with the variable the
post's YAML sets."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

LOGS = FIXTURES / "nccl-logs" / "holdout23"


def test_a_queue_that_could_not_be_allocated_is_the_verbs_class_with_its_candidates() -> None:
    lead = explained_with(LOGS / "h23-003.log")[0]  # ibv_create_cq: Cannot allocate memory, NVSHMEM beside NCCL
    assert lead.code == "TD065" and "ulimit -l" in lead.fix and "NVSHMEM" in lead.fix
    reg = explained_with(LOGS / "h23-003.log", ("ibv_create_cq", "ibv_reg_mr"))[0]  # a registration: the limit
    assert reg.code == "TD061"


def test_a_hang_said_in_the_seventh_sentence_of_a_post() -> None:
    lead = explained_with(LOGS / "h23-004.log")[0]  # aws-ofi-nccl's provider note, then "seems to hang"
    assert lead.code == "TD959" and lead.severity == "error"
    plain = explained_with(LOGS / "h23-004.log", ('seems to "hang"', "prints this"))
    assert all(f.severity != "error" for f in plain)


def test_rccl_names_the_hip_call_that_failed() -> None:
    lead = explained_with(LOGS / "h23-006.log")[0]  # transport/p2p.cc:256 hipIpcGetMemHandle failed : invalid argument
    assert lead.code == "TD057" and "hipIpcGetMemHandle" in lead.message and "HIP error" in lead.message
    assert "--ipc=host" in lead.fix and "NCCL_CUMEM" not in lead.fix  # HIP has no cuMem path


def test_nccl_s_message_quoted_in_a_title_and_the_variable_a_yaml_sets() -> None:
    lead = explained_with(LOGS / "h23-002.log")[0]  # `Bootstrap : no socket interface found`, NCCL_SOCKET_IFNAME: =...
    assert lead.code == "TD041" and "NCCL_SOCKET_IFNAME==enp90s0np0" in lead.message
    unquoted = explained_with(LOGS / "h23-002.log", ("`Bootstrap : no socket interface found`", "an error"))[0]
    assert unquoted.code == "TD049"
    unset = explained_with(LOGS / "h23-002.log", ("NCCL_SOCKET_IFNAME: =enp90s0np0", "OTHER: 1"))[0]
    assert unset.code == "TD041" and "NCCL_SOCKET_IFNAME=" not in unset.message
