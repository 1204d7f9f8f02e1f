"""The fifth development set (fixtures/nccl-logs/real5/, its README): what the frameworks and NET plugins print
around an NCCL failure. Every log holds its verdict by the scorer's own rules; then the readings it tried, each on
the set's files or on lines built from the printing source's own format (aws-ofi-nccl's completion WARN, libfabric's
EFA status strings, torch's ProcessGroupNCCL and NCCLComm messages)."""

from __future__ import annotations

from pathlib import Path

import pytest
from score_corpus import findings_of, readme_rows, verdict_of

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.net_peer import peer_gone
from topodoctor.nccl.parse import parse_file

SET = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "real5"
ROWS = readme_rows(SET)
H = "ip-10-0-1-5:4242:4300 [0]"
# aws-ofi-nccl 1.17+'s process_err_completion: "Request %p completed with error. RC: %d. Error: %d (%s). Completed
# length: %ld, Request: %s", the provider's string from libfabric's efa_errno.h
EFA_WARN = (
    f"{H} NCCL WARN NET/OFI Request 0x7f0a2c0 completed with error. RC: 107. Error: {{num}} ({{said}}). Completed "
    "length: 0, Request: {{ dev: 0, size: 0, state: CREATED, direction: SEND }}\n"
    f"{H} NCCL INFO transport/net.cc:1306 -> 6\n{H} NCCL INFO proxy.cc:878 -> 6 [Progress Thread]\n"
)


def _findings(name: str) -> list[Finding]:
    return findings_of(SET, name)


def _read(text: str) -> list[Finding]:
    return explain([parse_file("rank0.log", text)])


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_log_holds_its_verdict(name: str) -> None:
    verdict = verdict_of(SET, ROWS[name], name)
    assert verdict in ("named-right", "cause-not-found-correct"), (name, verdict)


@pytest.mark.parametrize(
    ("num", "said", "group"),
    [
        ("9", "Invalid receiver queue pair number (QPN)", "gone"),  # 1.21's wording of REMOTE_ERROR_BAD_DEST_QPN
        ("9", "Bad queue pair (QP) number (QP does not exist or is in error state)", "gone"),  # 1.22+
        ("4124", "Unresponsive receiver (connection previously established)", "unresponsive"),
        ("15", "Unreachable remote (never received a response)", "unreachable"),
    ],
)
def test_an_efa_status_of_the_remote_end_is_read_by_its_meaning(num: str, said: str, group: str) -> None:
    (f,) = _read(EFA_WARN.format(num=num, said=said))
    assert f.code == "TD092" and f.severity == "error" and f.evidence["group"] == group
    candidates = [str(c) for c in f.evidence["candidates"]]  # type: ignore[union-attr]
    assert ("security group" in candidates[0]) == (group == "unreachable")
    if group == "gone":  # the provider: the peer process is no longer present
        assert "out of memory" in candidates[0]


def test_the_job_memory_kill_in_the_log_leads_the_efa_error() -> None:
    text = EFA_WARN.format(num="9", said="Invalid receiver queue pair number (QPN)")
    text += (
        "slurmstepd: error: Detected 1 oom_kill event in StepId=123.0. Some of the step tasks have been OOM Killed.\n"
    )
    lead, second = _read(text)
    assert lead.code == "TD090" and lead.evidence["cause"]["confidence"] == "shown by the log"  # type: ignore[index]
    assert second.code == "TD092"


def test_libfabrics_own_warning_is_read_by_the_status_number_and_names_the_peer_host() -> None:
    (f,) = _findings("aws-ofi-nccl-346-efa-invalid-address-peer-host.log")
    assert f.code == "TD092" and f.evidence["status"] == "7" and f.evidence["group"] == "refused"
    assert f.evidence["peer_host"] == "i-0ce6d3d57139f053c" and "'Invalid address'" in f.message


def test_a_status_no_table_row_holds_is_no_peer_gone() -> None:
    assert peer_gone("NET/OFI Request 0x1 completed with error. RC: 5. Error: 10 (Receiver not ready)") is None
    assert peer_gone("Invalid receiver queue pair number") is None  # not a line of the plugin or the provider


def test_a_closed_socket_ranks_its_candidates_and_bootstrap_names_the_stray_connection() -> None:
    (f,) = _findings("nccl-914-net-closed-by-remote-peer-proxy-connect.log")
    assert f.code == "TD046" and "failed first" in str(f.evidence["candidates"][0])  # type: ignore[index]
    (b,) = _findings("nccl-1920-reset-by-peer-bootstrap-send.log")
    assert b.code == "TD046" and "2.27.3" in str(b.evidence["candidates"][0])  # type: ignore[index]


def test_a_closed_gloo_pair_is_a_lost_peer_in_a_distributed_run() -> None:
    (f,) = _findings("sglang-15792-gloo-closed-by-peer-after-idle.log")
    assert f.code == "TD046" and "[10.244.24.18]:54661" in f.message


def test_the_watchdogs_timeout_at_line_alone_names_the_work() -> None:
    (f,) = _findings("llama-cookbook-920-timeout-at-nccl-work-5.log")
    assert f.code == "TD047" and f.evidence["seq"] == 5
    assert (f.evidence["enqueued"], f.evidence["completed"], f.evidence["pg"]) == ("6", "4", "0")


def test_the_timeout_at_line_beside_the_work_is_one_collective() -> None:
    (f,) = _findings("vllm-5458-tp4-seq1-allreduce-timeout.log")
    assert f.code == "TD047" and "ops_differ" not in f.evidence and f.evidence["op"] == "ALLREDUCE"


def test_an_aborted_communicator_names_its_candidates_and_what_to_collect() -> None:
    (f,) = _findings("search-r1-170-communicator-aborted-rank0-title.log")
    assert f.code == "TD049" and f.message.startswith("rank 0: torch's NCCL communicator was aborted")
    assert "earlier timeout or NCCL error" in str(f.evidence["likely_causes"][0])  # type: ignore[index]
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" in f.fix


def test_some_operations_failed_alone_puts_the_timeout_first() -> None:
    line = (
        "[rank3]:[E1202 10:00:01.000 ProcessGroupNCCL.cpp:616] [Rank 3] Some NCCL operations have failed or timed "
        "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.\n"
    )
    (f,) = _read(line)
    assert f.code == "TD049" and f.message.startswith("rank 3: ")
    assert "past its timeout" in str(f.evidence["likely_causes"][0])  # type: ignore[index]


def test_the_plugins_close_of_a_connection_never_made_is_no_cause() -> None:
    (f,) = _findings("nccl-1597-efa-ofi-invalid-communicator-two-nodes.log")
    assert f.code == "TD052" and f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]


def test_a_completion_error_after_the_job_ran_puts_the_peer_first() -> None:
    # net_ib's completion WARN (2.19+ format); the queue pair of a peer whose process died drops what arrives
    warn = (
        f"{H} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<43522> with status=12 "
        "opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0\n"
        f"{H} NCCL INFO transport/net.cc:1306 -> 6\n{H} NCCL INFO proxy.cc:878 -> 6 [Progress Thread]\n"
    )
    (at_start,) = _read(warn)
    assert "routed" in str(at_start.evidence["candidates"][0])  # type: ignore[index]
    (mid_run,) = _read("[rank0]: step 100 loss 2.31\n[rank0]: step 200 loss 2.10\n" + warn)
    assert mid_run.code == "TD045" and "peer's process" in str(mid_run.evidence["candidates"][0])  # type: ignore[index]
