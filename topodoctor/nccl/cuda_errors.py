"""The CUDA errors whose own words name their cause, whatever call raised them: the string cudaGetErrorString /
cuGetErrorString gives (CUDA's runtime and driver enums, cudaError_t / CUresult) and the event kind it reads as.
NCCL prints them in ``Cuda failure N 'string'``, nccl-tests in ``Test CUDA failure file:line 'string'``, torch in
``CUDA error: string`` and, at its first call, ``Unexpected error from cudaGetDeviceCount() ... Error N: string``;
every form reads the string. Errors whose meaning is the call's ('invalid argument', 'unknown error') are not
here: ``nccl.cuda_sites`` gives their call's candidates. Data only."""

from __future__ import annotations

import re
from collections.abc import Mapping

_COMPAT = "cuda-compat"
# (the error's words, the kind); the first that matches wins
CUDA_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    # 802 cudaErrorSystemNotReady: the Fabric Manager has not registered the GPUs (NVSwitch systems)
    (re.compile(r"system not yet initialized|\b802\b.*not.*initiali[sz]ed", re.I), "fabric-not-ready"),
    (re.compile(r"peer access is not supported", re.I), "p2p-unsupported"),  # 217
    # 35 cudaErrorInsufficientDriver; 36 cudaErrorCallRequiresNewerDriver (a call of a newer CUDA than the driver's,
    # under enhanced compatibility); torch's "The NVIDIA driver on your system is too old"
    (
        re.compile(
            r"driver version is insufficient|driver on your system is too old|"
            r"API call is not supported in the installed CUDA driver",
            re.I,
        ),
        "cuda-driver",
    ),
    # 803 cudaErrorSystemDriverMismatch, 804 cudaErrorCompatNotSupportedOnDevice: the libcuda loaded is not the
    # kernel driver's own, most often CUDA's forward-compatibility package (cuda-compat)
    (re.compile(r"unsupported display driver / cuda driver combination|forward compatibility was attempted"), _COMPAT),
    # 500 / 98 / 209: no code in the binary for this GPU's architecture; HIP's hipErrorInvalidKernelFile (RCCL's
    # "Cuda failure 'invalid kernel file'"): no code object in the library for this gfx target
    (
        re.compile(
            r"named symbol not found|no kernel image is available|invalid device function|invalid kernel file", re.I
        ),
        "kernel-image",
    ),
    (re.compile(r"out of memory", re.I), "gpu-oom"),  # 2
)

# CUDA's enum words for the errors of ``cuda-compat``: which of the two the message is
COMPAT_NUMBERS = {
    "803": "system has unsupported display driver / cuda driver combination",
    "804": "forward compatibility was attempted on non supported HW",
}
_ERROR_NUMBER = re.compile(r"(?:Error|error|failure) (?P<num>\d{1,4})\b")


def compat_error(fields: dict[str, str] | None, said: str) -> str:
    """'803' or '804': which forward-compatibility error a message is, by its number or its words."""
    num = (fields or {}).get("num", "")
    if num in COMPAT_NUMBERS:
        return num
    if (m := _ERROR_NUMBER.search(said)) and m["num"] in COMPAT_NUMBERS:
        return m["num"]
    return "804" if "forward compatibility was attempted" in said else "803"


# What a CUDA error inside NCCL usually means (the text cudaGetErrorString gives)
CUDA_HINTS: tuple[tuple[str, str], ...] = (
    (
        "initialization error",
        "the CUDA driver did not initialise in this process: a driver package updated "
        "under a running system (reboot or reload the nvidia module), or CUDA used in a parent before fork",
    ),
    ("unknown error", "the GPU or its driver is in a bad state: `dmesg | grep -i xid`, reset the GPU or reboot"),
    (
        "invalid resource handle",
        "a stream or event CUDA does not know in the current context: created on another device than the caller's "
        "current one (torch.cuda.set_device(local_rank) before the first collective), or already destroyed",
    ),
    (
        "operation not supported",
        "a CUDA feature NCCL uses is not available here: under a vGPU enable unified "
        "memory (UVM) in the VM's vGPU profile; elsewhere NCCL_CUMEM_ENABLE=0, or a driver new enough for the "
        "NCCL build",
    ),
    (
        "operation not permitted",
        "the process may not share GPU memory this way (cuMem fabric handles need "
        "IMEX channels on multi-node NVLink; containers may need CAP_SYS_PTRACE / --ipc=host): NCCL_CUMEM_ENABLE=0",
    ),
    (
        "invalid device ordinal",
        "a rank asked for a GPU it cannot see: CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES on ROCm), the launcher's "
        "GPUs per node or nccl-tests' -g exceed the GPUs this process has, or a container given none of them "
        "(--gpus; on ROCm the /dev/kfd and /dev/dri devices)",
    ),
    ("no CUDA-capable device", "this process sees no GPU: CUDA_VISIBLE_DEVICES, the container's --gpus"),
    (
        "illegal memory access",
        "a GPU kernel faulted: one of the program's kernels before NCCL's call (CUDA errors are sticky), a "
        "buffer freed or resized while NCCL used it, or a bug of the NCCL release (see the version); "
        "`dmesg | grep -i xid` shows whether the GPU reported a fault, CUDA_LAUNCH_BLOCKING=1 which kernel",
    ),
    ("launch failure", "a GPU kernel failed: `dmesg | grep -i xid`; reset the GPU if it repeats"),
    (
        "launch timed out",
        "a kernel ran past the display watchdog's limit: the GPU also drives a display (an X or Wayland "
        "session on it, or Windows/WSL's TDR); run on a GPU without a display or stop the display server on it",
    ),
    (
        "device-side assert",
        "a kernel of the program asserted before (an index out of range in an embedding, a loss or a gather, "
        "typically); NCCL's or torch's next CUDA call only reports it: rerun with CUDA_LAUNCH_BLOCKING=1 (torch: "
        "TORCH_USE_CUDA_DSA) to find the kernel; NCCL is not the cause",
    ),
    (
        "peer mapping resources exhausted",
        "one process maps more peer GPUs than CUDA allows one GPU to map (eight): run one process per GPU "
        "(nccl-tests: `mpirun -np N ... -g 1`, torchrun --nproc-per-node) or fewer GPUs per process",
    ),
    (
        "invalid argument",
        "CUDA refused NCCL's request at that call: in containers and VMs usually memory "
        "sharing between processes (try NCCL_CUMEM_ENABLE=0, --ipc=host); on NVSwitch hosts the Fabric Manager "
        "state (NCCL_NVLS_ENABLE=0 tells the two apart)",
    ),
    (
        "stub library",
        "the libcuda.so loaded is the CUDA toolkit's stub (its lib64/stubs directory on LD_LIBRARY_PATH or in "
        "ldconfig), made for linking and not the driver's: take the stubs directory off the library path so the "
        "driver's libcuda.so.1 is found (`ldconfig -p | grep libcuda`)",
    ),
    (
        "busy or unavailable",
        "CUDA 46: the GPU accepts no context from this process: its compute mode is exclusive-process and another "
        "process holds it (`nvidia-smi -q -d COMPUTE`, `nvidia-smi --query-compute-apps=pid,name --format=csv`), "
        "two ranks of the job share it, or it is prohibited or in a bad state",
    ),
)

# CUDA's stream-capture errors (cudaErrorStreamCapture*, cudaErrorCapturedEvent: "... during capture", "... in a
# capturing stream"): a CUDA graph's capture refused an operation, whichever call reports it
CAPTURE_CAUSES = (
    "an operation that capture does not allow inside the captured region: a synchronisation, an allocation, a "
    "host read of a GPU value (an assert on a result, .item()), a collective whose NCCL or communicator does not "
    "support capture",
    "another thread's CUDA work while a global-mode capture runs (a background thread, the NCCL watchdog polling "
    "its events, a second communicator's setup)",
    "an earlier error inside the capture ('a previous error during capture'): the first failed call is the cause, "
    "further up the log",
)
CAPTURE_COLLECT = (
    "the same run with CUDA graphs off (vLLM --enforce-eager, sglang --disable-cuda-graph, torch without "
    "torch.cuda.graph): a run that then works is capture's; the first CUDA error of the log, with NCCL_DEBUG=WARN"
)

# CUDA errors that state their cause whatever the call: the site's candidates do not apply
CUDA_STATES: tuple[str, ...] = (
    "launch timed out",
    "device-side assert",
    "invalid device ordinal",
    "no cuda-capable device",
    "peer mapping resources exhausted",
    "initialization error",
    "stub library",
    "busy or unavailable",
)


def cuda_text(f: Mapping[str, str]) -> str:
    """A CUDA error as a finding says it: its number where the line gave one, and CUDA's words (HIP's, for a HIP
    call RCCL named)."""
    num = f.get("num", "")
    runtime = "HIP" if f.get("call", "").startswith("hip") else "CUDA"
    return f"{runtime} error{f' {num}' if num else ''} '{f.get('msg', '')}'"
