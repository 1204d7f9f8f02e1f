"""The twenty-eighth and twenty-ninth blind sets (fixtures/nccl-logs/holdout28, holdout29), scored once and now
development sets: a hang said as "dead lock", a firewall said in the post beside a bare error, a launch line that
starts more processes than it leaves GPUs, the heartbeat monitor's message naming the flight recorder, an RDMA
device's fatal asynchronous event (TD107), and the MTU among RoCE's causes of status 12."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained, explained_with

LOGS = FIXTURES / "nccl-logs" / "holdout28"
LOGS29 = FIXTURES / "nccl-logs" / "holdout29"


def test_a_dead_lock_said_in_two_words_is_a_hang() -> None:
    lead = explained_with(LOGS / "h28-001.log")[0]  # "Dead lock after torch.distributed.all_reduce", COLL lines only
    assert lead.code == "TD959" and "NCCL_P2P_DISABLE=1" in lead.fix
    assert explained_with(LOGS / "h28-001.log", ("Dead lock after", "Loss after")) == []


def test_a_firewall_said_beside_a_bare_error_is_the_connection() -> None:
    lead = explained_with(LOGS / "h28-003.log")[0]  # ncclSystemError, "Last error:" empty; only ports 40000-40050 open
    assert lead.code == "TD072" and "firewall" in lead.message and "ip_local_port_range" in lead.fix
    unsaid = explained_with(LOGS / "h28-003.log", ("(not blocked by the firewall)", ""), ("ports 40000-40050", "x"))
    assert unsaid[0].code == "TD049"


def test_a_markdown_heading_after_an_empty_last_error_is_no_reason() -> None:
    lead = explained_with(LOGS / "h28-003.log", ("firewall", "router"), ("ports 40000-40050", "x"))[0]
    assert "Reproduction" not in lead.message


def test_a_launch_line_with_more_processes_than_visible_gpus() -> None:
    lead = explained_with(LOGS / "h28-007.log")[0]  # CUDA_VISIBLE_DEVICES=1 torchrun --nproc_per_node=4
    assert lead.code == "TD042" and "--nproc_per_node equal the GPUs in CUDA_VISIBLE_DEVICES" in lead.fix
    enough = explained_with(LOGS / "h28-007.log", ("CUDA_VISIBLE_DEVICES=1 ", "CUDA_VISIBLE_DEVICES=0,1,2,3 "))[0]
    assert enough.code == "TD042" and "--nproc_per_node equal" not in enough.fix


def test_the_heartbeat_monitor_names_the_flight_recorder() -> None:
    lead = explained_with(LOGS / "h28-010.log")[0]  # watchdog got stuck for 600 seconds
    assert lead.code == "TD047" and "TORCH_NCCL_TRACE_BUFFER_SIZE" in lead.message


def test_a_fatal_async_event_on_a_queue_pair_is_td107() -> None:
    lead = explained_with(LOGS29 / "h29-005.log")[0]  # async fatal event on QP: invalid request local work queue error
    assert lead.code == "TD107" and lead.severity == "error"
    assert lead.message.endswith("invalid request local work queue error")
    assert lead.evidence["candidates"][0].startswith("the NIC's firmware")  # type: ignore[index]
    access = explained_with(LOGS29 / "h29-005.log", ("invalid request local work", "local access violation work"))[0]
    assert access.code == "TD107" and "GPUDirect RDMA" in access.evidence["candidates"][0]  # type: ignore[index]
    srq = explained_with(LOGS29 / "h29-005.log", ("event on QP", "event on SRQ, unused for now"))
    assert not srq or srq[0].code != "TD107"  # NCCL uses no shared receive queue: the event is not its failure


def test_roce_status_12_names_the_mtu() -> None:
    lead = explained_with(LOGS29 / "h29-007.log")[0]  # error 12 after the switch ports were limited; GID index 3
    assert lead.code == "TD045" and "active_mtu" in lead.fix


LOGS30 = FIXTURES / "nccl-logs" / "holdout30"
LOGS31 = FIXTURES / "nccl-logs" / "holdout31"


def test_a_firewall_ruled_out_in_the_post_is_no_cause() -> None:
    lead = explained_with(FIXTURES / "nccl-logs" / "holdout18" / "h18-009.log")[0]  # "No firewall is blocking tcp"
    assert lead.code != "TD072"


def test_a_plugin_that_did_not_load_leads_the_network_it_would_give() -> None:
    found = explained_with(LOGS30 / "h30-007.log")  # libnccl-net.so needs GLIBC_2.32, then "network gIB not found"
    assert [f.code for f in found[:2]] == ["TD099", "TD040"] and "GLIBC_2.32" in found[0].message


def test_the_store_s_eaddrinuse_on_lines_of_its_own() -> None:
    lead = explained_with(LOGS30 / "h30-009.log")[0]  # "code: -98," then "name: EADDRINUSE," on the next line
    assert lead.code == "TD091" and "ip_local_port_range" in lead.fix
    unsaid = explained_with(LOGS30 / "h30-009.log", ("The server socket has failed", "The socket has"))
    assert not unsaid or unsaid[0].code != "TD091"  # a bare errno with no store's words is any program's


def test_aws_ofi_nccl_failed_and_nccl_went_on_over_sockets() -> None:
    lead = explained_with(LOGS31 / "h31-006.log")[0]  # "[repeated 15x across cluster]" after each line (Ray)
    assert lead.code == "TD084" and lead.severity == "error" and "`Using network Socket`" in lead.message
    assert "vpc.amazonaws.com/efa" in lead.fix
    healthy = "\n".join(
        (
            "h:1:1 [0] nccl_net_ofi_create_plugin:1067 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
            "h:1:1 [0] NCCL INFO Using network Socket",
            "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
            "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
        )
    )
    went_on = explained(healthy, "ok.log")
    assert [f.code for f in went_on] == ["TD108"] and went_on[0].severity == "warning"


def test_processes_that_each_ran_a_test_of_one_rank() -> None:
    lead = explained_with(LOGS31 / "h31-005.log")[0]  # twelve `Rank  0 Group  0` lines, six per host, device 0
    assert lead.code == "TD109" and "12 processes on 2 hosts" in lead.message and "MPI=1" in lead.fix
    joined = explained_with(LOGS31 / "h31-005.log", ("Rank  0 Group  0 Pid 672182", "Rank  1 Group  0 Pid 672182"))
    assert not joined or joined[0].code != "TD109"  # a run that lists another rank was joined


LOGS32 = FIXTURES / "nccl-logs" / "holdout32"
LOGS33 = FIXTURES / "nccl-logs" / "holdout33"


def test_the_proxy_s_close_at_shutdown_is_teardown() -> None:
    found = explained_with(LOGS32 / "h32-003.log")  # Accept failed, then "Failed to execute operation Close"
    assert found[0].code == "TD075" and found[0].severity == "warning" and "shutdown" in found[0].message
    assert not any(f.severity == "error" for f in found)
    other = explained_with(LOGS32 / "h32-003.log", ("operation Close", "operation Connect"))
    assert other[0].severity == "error"  # a proxy operation that is not the teardown's failed the run


def test_the_store_s_peer_reset_is_a_peer_gone() -> None:
    lead = explained_with(LOGS32 / "h32-007.log")[0]  # init_process_group: RuntimeError: Connection reset by peer
    assert lead.code == "TD046" and "remote process" in lead.message


def test_accelerate_s_process_count_is_named() -> None:
    lead = explained_with(LOGS32 / "h32-009.log")[0]  # four processes, every one on cuda:0, Duplicate GPU detected
    assert lead.code == "TD042" and "num_processes" in lead.fix


def test_a_chinese_post_that_says_it_is_stuck() -> None:
    lead = explained_with(LOGS33 / "h33-001.log")[0]  # "程序会卡着" over Paddle's multi-machine NCCL training
    assert lead.code == "TD959"


def test_rccl_tests_hip_failure_reads_as_the_cuda_error_it_stands_for() -> None:
    lead = explained_with(LOGS29 / "h29-009.log")[0]  # "Test HIP failure common.cu:1129 'hipErrorInvalidDevice'"
    assert lead.code == "TD057" and "invalid device ordinal" in lead.message and "/dev/kfd" in lead.fix


LOGS34 = FIXTURES / "nccl-logs" / "holdout34"


def test_cuda_802_in_the_post_s_words_is_the_fabric_manager() -> None:
    lead = explained_with(LOGS34 / "h34-007.log")[0]  # "CUDA Error 802 on all H200 multi-GPU HF Jobs with vLLM"
    assert lead.code == "TD054" and "nvidia-fabricmanager" in lead.fix
    other = explained_with(LOGS34 / "h34-007.log", ("802", "700"), ("system not yet initialized", "x"))
    assert not other or other[0].code != "TD054"


def test_the_same_collective_at_different_counts_is_a_mismatch_of_counts() -> None:
    lead = explained_with(LOGS34 / "h34-009.log")[0]  # BARRIER at sequence 17 on rank 11, at 45 on rank 0
    assert lead.code == "TD073" and "rank 11 is at collective 17" in lead.message and "mismatch" in lead.message
