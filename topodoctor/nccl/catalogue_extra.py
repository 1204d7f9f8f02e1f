"""The messages around NCCL that its own source does not print, for the catalogue
(``fixtures/nccl_messages_extract.py`` adds them to data/messages.json): torch's ProcessGroupNCCL,
ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG) and c10d store, and the dynamic linker's errors
for NCCL's symbols. Formats in printf style as the sources build them (torch writes them with
``<<``; the versions are torch's). Data only."""

from __future__ import annotations

_TORCH_PG = "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
_TORCH_WRAP = "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp"
_TORCH_UTILS = "torch/csrc/distributed/c10d/NCCLUtils.hpp"
_TORCH_STORE = "torch/csrc/distributed/c10d/TCPStore.cpp"


def _m(
    source: str, file: str, function: str, fmt: str, versions: str, kind: str, code: str, sev: str
) -> dict[str, object]:
    return {
        "source": source,
        "level": "ERROR" if sev == "error" else "WARN",
        "format": fmt,
        "files": [file],
        "functions": [function],
        "versions": [versions],
        "returns": ["exception"] if sev == "error" else [],
        "class": kind,
        "code": code,
        "severity": sev,
    }


EXTRA: tuple[dict[str, object], ...] = (
    _m(
        "torch",
        _TORCH_PG,
        "WorkNCCL::checkTimeout",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, "
        "Timeout(ms)=%d) ran for %d milliseconds before timing out.",
        "torch 1.10+",
        "watchdog-timeout",
        "TD047",
        "error",
    ),
    _m(
        "torch",
        _TORCH_PG,
        "WorkNCCL::synchronizeInternal",
        "Caught collective operation timeout: WorkNCCL(OpType=%s, TensorShape=%s, Timeout(ms)=%d) ran for %d "
        "milliseconds before timing out.",
        "torch 1.8-1.9",
        "watchdog-timeout",
        "TD047",
        "error",
    ),
    _m(
        "torch",
        _TORCH_PG,
        "WorkNCCL::synchronizeInternal",
        "Work WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, Timeout(ms)=%d) timed out in blocking wait "
        "(TORCH_NCCL_BLOCKING_WAIT=1).",
        "torch 2.2+",
        "watchdog-timeout",
        "TD047",
        "error",
    ),
    _m(
        "torch",
        _TORCH_PG,
        "ProcessGroupNCCL::heartbeatMonitor",
        "ProcessGroupNCCL's watchdog got stuck for %d seconds without making progress in monitoring enqueued "
        "collectives.",
        "torch 2.2+",
        "watchdog-stuck",
        "TD047",
        "error",
    ),
    _m(
        "torch",
        _TORCH_UTILS,
        "C10D_NCCL_CHECK",
        "NCCL error in: %s:%d, %s, NCCL version %s",
        "torch 1.x+",
        "nccl-error",
        "TD052",
        "error",
    ),
    _m("torch", _TORCH_UTILS, "getNcclErrorDetailStr", "Last error: %s", "torch 2.1+", "", "", "error"),
    _m(
        "torch",
        _TORCH_WRAP,
        "CollectiveFingerPrint::verify",
        "Detected mismatch between collectives on ranks. Rank %d is running collective: %s, but Rank %d is "
        "running collective: %s.",
        "torch 1.10+",
        "torch-mismatch",
        "TD073",
        "error",
    ),
    _m(
        "torch",
        _TORCH_WRAP,
        "CollectiveFingerPrint::verify",
        "Detected mismatch between collectives on ranks. Rank %d is running inconsistent collective: %s",
        "torch 1.10-1.12",
        "torch-mismatch",
        "TD073",
        "error",
    ),
    _m(
        "torch",
        "tools/flight_recorder/components/types.py",
        "MatchInfo.__str__",
        "Error type: %s, %s",
        "torch 2.5+ (torchfrtrace; COLLECTIVE_TYPE_MISMATCH, SIZE_OR_SYNTAX_MISMATCH, COLLECTIVE_DTYPE_MISMATCH)",
        "torch-mismatch",
        "TD073",
        "error",
    ),
    _m(
        "torch",
        _TORCH_WRAP,
        "CollectiveFingerPrint::compute_collective_diff",
        "Collectives differ in the following aspects: %s",
        "torch 2.0+",
        "torch-mismatch",
        "TD073",
        "error",
    ),
    _m(
        "torch",
        _TORCH_PG,
        "ProcessGroupNCCL::Watchdog::run",
        "Process group watchdog thread terminated with exception: %s",
        "torch 1.13+",
        "",
        "",
        "error",
    ),
    _m(
        "torch",
        _TORCH_PG,
        "ProcessGroupNCCL::WorkNCCL::handleException",
        "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent "
        "GPU operations might run on corrupted/incomplete data.",
        "torch 1.10+",
        "",
        "",
        "error",
    ),
    _m(
        "torch",
        _TORCH_PG,
        "ProcessGroupNCCL::WorkNCCL::handleException",
        "To avoid data inconsistency, we are taking the entire process down.",
        "torch 1.10+",
        "",
        "",
        "error",
    ),
    _m(
        "torch",
        _TORCH_PG,
        "ProcessGroupNCCL::heartbeatMonitor",
        "Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=%d",
        "torch 2.2+",
        "",
        "",
        "error",
    ),
    _m(
        "torch",
        _TORCH_PG,
        "ProcessGroupNCCL::abort",
        "NCCL communicator was aborted on rank %d.",
        "torch 1.10+",
        "",
        "",
        "error",
    ),
    _m(
        "torch",
        _TORCH_STORE,
        "TCPStore::doWait",
        "Socket Timeout",
        "torch 1.x+",
        "",
        "",
        "error",
    ),
    _m(
        "ld.so",
        "ld.so",
        "dlopen / symbol lookup",
        "undefined symbol: nccl%s",
        "any",
        "nccl-library",
        "TD085",
        "error",
    ),
    _m(
        "ld.so",
        "ld.so",
        "dlopen",
        "libnccl.so.%d: cannot open shared object file: No such file or directory",
        "any",
        "nccl-library",
        "TD085",
        "error",
    ),
    _m(
        "torch",
        "torch/csrc/distributed/c10d/socket.cpp",
        "SocketConnectOp",
        "The IPv%d network addresses of (%s, %d) cannot be retrieved (gai error: %d - %s).",
        "torch 1.13+",
        "store-host",
        "TD072",
        "warn",
    ),
    _m("nccl", "src/init.cc", "ncclGetErrorString", "unknown result code", "2.x", "nccl-library", "TD085", "error"),
    # the link editor building against NCCL: the libnccl a library needs, or a symbol of it, not found
    *(
        _m("ld", "GNU ld", "link", text, "any", "nccl-library", "TD085", "error")
        for text in (
            "warning: libnccl.so.%d, needed by %s, not found (try using -rpath or -rpath-link)",
            "undefined reference to `nccl%s'",
        )
    ),
)
