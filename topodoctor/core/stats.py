"""The median, as every judge of a measurement takes it.

Python's ``statistics`` module would do, but importing it loads ``decimal``, ``fractions``,
``random`` and ``hashlib`` (11 modules) into every command that judges a figure, a prolog's
``check`` included; these two functions are all we use of it, with its semantics."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

N = TypeVar("N", int, float)


def median(values: Iterable[N]) -> N | float:
    """The middle value, or the mean of the two middle values (``statistics.median``)."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        raise ValueError("no median of no values")
    mid = n // 2
    return data[mid] if n % 2 else (data[mid - 1] + data[mid]) / 2


def median_high(values: Iterable[N]) -> N:
    """The middle value, or the larger of the two middle values (``statistics.median_high``)."""
    data = sorted(values)
    if not data:
        raise ValueError("no median of no values")
    return data[len(data) // 2]
