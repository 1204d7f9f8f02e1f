"""The CUDA errors whose own words name their cause, whatever call raised them: the string cudaGetErrorString /
cuGetErrorString gives (CUDA's runtime and driver enums, cudaError_t / CUresult) and the event kind it reads as.
NCCL prints them in ``Cuda failure N 'string'``, nccl-tests in ``Test CUDA failure file:line 'string'``, torch in
``CUDA error: string`` and, at its first call, ``Unexpected error from cudaGetDeviceCount() ... Error N: string``;
every form reads the string. Errors whose meaning is the call's ('invalid argument', 'unknown error') are not
here: ``nccl.cuda_sites`` gives their call's candidates. Data only."""

from __future__ import annotations

import re

_COMPAT = "cuda-compat"
# (the error's words, the kind); the first that matches wins
CUDA_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    # 802 cudaErrorSystemNotReady: the Fabric Manager has not registered the GPUs (NVSwitch systems)
    (re.compile(r"system not yet initialized|\b802\b.*not.*initiali[sz]ed", re.I), "fabric-not-ready"),
    (re.compile(r"peer access is not supported", re.I), "p2p-unsupported"),  # 217
    # 35 cudaErrorInsufficientDriver; torch's "The NVIDIA driver on your system is too old"
    (re.compile(r"driver version is insufficient|driver on your system is too old", re.I), "cuda-driver"),
    # 803 cudaErrorSystemDriverMismatch, 804 cudaErrorCompatNotSupportedOnDevice: the libcuda loaded is not the
    # kernel driver's own, most often CUDA's forward-compatibility package (cuda-compat)
    (re.compile(r"unsupported display driver / cuda driver combination|forward compatibility was attempted"), _COMPAT),
    # 500 / 98 / 209: no code in the binary for this GPU's architecture
    (re.compile(r"named symbol not found|no kernel image is available|invalid device function", re.I), "kernel-image"),
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
