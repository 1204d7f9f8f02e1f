"""A latency the reporter's sentences state ("the 2 GPU latency with symmetric memory is around 9µs"): a small
collective's time in microseconds, which its launch and NCCL's protocol set, not a bandwidth. Words in, a number
out; no I/O."""

from __future__ import annotations

import re

# a time in microseconds in a sentence that speaks of latency (a figure of a small message's collective)
_LATENCY = re.compile(r"\blatenc(?:y|ies)\b", re.I)
_MICROSECONDS = re.compile(r"(?<![\w.])(\d{1,5}(?:\.\d+)?)\s*(?:µs|μs|us|usec|microseconds?)\b", re.I)


def latency_of(text: str) -> float | None:
    """The largest latency the text states, in microseconds (a post sets what it got against what it expected, and
    asks about the larger); None where it speaks of none."""
    if not _LATENCY.search(text):
        return None
    return max((float(m.group(1)) for m in _MICROSECONDS.finditer(text)), default=None)
