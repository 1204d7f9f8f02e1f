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

from topodoctor.model.nvml_codes import (
    BINDING_FAILED,
    BINDING_MISSING,
    CODES,
    NOT_RECORDED,
    UNSUPPORTED_CODES,
    code_name,
)

# NVML's names by return code (nvml.h), ours included: from the one table, model/nvml_codes.py.
NVML_ERRORS: dict[int, str] = {code: c.name for code, c in CODES.items()}

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

__all__ = [
    "BINDING_FAILED",
    "BINDING_MISSING",
    "NOT_RECORDED",
    "NVML_ERRORS",
    "UNSUPPORTED_CODES",
    "NvmlApi",
    "NvmlCallError",
]


def error_name(code: int) -> str:
    """NVML's name for a return code, as errors and recordings show it."""
    return code_name(code)


class NvmlCallError(Exception):
    """An NVML call returned an error code (or the binding failed to make the call)."""

    def __init__(self, code: int, detail: str = "") -> None:
        self.code = code
        self.name = error_name(code)
        self.detail = detail
        super().__init__(f"{self.name}{': ' + detail if detail else ''}")


class NvmlApi(Protocol):
    """The NVML boundary: the live binding, the recorder and the replay all answer ``call``."""

    def call(self, fn: str, *args: Any) -> Any:
        """Make one NVML call; return plain data or raise NvmlCallError."""
        ...
