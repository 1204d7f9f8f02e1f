"""The findings of the process side: CUDA that could not start because the libcuda loaded does not fit the kernel
driver or the GPU (803, 804: TD097), and a process that crashed in native code with no NCCL error before it
(glibc's heap check, SIGSEGV, SIGABRT: TD098); a library beside NCCL in the process that finds no NIC it can
drive (NVSHMEM's IBGDA skipping a NIC that is not mlx5: TD106). Their candidates are ``causes_process``'s. Data
in, a ``Said`` out; no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topodoctor.nccl.cuda_errors import COMPAT_NUMBERS, compat_error
from topodoctor.nccl.evidence import Builder, LogContext, Said
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.grammar import CUMEM_HOST_PROBE
from topodoctor.nccl.parse import Event

_SIGNALS = {
    "Segmentation fault": "SIGSEGV",
    "Segfault": "SIGSEGV",
    "SIGSEGV": "SIGSEGV",
    "Aborted": "SIGABRT",
    "SIGABRT": "SIGABRT",
}
_COMPAT_SAID = {
    "803": "the CUDA driver library the process loaded does not match the kernel driver",
    "804": "CUDA's forward-compatibility package is in use on a GPU that does not support it",
}


def _compat(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    num = compat_error(dict(f), f.get("said", evs[0].text))
    words = f.get("msg", "") if f.get("num") else COMPAT_NUMBERS[num]  # CUDA's whole string, not the words matched
    msg = f"CUDA {num} '{words}': {_COMPAT_SAID[num]}"
    return Said("TD097", msg, EXPLANATIONS["TD097"].fix, {"cuda_error": num})


def _crash(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    heap = next((e for e in evs if e.fields.get("heap")), None)
    if heap is not None:
        msg = (
            f"a process of the run aborted in glibc's heap check ('{heap.fields['heap'].strip()}'): native code had "
            "corrupted its memory before"
        )
        return Said("TD098", msg, EXPLANATIONS["TD098"].fix, {"signal": "SIGABRT", "heap": heap.fields["heap"]})
    if any(e.fields.get("frame") == CUMEM_HOST_PROBE for e in evs):
        msg = (
            "a process crashed inside NCCL's probe of cuMem host memory (ncclCuMemHostEnable, misc/cudawrap.cc, "
            "calling the driver's cuMemCreate) as the communicator started"
        )
        fix = (
            "Set NCCL_CUMEM_HOST_ENABLE=0 in every rank (NCCL then allocates its host buffers without cuMem); the "
            "crash is in the driver's cuMemCreate, which NVIDIA's NCCL team names a driver bug fixed in R595 and "
            "later drivers: upgrade the driver. " + EXPLANATIONS["TD087"].fix
        )
        return Said("TD087", msg, fix, {"signal": "SIGSEGV", "frame": CUMEM_HOST_PROBE})
    names = [v for e in evs for k, v in e.fields.items() if k.startswith("signame")]
    signal = next((_SIGNALS[n] for n in names if n in _SIGNALS), "a signal")
    msg = f"a process of the run died of {signal} with no NCCL error before it: {evs[0].text[:120]}"
    return Said("TD098", msg, EXPLANATIONS["TD098"].fix, {"signal": signal})


def _interposer(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    said = next((e.fields["said"].strip() for e in evs if e.fields.get("said")), "")
    calls = list(dict.fromkeys(e.fields["call"] for e in evs if e.fields.get("call")))
    msg = "HAMi-core (libvgpu.so), the vGPU layer interposed on CUDA's driver calls, failed"
    msg += f" in its hook of {calls[0]}" if calls else ""
    msg += f": '{said[:100]}'" if said else ""
    return Said("TD958", msg, EXPLANATIONS["TD958"].fix, {"call": calls[0] if calls else "", "said": said})


def _not_mlx5(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    devices = list(dict.fromkeys(e.fields["dev"] for e in evs if e.fields.get("dev")))
    msg = f"NVSHMEM's IBGDA transport skipped {', '.join(devices) or 'an RDMA device'}: not a ConnectX (mlx5) NIC"
    return Said("TD106", msg, EXPLANATIONS["TD106"].fix, {"devices": devices})


PROCESS: dict[str, Builder] = {
    "cuda-compat": _compat,
    "process-crash": _crash,
    "cuda-interposer": _interposer,
    "nvshmem-not-mlx5": _not_mlx5,
}
