"""The eighteenth and nineteenth blind sets (fixtures/nccl-logs/holdout18, holdout19b), scored once and now
development sets: a hang over interfaces NCCL should not use ranks the network first; nccl-tests' header is no
progress, so a post that says the run crashed is a failure said, not a stall; NCCL's own "undefined" config value
refused by an older libnccl; torch's watchdog status line alone; CUDA's words for a kernel fault in a title."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

LOGS = FIXTURES / "nccl-logs"


def test_a_hang_over_a_tunnel_and_a_veth_ranks_the_network_first() -> None:
    lead = explained_with(LOGS / "holdout18/h18-003.log")[0]  # "NCCL timeouts", sockets on ip6tnl0 and veth0
    assert lead.code == "TD959" and lead.fix.index("the network between the nodes") < lead.fix.index("(2)")
    plain = explained_with(
        LOGS / "holdout18/h18-003.log", ("ip6tnl0", "eth0"), ("veth0", "eth1"), ("fe80::", "fd00::")
    )[0]
    assert plain.fix.index("the network between the nodes") > plain.fix.index("(2)")


def test_nccl_tests_header_is_no_progress_and_a_said_crash_is_a_failure() -> None:
    lead = explained_with(LOGS / "holdout18/h18-007.log")[0]  # "NCCL segfaults on single node with 10 GPUs"
    assert lead.code == "TD049" and lead.severity == "error" and "segfaults" in lead.message
    quiet = explained_with(LOGS / "holdout18/h18-007.log", ("NCCL segfaults on", "NCCL on"))
    assert quiet[0].code != "TD049"


def test_the_undefined_config_value_refused_is_an_older_libnccl() -> None:
    lead = explained_with(LOGS / "holdout19b/h19b-003.log")[0]  # "Invalid config blocking attribute value -2147483648"
    assert lead.code == "TD085" and "before 2.17" in lead.message and "libnccl" in lead.fix
    other = explained_with(LOGS / "holdout19b/h19b-003.log", ("-2147483648", "7"))[0]
    assert other.code == "TD077"


def test_the_watchdog_status_line_alone_is_a_torch_failure() -> None:
    lead = explained_with(LOGS / "holdout19b/h19b-002.log")[0]  # "failure detected by watchdog at work sequence id"
    assert lead.code == "TD049" and lead.message.startswith("rank 1: torch's watchdog")


def test_cuda_words_for_a_kernel_fault_say_the_run_failed() -> None:
    lead = explained_with(LOGS / "holdout19b/h19b-005.log")[0]  # "all_reduce misaligned address with bfloat16"
    assert lead.code == "TD049" and "misaligned address" in lead.message
