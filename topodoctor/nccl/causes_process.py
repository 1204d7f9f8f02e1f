"""The causes of the process side's classes whose words fit several: CUDA's 803 and 804 (the libcuda loaded does
not fit the kernel driver or the GPU: CUDA's enum documentation and its forward-compatibility guide) and a process
that crashed in native code with no NCCL error before it (glibc's heap check, SIGSEGV, SIGABRT), and bootstrap.cc's
"Message truncated" (two ranks' processes out of step in NCCL's own exchange), most likely first, with what tells
each apart. Data; ``nccl.causes`` weighs them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from topodoctor.nccl.cuda_errors import compat_error
from topodoctor.nccl.evidence import LogContext
from topodoctor.nccl.log_signs import VERSIONS, ClassCause, ClassCauses
from topodoctor.nccl.parse import Event


def _compat(num: str) -> Callable[[Sequence[Event]], bool]:
    """The table's entry for one of the two errors (803, 804), by the message's number or words."""
    return lambda evs: compat_error(dict(evs[0].fields), evs[0].fields.get("said", evs[0].text)) == num


def _versions(ctx: LogContext) -> list[tuple[int, ...]]:
    out = []
    for v in ctx.versions:
        parts = v.split("+")[0].split(".")[:3]
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            out.append(tuple(int(p) for p in parts))
    return out


def _two_versions(evs: Sequence[Event], ctx: LogContext) -> bool:
    return len(set(_versions(ctx))) > 1


def _heap(evs: Sequence[Event], ctx: LogContext) -> bool:
    return any(e.fields.get("heap") for e in evs)


_COMPAT_TELLS = (
    "`ls -l /usr/local/cuda/compat/` and `echo $LD_LIBRARY_PATH` in the container (the compat libcuda.so.5xx.yy "
    "and whether it is on the path) against `cat /proc/driver/nvidia/version` on the host"
)
PROCESS_CAUSES = (
    ClassCauses(
        "TD097",
        (
            ClassCause(
                "the container's CUDA forward-compatibility package (cuda-compat: /usr/local/cuda/compat/libcuda.so "
                "on LD_LIBRARY_PATH or in ldconfig) does not match the host's kernel driver: update the image's "
                "cuda-compat to one built for a driver branch the hosts run (a base image made for it), or take it "
                "off the library path where the host driver is already new enough",
                _COMPAT_TELLS,
            ),
            ClassCause(
                "the host's driver was upgraded without a reboot: the new user-space libcuda runs over the old "
                "kernel module (nvidia-smi then says 'Driver/library version mismatch'): reboot or reload the modules",
                "`cat /proc/driver/nvidia/version` (the module loaded) against `modinfo nvidia -F version` and the "
                "libcuda.so.5xx version in /usr/lib",
            ),
            ClassCause(
                "a libcuda of another driver inside the image (copied in, or mounted from another host) in place of "
                "the one the NVIDIA container toolkit mounts from the host",
                "`ldconfig -p | grep libcuda` in the container: one libcuda.so.1, the host's version",
            ),
        ),
        "the host's `cat /proc/driver/nvidia/version`, and in the container `ls -l /usr/local/cuda/compat/`, "
        "`ldconfig -p | grep libcuda` and LD_LIBRARY_PATH",
        _compat("803"),
    ),
    ClassCauses(
        "TD097",
        (
            ClassCause(
                "CUDA's forward-compatibility package (cuda-compat) is in use on a GPU that does not support it (only "
                "data-center GPUs, select NGC-ready RTX and Jetson do): take cuda-compat off the library path and "
                "upgrade the host driver instead",
                _COMPAT_TELLS + "; `nvidia-smi -L` for the GPU model",
            ),
            ClassCause(
                "a host with GPUs of several kinds, where CUDA_VISIBLE_DEVICES exposes one without forward "
                "compatibility: make only supported GPUs visible to the process",
                "`nvidia-smi -L` and CUDA_VISIBLE_DEVICES of the failing process",
            ),
        ),
        "`nvidia-smi -L`, `cat /proc/driver/nvidia/version`, and `ls -l /usr/local/cuda/compat/` in the container",
        _compat("804"),
    ),
    ClassCauses(
        "TD098",
        (
            ClassCause(
                "NCCL itself: a release older than the platform it runs on (NCCL added Blackwell (B200, GB200) "
                "support, with the limits large NVLink domains need, in 2.25.1, its release notes say) or a bug of the "
                "release fixed in a later one (NVIDIA/nccl#1043: a heap corruption of 2.18 - 2.19 with NVLS over "
                "dual-port NICs): upgrade NCCL (2.25.1 or later on Blackwell)",
                "the NCCL version banner (NCCL_DEBUG=VERSION) and the GPU model (`nvidia-smi -L`); the same run with a "
                "newer NCCL, and at fewer nodes",
            ),
            ClassCause(
                "two NCCL libraries in one process, or a libnccl other than the one the program was built with "
                "(LD_PRELOAD, LD_LIBRARY_PATH, a second nvidia-nccl wheel): their structures do not agree",
                "`grep nccl /proc/PID/maps` (or `ldd` on the program), `pip list | grep nccl`, the version banners",
                first=_two_versions,
            ),
            ClassCause(
                "a bug of the program or of another native library in the process (an extension, a network plugin such "
                "as aws-ofi-nccl, an MPI), which the signal's line does not name",
                "a core file's backtrace (`ulimit -c unlimited`, `gdb -batch -ex bt python core`), its top frames",
            ),
            ClassCause(
                "the process aborted itself after an error it reported earlier (torch's watchdog after a collective "
                "failed or timed out, an uncaught C++ exception: `terminate called`)",
                "the rank's own lines before the signal: torch's or NCCL's error",
                ruled_out=_heap,
            ),
        ),
        "a core backtrace, the NCCL version banner (NCCL_DEBUG=INFO) with the GPU model, which libnccl the process "
        "mapped, and the same run at fewer ranks",
    ),
    ClassCauses(
        "TD073",
        # bootstrap.cc's bootstrapNetRecv (2.12+): a message larger than the receiver asked for on NCCL's own
        # bootstrap socket. Both ends are NCCL's code, not the program's calls, so the two processes are out of
        # step in NCCL's exchange; its words do not say why.
        (
            VERSIONS,
            ClassCause(
                "a fault of this NCCL release's own connection set-up (both ends of the exchange are NCCL's code): "
                "run the job on another release, an older one (2.18.x) or the newest, and report it if it goes away",
                "the same job on another NCCL release (LD_PRELOAD of another libnccl.so, or NCCL_DEBUG=INFO's banner "
                "with the pip package it came from)",
            ),
            ClassCause(
                "the ranks do not make the same calls in the same order (a communicator created, split or used for "
                "send/recv on some ranks only), so one rank's set-up meets another's",
                "TORCH_DISTRIBUTED_DEBUG=DETAIL and every rank's NCCL_DEBUG=INFO lines before the failure",
            ),
        ),
        "every rank's NCCL version banner (NCCL_DEBUG=INFO) and NCCL_* settings, and the same job on another NCCL "
        "release",
        lambda evs: evs[0].source.startswith("bootstrap") and "truncated" in evs[0].text,
    ),
)
