"""The kernel's CPU list format ("0-3,8,10-11"), read and written, as sysfs and nvidia-smi use it."""

from __future__ import annotations


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
