"""The boundary between the probe and NVML.

The probe talks to NVML only through ``NvmlApi.call(name, *args)``: arguments are plain
values (ints, lists of ints, and device tokens such as ``"gpu:3"`` that stand for NVML
handles) and results are plain JSON data. Three implementations sit behind it: the live
binding over pynvml (``probe/nvml.py``), the recorder that wraps it, and the replay fake
that answers from a recording. Because the boundary is plain data, a recording is exactly
what the probe saw, errors included, and replay runs the very same probe code.
"""

from __future__ import annotations

from typing import Any, Protocol

# Return codes from nvml.h; the names are NVML's own, without the NVML_ERROR_ prefix.
NVML_ERRORS: dict[int, str] = {
    1: "UNINITIALIZED",
    2: "INVALID_ARGUMENT",
    3: "NOT_SUPPORTED",
    4: "NO_PERMISSION",
    5: "ALREADY_INITIALIZED",
    6: "NOT_FOUND",
    7: "INSUFFICIENT_SIZE",
    8: "INSUFFICIENT_POWER",
    9: "DRIVER_NOT_LOADED",
    10: "TIMEOUT",
    11: "IRQ_ISSUE",
    12: "LIBRARY_NOT_FOUND",
    13: "FUNCTION_NOT_FOUND",
    14: "CORRUPTED_INFOROM",
    15: "GPU_IS_LOST",
    16: "RESET_REQUIRED",
    17: "OPERATING_SYSTEM",
    18: "LIB_RM_VERSION_MISMATCH",
    19: "IN_USE",
    20: "MEMORY",
    21: "NO_DATA",
    22: "VGPU_ECC_NOT_SUPPORTED",
    23: "INSUFFICIENT_RESOURCES",
    24: "FREQ_NOT_SUPPORTED",
    25: "ARGUMENT_VERSION_MISMATCH",
    26: "DEPRECATED",
    27: "NOT_READY",
    28: "GPU_NOT_FOUND",
    29: "INVALID_STATE",
    30: "RESET_TYPE_NOT_SUPPORTED",
    999: "UNKNOWN",
}
# Codes of our own for failures on the Python side of the binding.
BINDING_MISSING = -1  # the installed nvidia-ml-py has no such function
BINDING_FAILED = -2  # the binding raised something other than NVMLError (a ctypes mismatch)
# Replay only: the recording was made before the probe asked this call (an older topodoctor).
NOT_RECORDED = -3
NVML_ERRORS[BINDING_MISSING] = "BINDING_MISSING"
NVML_ERRORS[BINDING_FAILED] = "BINDING_FAILED"
NVML_ERRORS[NOT_RECORDED] = "NOT_RECORDED"

SUCCESS = 0
NOT_SUPPORTED = 3
INVALID_ARGUMENT = 2
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
RESET_REQUIRED = 16
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
LIB_RM_VERSION_MISMATCH = 18
NO_PERMISSION = 4

# Answers that mean "this GPU or driver does not have the feature", which is normal.
UNSUPPORTED_CODES = frozenset({NOT_SUPPORTED, FUNCTION_NOT_FOUND, BINDING_MISSING})


def error_name(code: int) -> str:
    return NVML_ERRORS.get(code, f"ERROR_{code}")


class NvmlCallError(Exception):
    """An NVML call returned an error code (or the binding failed to make the call)."""

    def __init__(self, code: int, detail: str = "") -> None:
        self.code = code
        self.name = error_name(code)
        super().__init__(f"{self.name}{': ' + detail if detail else ''}")


class NvmlApi(Protocol):
    def call(self, fn: str, *args: Any) -> Any:
        """Make one NVML call; return plain data or raise NvmlCallError."""
        ...


def gpu_token(index: int) -> str:
    return f"gpu:{index}"
