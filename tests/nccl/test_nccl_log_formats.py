"""The formats real NCCL output comes in, each read to the same finding: launcher and framework
prefixes (Ray, mpirun --tag-output, pdsh/srun, `name [stderr] `), timestamps, Markdown, NCCL
before 2.5 (`WARN` and `INFO` without "NCCL"), the 2.29+ `(function)` in WARN lines, a bare
`ncclInternalError ... Last error:` block, nccl-tests' `Test CUDA failure` with any CUDA
message, a version banner wrapped over two lines, and a healthy 2.31 log with its tuning lines."""

from __future__ import annotations

import pytest

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "gpu7:4021:4090 [3]"  # host:pid:tid [cudaDev], NCCL's line prefix


def _explain(text: str, name: str = "rank3.log") -> list[Finding]:
    return explain([parse_file(name, text)])


LINE = "misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported"


@pytest.mark.parametrize(
    "text",
    [
        f"(RayWorkerWrapper pid=2611, ip=10.0.0.4) {H} {LINE}\n",
        f"(pid=34272) {H} {LINE}\n",
        f"[1,3]<stderr>:{H} {LINE}\n",
        f"trainer-0 [stderr] {H} {LINE}\n",
        f"[2025-04-06 22:31:56] {H} {LINE}\n",
        f"10.10.23.10: {H} {LINE}\n",
        f"3: {H} {LINE}\n",
        f"\x1b[36m(WorkerDict pid=9)\x1b[0m {H} {LINE}\n",
        f"**{H} {LINE}**\n",
        f"> {H} {LINE}\n",
        f"{H} [0] misc/ibvwrap.cc:288 (wrap_ibv_reg_dmabuf_mr) NCCL WARN Call to ibv_reg_dmabuf_mr failed with error "
        "Operation not supported\n",
    ],
)
def test_launcher_prefixes_and_formats(text: str) -> None:
    (f,) = _explain(text)
    assert (f.code, f.severity) == ("TD062", "error")


def test_pre_2_5_warn_and_info_without_nccl() -> None:
    text = (
        "gpu-bql:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out\n"
        "gpu-bql:18553:18611 [0] INFO transport/net_socket.cu:118 -> 2\n"
        "gpu-bql:18553:18611 [0] INFO bootstrap.cu:119 -> 2 [bthread]\n"
    )
    f = parse_file("old.log", text)
    assert f.level == "INFO" and f.failed
    assert _explain(text)[0].code == "TD072"


def test_bare_internal_error_block_without_torch_header() -> None:
    text = (
        "[trainer0|0]:ncclInternalError: Internal check failed.\n[trainer0|0]:Last error:\n"
        "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor "
        "AF_INET6(10)\n"
    )
    (f,) = _explain(text)
    assert (f.code, f.severity) == ("TD041", "error") and f.evidence["line"] == 3


def test_nccl_tests_cuda_failure_reads_any_cuda_message() -> None:
    for msg, code in (
        ("system not yet initialized", "TD054"),
        ("out of memory", "TD058"),
        ("invalid device ordinal", "TD057"),
        ("no kernel image is available for execution on the device", "TD060"),
        ("unknown error", "TD057"),
    ):
        (f, *_) = _explain(
            f"node3: Test CUDA failure common.cu:941 '{msg}'\n .. node3 pid 1: Test failure common.cu:891\n"
        )
        assert (f.code, f.severity) == (code, "error"), msg


def test_version_banner_wrapped_over_two_lines() -> None:
    f = parse_file("r.log", "NCCL version\n2.21.5+cuda12.4\n")
    assert f.versions == ("2.21.5+cuda12.4",)
    g = parse_file("s.log", "NCCL version 2.21.5+cuda12.4node2:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n")
    assert g.versions == ("2.21.5+cuda12.4",)


def test_healthy_info_log_with_tuning_lines_is_quiet() -> None:
    text = (
        f"{H} NCCL INFO NCCL version 2.31.1+cuda13.0\n{H} NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
        f"{H} NCCL INFO AllReduce: 1048576 Bytes -> Best tuning Ring/Simple timeUs 21.4 channels 16\n"
        f"{H} NCCL INFO ncclCommInitRank comm 0x5 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 4000 - Init COMPLETE\n"
    )
    assert _explain(text) == []


@pytest.mark.parametrize(
    ("text", "code", "said"),
    [
        ("[1,0]<stderr>:ncclCommInitRank failed: invalid usage\n", "TD049", "invalid usage"),
        (
            "W nccl_utils.cc:50] NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda "
            "error (run with NCCL_DEBUG=INFO for details)\n",
            "TD049",
            "unhandled cuda error",
        ),
        (
            "torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving ncclUniqueId from "
            "[0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer\n",
            "TD072",
            "MASTER_ADDR",
        ),
        (
            "[rank1]:[E ProcessGroupNCCL.cpp:1316] NCCL communicator was aborted on rank 1. Original reason for "
            "failure was: NCCL error: remote process exited or there was a network error, NCCL version 2.20.5\n",
            "TD046",
            "failed first",
        ),
    ],
)
def test_other_frameworks_words_for_a_failed_nccl_call(text: str, code: str, said: str) -> None:
    (f,) = _explain(text)
    assert (f.code, f.severity) == (code, "error") and said in f.message + f.fix


def test_a_cuda_error_outside_nccl_is_not_read_as_nccl() -> None:
    assert _explain("RuntimeError: CUDA error: invalid argument\n") == []
