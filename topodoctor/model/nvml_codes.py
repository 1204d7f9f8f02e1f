"""What each NVML return code means to topodoctor: the one table that the probe (classifying every
answer) and the rules (telling a lost GPU from a refused question) read.

Three meanings: ``unsupported`` (the GPU or driver lacks the feature: normal, quiet),
``failure`` (the question could not be answered: whatever depends on it is not checked) and
``gpu_gone`` (the GPU answers nothing more until it is reset). Names are nvml.h's, without the
NVML_ERROR_ prefix; the hint says what a person does about it, where there is something to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Meaning = Literal["unsupported", "failure", "gpu_gone"]


@dataclass(frozen=True)
class NvmlCode:
    """One return code: its name, what it means here, and what to do about it."""

    name: str
    meaning: Meaning = "failure"
    hint: str = ""


# Codes of our own for failures on the Python side of the binding.
BINDING_MISSING = -1  # the installed nvidia-ml-py has no such function
BINDING_FAILED = -2  # the binding raised something other than NVMLError (a ctypes mismatch)
NOT_RECORDED = -3  # replay only: the recording was made before the probe asked this call

CODES: dict[int, NvmlCode] = {
    BINDING_MISSING: NvmlCode("BINDING_MISSING", "unsupported", "a newer nvidia-ml-py has this call"),
    BINDING_FAILED: NvmlCode("BINDING_FAILED", hint="nvidia-ml-py and the driver disagree on a structure"),
    NOT_RECORDED: NvmlCode("NOT_RECORDED", hint="an older recording: record the host again for this field"),
    1: NvmlCode("UNINITIALIZED"),
    2: NvmlCode("INVALID_ARGUMENT"),
    3: NvmlCode("NOT_SUPPORTED", "unsupported"),
    4: NvmlCode("NO_PERMISSION", hint="no permission to open the NVIDIA devices: run as root or check /dev/nvidia*"),
    5: NvmlCode("ALREADY_INITIALIZED"),
    6: NvmlCode("NOT_FOUND"),
    7: NvmlCode("INSUFFICIENT_SIZE"),
    8: NvmlCode("INSUFFICIENT_POWER", hint="a power cable of the GPU is not connected or its supply is failing"),
    9: NvmlCode("DRIVER_NOT_LOADED", hint="the NVIDIA kernel driver is not loaded"),
    10: NvmlCode("TIMEOUT"),
    11: NvmlCode("IRQ_ISSUE", hint="the kernel driver's interrupt handling failed: see the kernel log"),
    12: NvmlCode(
        "LIBRARY_NOT_FOUND",
        hint="no NVIDIA driver here: libnvidia-ml.so.1 not found",
    ),
    13: NvmlCode("FUNCTION_NOT_FOUND", "unsupported"),
    14: NvmlCode("CORRUPTED_INFOROM", hint="the GPU's InfoROM is corrupted: contact the vendor"),
    15: NvmlCode("GPU_IS_LOST", "gpu_gone", "the GPU fell off the bus: drain the node and reset or replace the GPU"),
    16: NvmlCode("RESET_REQUIRED", "gpu_gone", "the GPU needs a reset (nvidia-smi -r, or a reboot)"),
    17: NvmlCode("OPERATING_SYSTEM"),
    18: NvmlCode(
        "LIB_RM_VERSION_MISMATCH",
        hint="the NVML library and the loaded kernel driver differ in version: reload or reboot",
    ),
    19: NvmlCode("IN_USE"),
    20: NvmlCode("MEMORY"),
    21: NvmlCode("NO_DATA"),
    22: NvmlCode("VGPU_ECC_NOT_SUPPORTED"),
    23: NvmlCode("INSUFFICIENT_RESOURCES"),
    24: NvmlCode("FREQ_NOT_SUPPORTED"),
    25: NvmlCode("ARGUMENT_VERSION_MISMATCH", hint="nvidia-ml-py and the driver disagree on a structure's version"),
    26: NvmlCode("DEPRECATED"),
    27: NvmlCode("NOT_READY"),
    28: NvmlCode("GPU_NOT_FOUND"),
    29: NvmlCode("INVALID_STATE"),
    30: NvmlCode("RESET_TYPE_NOT_SUPPORTED"),
    999: NvmlCode("UNKNOWN"),
}

UNSUPPORTED_CODES = frozenset(c for c, v in CODES.items() if v.meaning == "unsupported")
GPU_GONE_CODES = frozenset(c for c, v in CODES.items() if v.meaning == "gpu_gone")


def code_name(code: int) -> str:
    """NVML's name for a return code (``ERROR_<n>`` for one this table does not know)."""
    known = CODES.get(code)
    return known.name if known is not None else f"ERROR_{code}"


def init_failure(name: str) -> str:
    """Why NVML did not start, as a person acts on it (the table's hint where it has one), in the
    same words whichever command asked."""
    known = next((c for c in CODES.values() if c.name == name), None)
    if known is not None and known.hint:
        return f"{known.hint} (nvmlInit: {name})"
    return f"NVML could not start (nvmlInit: {name})"
