"""The classes read from NCCL's argument checks (misc/argcheck.cc, TD089), a program's own P2P code
(TD055 of TensorRT-LLM's custom all-reduce), a flushed RDMA request with nothing before it (cause not
found), 2.18's proxy errors reported as "internal error" (TD083), and the variables a log shows set
judged against its own NCCL version banner (TD088). The lines follow the sources' format strings
(argcheck.cc of 2.18 - 2.30, proxy.cc, TensorRT-LLM's ipcUtils) and the real logs of the corpus."""

from __future__ import annotations

import pytest

from topodoctor.model.findings import Finding
from topodoctor.nccl.classify import classify
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "gpu7:4021:4090 [1]"  # host:pid:tid [cudaDev], NCCL's line prefix
TRAIL = f"{H} NCCL INFO enqueue.cc:1450 -> 4\n{H} NCCL INFO group.cc:106 -> 4\n"


def _explain(text: str, name: str = "rank1.log") -> list[Finding]:
    return explain([parse_file(name, text)])


def _errors(text: str) -> list[Finding]:
    return [f for f in _explain(text) if f.severity == "error"]


@pytest.mark.parametrize(
    ("message", "field", "value"),
    [
        ("Recv : invalid root 0 (root should be in the 0..0 range)", "n", "0"),
        ("Broadcast : invalid root 8 (root should be in the 0..8 range)", "root", "8"),
        ("AllReduce : sendbuff 0x7f01 is not a valid pointer", "ptr", "sendbuff"),
        ("AllGather : recvbuff argument is NULL", "null", "recvbuff"),
        ("AllReduce : sendbuff allocated on device 3 mismatchs with NCCL device 0", "dev", "3"),
        ("AllReduce : invalid type 12", "type", "12"),
        ("Reduce : reduction operation 5 unknown to this communicator", "userop", "5"),
        ("Error: corrupted comm object detected", "corrupt", "corrupted comm object detected"),
    ],
)
def test_every_argcheck_message_is_an_invalid_argument(message: str, field: str, value: str) -> None:
    reading = classify(message, "misc/argcheck.cc")
    assert reading is not None and reading.kind == "invalid-argument"
    assert reading.fields[field] == value


def test_a_range_of_nranks_zero_is_a_communicator_not_initialised() -> None:
    lead = _errors(
        f"{H} misc/argcheck.cc:39 NCCL WARN Recv : invalid root 0 (root should be in the 0..0 range)\n" + TRAIL
    )[0]
    assert lead.code == "TD089"
    assert "nranks 0" in lead.message and "not initialised" in lead.message


def test_a_root_past_the_communicator_names_its_valid_ranks() -> None:
    lead = _errors(
        f"{H} misc/argcheck.cc:204 NCCL WARN Broadcast : invalid root 8 (root should be in the 0..8 range)\n" + TRAIL
    )[0]
    assert (lead.code, lead.evidence["nranks"]) == ("TD089", "8")
    assert "0..7" in lead.message and "group_src" in lead.fix


def test_a_buffer_on_another_gpu_names_set_device() -> None:
    lead = _errors(
        f"{H} misc/argcheck.cc:24 NCCL WARN AllReduce : sendbuff allocated on device 1 mismatchs with "
        "NCCL device 0\n" + TRAIL
    )[0]
    assert lead.code == "TD089" and "set_device" in lead.fix


def test_tensorrt_llm_custom_all_reduce_is_not_nccl_p2p() -> None:
    text = (
        "[TensorRT-LLM][ERROR] [TensorRT-LLM][ERROR] CUDA runtime error in error: peer access is not supported "
        "between these two devices\n"
    )
    lead = _errors(text)[0]
    assert lead.code == "TD055"
    assert "custom all-reduce" in lead.fix and "NCCL_P2P_DISABLE=1 does not reach" in lead.fix


def test_nccl_own_p2p_failure_keeps_the_nccl_fix() -> None:
    text = (
        f"{H} transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported "
        "between these two devices\n" + TRAIL
    )
    lead = _errors(text)[0]
    assert lead.code == "TD055" and "NCCL_P2P_DISABLE=1" in lead.fix and "custom" not in lead.fix


def test_a_flushed_request_alone_is_cause_not_found_with_candidates() -> None:
    text = (
        f"{H} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<57888> with status=5 "
        "opcode=1 len=0 vendor err 249 (Recv)\n"
    )
    found = _errors(text)
    assert [f.code for f in found[:2]] == ["TD052", "TD067"]
    assert found[0].evidence["candidates"]


def test_a_flushed_request_after_its_first_error_is_that_error() -> None:
    text = (
        f"{H} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5> with status=12 "
        "opcode=0 len=0 vendor err 129 (Recv)\n"
        f"{H} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5> with status=5 "
        "opcode=1 len=0 vendor err 249 (Recv)\n"
    )
    assert _errors(text)[0].code == "TD045"


INTERNAL_218 = (
    "NCCL version 2.18.3+cuda12.2\n"
    "node: Test NCCL failure common.cu:958 'internal error - please report this issue to the NCCL developers / '\n"
    " .. node pid 4021: Test failure common.cu:842\n"
)


def test_internal_error_under_2_18_is_its_known_proxy_bug() -> None:
    lead = _errors(INTERNAL_218)[0]
    assert lead.code == "TD083" and "2.19.1" in lead.message
    assert "Socket recv failed while polling" in lead.fix


def test_internal_error_of_another_version_is_not_that_bug() -> None:
    lead = _errors(INTERNAL_218.replace("2.18.3", "2.21.5"))[0]
    assert lead.code == "TD049"


def test_internal_error_of_no_version_names_the_2_18_candidate() -> None:
    text = "Test NCCL failure common.cu:1012 'internal error - please report this issue to the NCCL developers / ' .. "
    text += "dell03 pid 543317: Test failure common.cu:891\n"
    lead = _errors(text)[0]
    assert lead.code == "TD049" and lead.evidence["error_class"].endswith("NCCL developers")
    assert "2.19" in lead.message


def _variables(text: str) -> list[Finding]:
    return [f for f in _explain(text) if f.code == "TD088"]


def test_a_typo_on_the_command_line_is_judged_against_the_banner() -> None:
    text = (
        "mpirun -np 2 -x NCCL_IB_GID_INDX=3 -x NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8\n"
        f"{H} NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    )
    (found,) = _variables(text)
    assert found.subject == "env:NCCL_IB_GID_INDX" and found.severity == "warning"
    assert found.evidence["suggestion"] == "NCCL_IB_GID_INDEX" and found.evidence["line"] == 1
    assert found.evidence["nccl_version"] == "2.21.5"


def test_a_removed_variable_is_named_with_its_replacement() -> None:
    text = f"export NCCL_LL_THRESHOLD=0\n{H} NCCL INFO NCCL version 2.20.5+cuda12.4\n"
    (found,) = _variables(text)
    assert "NCCL_PROTO" in found.message


def test_variables_of_an_nccl_older_than_the_table_are_not_judged() -> None:
    text = f"export NCCL_LL_THRESHOLD=0\n{H} NCCL INFO NCCL version 2.7.8+cuda11.1\n"
    assert _variables(text) == []


def test_variables_without_a_banner_are_not_judged() -> None:
    assert _variables("mpirun -x NCCL_IB_GID_INDX=3 ./a.out\n") == []


def test_variables_nccl_read_are_quiet_and_the_run_stays_healthy() -> None:
    text = (
        f"{H} NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        f"{H} NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        f"{H} NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n"
    )
    assert _explain(text) == []


STUCK = (
    "[rank7]:[E626 05:14:36.393067540 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 7] "
    "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
    "collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog\n"
)


def test_a_watchdog_stuck_is_a_failure_of_the_watchdog_not_of_a_collective() -> None:
    (lead,) = _errors(STUCK)
    assert lead.code == "TD047" and "480 s" in lead.message and "py-spy" in lead.fix


def test_a_known_bug_sign_without_a_banner_is_a_candidate_not_a_verdict() -> None:
    text = f"{H} graph/rings.cc:38 NCCL WARN Error : ring 0 does not loop back to start (13 != 15).\n" + TRAIL
    lead = _errors(text)[0]
    assert lead.code == "TD052" and "if the job runs NCCL 2.19.0 - 2.19.3" in lead.fix
    assert lead.evidence["bug_candidates"]
    with_banner = _errors("NCCL version 2.21.5+cuda12.4\n" + text)[0]
    assert with_banner.code == "TD052" and "bug_candidates" not in with_banner.evidence


def test_a_variable_of_the_ib_sharp_plugin_is_a_real_name() -> None:
    text = f"mpirun -x NCCL_IBEXT_DISABLE=1 -x NCCL_IB_DISABLE=1 ./a.out\n{H} NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    assert _variables(text) == []


def test_a_null_handle_is_not_called_a_buffer() -> None:
    lead = _errors(f"{H} misc/argcheck.cc:32 NCCL WARN CommInitRank : newcomm argument is NULL\n" + TRAIL)[0]
    assert lead.code == "TD089" and "newcomm" in lead.message and "buffer" not in lead.message


def test_a_symbol_in_quotes_is_the_linker_s_error() -> None:
    lead = _errors('undefined symbol: "ncclCommWindowRegister"\n')[0]
    assert lead.code == "TD085" and "ncclCommWindowRegister" in lead.message


def test_a_segment_of_an_empty_suffix_is_no_name_nccl_makes() -> None:
    text = (
        "NCCL version 2.26.2+cuda12.2\n"
        f"{H} misc/shmutils.cc:132 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- "
        "(size 192814336), error: No such file or directory (2)\n" + TRAIL
    )
    assert _errors(text)[0].code == "TD087"


def test_a_qp_timeout_over_the_ibext_plugin_names_its_own_switch() -> None:
    text = (
        f"{H} NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        f"{H} NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so\n"
        f"{H} NCCL INFO Using network IBext_v8\n"
        f"{H} ibvwrap.c:160 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out\n" + TRAIL
    )
    lead = _errors(text)[0]
    assert lead.code == "TD064" and "NCCL_IBEXT_DISABLE" in lead.fix and "NCCL_IB_GID_INDEX" in lead.fix
