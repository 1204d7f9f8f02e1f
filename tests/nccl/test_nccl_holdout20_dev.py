"""The twentieth blind set (fixtures/nccl-logs/holdout20), scored once and now a development set: two machines
under one host name, which NCCL takes for one node (CUDA IPC between them fails); NCCL's "Duplicate GPU detected"
quoted in a title; the post's words that NCCL ran out of GPU memory over a bare error class."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

LOGS = FIXTURES / "nccl-logs" / "holdout20"


def test_one_host_name_binding_two_addresses_is_two_machines() -> None:
    lead, failed = explained_with(LOGS / "h20-002.log")[:2]  # node1 binds eth1 at .176 and .175; CUDA IPC fails
    assert lead.code == "TD100" and "100.102.32.175" in lead.message and "hostname" in lead.fix
    assert failed.code == "TD052" and "failed to open CUDA IPC handle : 30" in lead.message
    one = explained_with(LOGS / "h20-002.log", ("100.102.32.175", "100.102.32.176"))[0]
    assert one.code == "TD052"


def test_ranks_all_named_localhost_in_a_launch_over_two_hosts() -> None:
    lead = explained_with(LOGS / "h20-010.log")[0]  # mpirun -host A:2,B:3; every NCCL line of host localhost
    assert lead.code == "TD100" and "over 2 hosts" in lead.message
    assert "failed to open CUDA IPC handle : 11" in lead.message  # the WARN the trail follows, not the title's
    one = explained_with(LOGS / "h20-010.log", ("-host 59.77.7.23:2,59.77.7.30:3", "-host 59.77.7.23:5"))[0]
    assert one.code == "TD052"


def test_nccl_s_duplicate_gpu_quoted_in_a_title() -> None:
    lead = explained_with(LOGS / "h20-011.log")[0]  # torchrun of 2, both [0]; the WARN only in the title
    assert lead.code == "TD042" and "set_device" in lead.fix
    plain = explained_with(LOGS / "h20-011.log", ('"Duplicate GPU detected"', "an error"))
    assert not plain or plain[0].code != "TD042"


def test_the_post_s_words_of_an_oom_over_a_bare_error_class() -> None:
    lead = explained_with(LOGS / "h20-005.log")[0]  # JAX on 2 x 2080 Ti, "NCCL out of memory", unhandled system error
    assert lead.code == "TD058" and "XLA_PYTHON_CLIENT_MEM_FRACTION" in lead.fix
    plain = explained_with(LOGS / "h20-005.log", ("out of memory", "trouble"), ("OOM", "problem"))
    assert plain[0].code == "TD049"
