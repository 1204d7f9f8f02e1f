"""The seventh blind set as development input since it was scored (fixtures/nccl-logs/holdout7): CUDA's error 36
(cudaErrorCallRequiresNewerDriver, 'API call is not supported in the installed CUDA driver') read as a driver
older than the build needs (TD044), and in NCCL 2.9.6 - 2.9.8 at enqueue.cc:802 as the known bug of the CUDA
graph capture check that 2.9.9 fixed (NCCL 2.9.9-1's ncclGetCudaGraph asks cudaStreamIsCapturing below driver
11.3); gdb's stop on SIGBUS read as the process's SIGBUS (TD094); CUDA's 'unknown error' at a call the log does
not name answered with the state's candidates, never one cause."""

from __future__ import annotations

from pathlib import Path

import pytest
from nccl_support import lead_of
from score_corpus import readme_rows, verdict_of

SET = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "holdout7"
H = "node2:1811:1902 [0]"


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("h7-007.log", "named-right"),
        ("h7-008.log", "named-right"),
        ("h7-011.log", "named-right"),
        ("h7-024.log", "cause-not-found-correct"),
    ],
)
def test_the_fixed_files_hold_their_verdicts(name: str, verdict: str) -> None:
    assert verdict_of(SET, readme_rows(SET)[name], name) == verdict


def test_a_call_needing_a_newer_driver_is_the_driver_on_a_release_without_the_bug() -> None:
    text = (
        "NCCL version 2.14.3+cuda11.7\n"
        f"{H} NCCL INFO cudaDriverVersion 11000\n"
        f"{H} enqueue.cc:1191 NCCL WARN Cuda failure 'API call is not supported in the installed CUDA driver'\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled cuda error, NCCL version 2.14.3\n"
    )
    assert lead_of(text).code == "TD044"


def test_the_graph_capture_bug_is_named_by_its_release_or_its_line() -> None:
    warn = f"{H} enqueue.cc:802 NCCL WARN Cuda failure 'API call is not supported in the installed CUDA driver'\n"
    lead = lead_of(f"NCCL version 2.9.8+cuda11.3\n{warn}")
    assert lead.code == "TD083" and "2.9.9" in lead.message
    assert lead_of(warn).code == "TD083"  # no banner: line 802 is this WARN's in 2.9.6 - 2.9.8 alone


def test_gdb_stopping_on_sigbus_in_nccl_is_the_sigbus_class() -> None:
    text = (
        'Thread 7 "python" received signal SIGBUS, Bus error.\n'
        "0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long, void**, void**, int, void**) () from libnccl.so.2\n"
    )
    assert lead_of(text).code == "TD094"


def test_an_unknown_cuda_error_at_no_named_call_ranks_the_states() -> None:
    text = (
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, unhandled cuda error "
        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 999 'unknown error'\n"
    )
    lead = lead_of(text)
    cause = lead.evidence["cause"]
    assert lead.code == "TD057" and isinstance(cause, dict) and cause["confidence"] == "candidates"
    assert "xid" in lead.fix and "nvidia_uvm" in lead.fix


def test_gloos_mesh_failure_ranks_its_interface_first() -> None:
    """torch's ProcessGroupGloo: with no address for the host's name it binds the loopback (its warning says so),
    and the other nodes' connectFullMesh is refused; the interface is the first candidate, at error."""
    assert verdict_of(SET, readme_rows(SET)["h7-009.log"], "h7-009.log") == "named-right"
    lead = lead_of(
        "[rank8] Gloo connectFullMesh failed ... timed out connecting: SO_ERROR: Connection refused, "
        "remote=[127.0.0.1]:14215\nRuntimeError: Gloo connectFullMesh failed ...\n"
    )
    cause = lead.evidence["cause"]
    assert lead.code == "TD072" and "GLOO_SOCKET_IFNAME" in lead.fix and "loopback" in lead.message
    assert isinstance(cause, dict) and cause["confidence"] == "candidates"
