"""`nccl-log` where a message goes past its line, and the classes added for real logs: a line a
terminal wrapped, a paste cut inside NCCL's return-code trail, a CUDA error whose call the log does
not name, a rank outside the communicator (TD080), an RDMA device skipped at start-up (TD081) and
/dev/shm refusing NCCL (TD082). Each with a firing case (code and severity) and a near miss. The
lines follow the formats of the real logs in fixtures/nccl-logs/real/."""

from __future__ import annotations

from topodoctor.model.findings import Finding, failing
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "gpu7:4021:4090 [3]"
WATCHDOG = (
    "[rank2]:[E424 01:11:21.160832730 ProcessGroupNCCL.cpp:629] [Rank 2] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=4, OpTy\npe=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for "
    "1800010 milliseconds before timing out.\n"
)


def _explain(text: str) -> list[Finding]:
    return explain([parse_file("rank3.log", text)])


def _first(text: str) -> tuple[str, str]:
    f = _explain(text)[0]
    return f.code, f.severity


def test_a_watchdog_line_wrapped_by_the_terminal_is_read_whole() -> None:
    f = _explain(WATCHDOG)[0]
    assert (f.code, f.severity) == ("TD047", "error")
    assert "BROADCAST" in f.message and "1800000" in f.message


def test_a_cut_line_is_not_joined_to_the_next_message() -> None:
    cut = WATCHDOG.split("\n")[0] + "\n[rank3]:[E424 01:11:21.1 ProcessGroupNCCL.cpp:629] pe=BROADCAST ran for\n"
    assert not [f for f in _explain(cut) if f.code == "TD047"]


def test_a_wrapped_warn_is_read_with_its_next_line() -> None:
    text = f"{H} misc/ibvwrap.cc:200 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate\nmemory\n"
    assert _first(text) == ("TD061", "error")


UNKNOWN = f"{H} misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3\n"
FRAMES = f"{H} NCCL INFO misc/socket.cc:561 -> 3\n{H} NCCL INFO transport/net_socket.cc:378 -> 3\n"


def test_a_paste_cut_inside_the_trail_is_a_failure() -> None:
    findings = _explain(UNKNOWN + FRAMES + "\n")
    assert (findings[0].code, findings[0].severity) == ("TD052", "error")
    assert failing(findings, "error")


def test_a_trail_the_log_went_on_after_is_no_failure() -> None:
    went_on = UNKNOWN + FRAMES + f"{H} NCCL INFO Connected all rings\n"
    assert _first(went_on) == ("TD051", "info")
    one_frame = UNKNOWN + f"{H} NCCL INFO misc/socket.cc:561 -> 3\n"
    assert _first(one_frame) == ("TD051", "info")


LAST_ERROR = "[rank7]: ncclUnhandledCudaError: Call to CUDA function failed.\n[rank7]: Last error:\n"


def test_a_call_specific_cuda_error_without_its_call_is_cause_not_found() -> None:
    f = _explain(LAST_ERROR + "[rank7]: Cuda failure 1 'invalid argument'\n")[0]
    assert (f.code, f.severity) == ("TD052", "error")
    assert "NCCL_NVLS_ENABLE=0" in f.fix and f.evidence["cause"]["confidence"] == "not found"  # type: ignore[index]


def test_the_same_error_with_its_call_is_named() -> None:
    assert _first(f"{H} transport/nvls.cc:157 NCCL WARN Cuda failure 1 'invalid argument'\n")[0] == "TD053"
    assert _first(f"{H} init.cc:263 NCCL WARN Cuda failure 1 'invalid argument'\n") == ("TD057", "error")
    assert _first(LAST_ERROR + "[rank7]: Cuda failure 2 'out of memory'\n") == ("TD058", "error")


def test_a_rank_outside_the_communicator() -> None:
    text = f"{H} init.cc:981 NCCL WARN Invalid rank requested : 7/4\n"
    f = _explain(text)[0]
    assert (f.code, f.severity) == ("TD080", "error") and "world size" in f.fix
    assert not [g for g in _explain(f"{H} NCCL INFO comm 0x1 rank 3 nranks 4 - Init COMPLETE\n") if g.code == "TD080"]


SKIPPED = (
    f"{H} misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed\n"
    f"{H} transport/net_ib.cc:149 NCCL WARN NET/IB : Unable to open device mlx5_59\n"
)


def test_a_device_skipped_at_start_up_while_nccl_goes_on() -> None:
    text = SKIPPED + f"{H} NCCL INFO NET/IB : Using [0]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>\n"
    findings = _explain(text)
    assert (findings[0].code, findings[0].severity) == ("TD081", "warning")
    assert not failing(findings, "error")


def test_a_verbs_failure_on_the_way_up_is_not_a_skip() -> None:
    text = f"{H} misc/ibvwrap.cc:280 NCCL WARN Call to ibv_create_qp failed\n" + (
        f"{H} NCCL INFO transport/net_ib.cc:371 -> 2\n{H} NCCL INFO init.cc:1462 -> 2\n"
    )
    assert _first(text) == ("TD065", "error")


def test_dev_shm_refusing_nccl() -> None:
    text = f"{H} include/shm.h:28 NCCL WARN Call to shm_open failed : Permission denied\n"
    f = _explain(text)[0]
    assert (f.code, f.severity) == ("TD082", "error") and "chmod" in f.fix
    full = f"{H} include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n"
    assert _first(full) == ("TD043", "error")
