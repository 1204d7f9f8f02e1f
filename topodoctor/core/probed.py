"""The three answers a probed field can hold: a value, "unsupported", or a probe failure.

A value that is missing because the hardware or driver does not offer it is normal and
quiet; a value that is missing because the query failed means a check could not run and
must say so. Keeping the two apart is the point of this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, Union

T = TypeVar("T")


@dataclass(frozen=True)
class Unsupported:
    """The driver or hardware does not offer this (NVML NOT_SUPPORTED, a sysfs file absent)."""

    reason: str = "NOT_SUPPORTED"

    def __str__(self) -> str:
        return "N/A"

    def __bool__(self) -> bool:
        raise TypeError("Unsupported has no truth value: test isinstance(..., Unsupported) or compare to a value")


@dataclass(frozen=True)
class ProbeError:
    """The query failed: GPU lost, no permission, binding mismatch, unreadable file.

    ``code`` is the NVML return code when NVML raised it, ``None`` for OS errors.
    """

    error: str
    call: str
    code: int | None = None

    def __str__(self) -> str:
        return f"ERR({self.error})"

    def __bool__(self) -> bool:
        # A failed read used as a condition would pass silently (an error object is truthy).
        raise TypeError("ProbeError has no truth value: test isinstance(..., ProbeError) or use `is not None`")


# NVML's GPU_IS_LOST and RESET_REQUIRED: after either, the GPU answers nothing else.
GPU_GONE_CODES = frozenset({15, 16})

Probed = Union[T, Unsupported, ProbeError]  # noqa: UP007  (a generic alias needs Union on 3.10)


def ok(value: object) -> bool:
    """True when ``value`` is a real value, not Unsupported nor ProbeError."""
    return not isinstance(value, (Unsupported, ProbeError))


def value_or(value: Probed[T], default: T) -> T:
    if isinstance(value, (Unsupported, ProbeError)):
        return default
    return value


def failed(value: object) -> bool:
    return isinstance(value, ProbeError)


def show(value: object, fmt: str = "{}") -> str:
    """Human text for a probed value: the value, N/A, or ERR(reason)."""
    if isinstance(value, (Unsupported, ProbeError)):
        return str(value)
    if value is None:
        return "-"
    return fmt.format(value)
