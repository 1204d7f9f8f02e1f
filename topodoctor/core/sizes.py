"""Sizes, read and written one way by every command: ``64K``, ``256M``, ``1G`` (binary units, as
nccl-tests reads ``-b``/``-e``), ``KiB``/``MiB``/``GiB`` and ``KB``/``MB``/``GB`` meaning the same;
written back one way too, as ``core.text.human_size`` writes them (``256M``)."""

from __future__ import annotations

import re

from topodoctor.core.errors import InputError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
_UNITS = {"B": 1, "K": KiB, "KB": KiB, "KIB": KiB, "M": MiB, "MB": MiB, "MIB": MiB, "G": GiB, "GB": GiB, "GIB": GiB}
_SIZE = re.compile(r"^\s*(\d{1,20})\s*([A-Za-z]*)\s*$")  # 20 digits: past MAX_BYTES in any unit
# The largest buffer a size may ask for: more than any GPU's memory, where a copy or a collective also
# needs the buffer it receives into; past it the size is a typo (1000G for 100G), refused at once.
MAX_BYTES = 256 * GiB


def parse_size(text: str, bare: int = 1, limit: int | None = MAX_BYTES) -> int:
    """``8``, ``64K``, ``256M``, ``1GiB``: bytes; a number without a unit counts ``bare`` bytes
    (1: bytes, as nccl-tests reads them; ``MiB`` where an option has always taken MiB). Above ``limit``
    an input error (None: a size read from another tool's command line, held to no bound of ours)."""
    m = _SIZE.match(text)
    unit = m.group(2).upper() if m else ""
    if m is None and re.match(r"^\s*\d{21,}", text):
        raise InputError(f"size too large: {text[:24]!r}... (at most {MAX_BYTES // GiB}G)")
    if not m or (unit and unit not in _UNITS):
        raise InputError(f"not a size: {text!r} (use a number and K/M/G or KiB/MiB/GiB, e.g. 64K, 256M, 1G)")
    value = int(m.group(1)) * (_UNITS[unit] if unit else bare)
    if value <= 0:
        raise InputError(f"size must be positive: {text!r}")
    if limit is not None and value > limit:
        raise InputError(f"size too large: {text.strip()!r} (at most {limit // GiB}G, more than a GPU's memory holds)")
    return value


def parse_mib(text: str) -> int:
    """A size where a bare number has always meant MiB (``bandwidth --size 256``), in bytes."""
    return parse_size(text, MiB)


def parse_sizes(text: str, step_factor: int = 2) -> tuple[int, ...]:
    """``8:1G`` sweeps from 8 B to 1 GiB by ``step_factor``; ``64M,1G`` lists sizes; both mix."""
    if step_factor < 2:
        raise InputError("--step-factor must be at least 2")
    out: list[int] = []
    for part in text.split(","):
        if not part.strip():
            continue
        lo_s, colon, hi_s = part.partition(":")
        lo = parse_size(lo_s)
        if not colon:
            out.append(lo)
            continue
        hi = parse_size(hi_s)
        if hi < lo:
            raise InputError(f"size range {part!r} runs backwards")
        s = lo
        while s <= hi:
            out.append(s)
            s *= step_factor
    if not out:
        raise InputError(f"no sizes in {text!r}")
    return tuple(sorted(set(out)))
