"""The one place that decides what an NVML or sysfs failure means.

``Nvml.ask`` turns an answer into ``Probed``: a value, ``Unsupported`` (NOT_SUPPORTED, a
function this driver or binding lacks) or ``ProbeError`` (anything else). Once a GPU
answers GPU_IS_LOST or RESET_REQUIRED it is marked gone and asked nothing more, so a GPU
that falls off the bus mid-scan costs one failed call, not hundreds of timeouts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from topodoctor.probe.api import GPU_GONE_CODES, UNSUPPORTED_CODES, NvmlApi, NvmlCallError
from topodoctor.probe.sysfs import Sysfs, os_error_name
from topodoctor.probed import Probed, ProbeError, Unsupported

T = TypeVar("T")


class Nvml:
    def __init__(self, api: NvmlApi) -> None:
        self.api = api
        self.lost: dict[str, ProbeError] = {}  # device token -> the error that lost it

    def ask(self, fn: str, *args: Any, convert: Callable[[Any], T] | None = None) -> Probed[T]:
        """Call ``fn``; map the answer to a value, Unsupported or ProbeError."""
        for a in args:
            if isinstance(a, str) and a in self.lost:
                return self.lost[a]
        try:
            raw = self.api.call(fn, *args)
        except NvmlCallError as exc:
            if exc.code in UNSUPPORTED_CODES:
                return Unsupported(exc.name)
            err = ProbeError(exc.name, fn, exc.code)
            if exc.code in GPU_GONE_CODES:
                for a in args:
                    if isinstance(a, str) and a.startswith("gpu:"):
                        self.lost.setdefault(a, err)
            return err
        if convert is None:
            return raw  # type: ignore[no-any-return]
        try:
            return convert(raw)
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            return ProbeError(f"UNEXPECTED_ANSWER: {type(exc).__name__}", fn)


def sys_read(fs: Sysfs, path: str, convert: Callable[[str], Probed[T]]) -> Probed[T]:
    """Read one sysfs file: absent means Unsupported, unreadable or unparsable means ProbeError."""
    try:
        text = fs.read(path)
    except FileNotFoundError:
        return Unsupported("ABSENT")
    except OSError as exc:
        return ProbeError(os_error_name(exc), f"read {path}")
    try:
        return convert(text)
    except (ValueError, IndexError) as exc:
        return ProbeError(f"UNPARSABLE: {exc}", f"read {path}")


def sys_list(fs: Sysfs, path: str) -> list[str]:
    """Directory entries, or [] when the directory does not exist or cannot be read."""
    try:
        return fs.listdir(path)
    except OSError:
        return []


def parse_cpulist(text: str) -> tuple[int, ...]:
    """Parse the kernel's CPU list format: "0-3,8,10-11"."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return tuple(cpus)


def format_cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """The inverse of parse_cpulist, as nvidia-smi prints affinity: "0-63" or "0-31,64-95"."""
    out: list[str] = []
    items = sorted(set(cpus))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)


def mask_words_to_ids(words: list[int], bits_per_word: int = 64) -> tuple[int, ...]:
    """NVML affinity masks come as an array of 64-bit words, lowest CPU in word 0 bit 0."""
    ids = []
    for w, word in enumerate(words):
        for bit in range(bits_per_word):
            if (int(word) >> bit) & 1:
                ids.append(w * bits_per_word + bit)
    return tuple(ids)


def normalize_bus_id(bus_id: str) -> str:
    """NVML says 00000000:18:00.0; sysfs says 0000:18:00.0. Keep sysfs's, lowercase."""
    bus_id = bus_id.strip().lower()
    domain, _, rest = bus_id.partition(":")
    if rest and len(domain) > 4:
        domain = domain[-4:]
    return f"{domain}:{rest}" if rest else bus_id
