"""``nvidia-smi -q``: the sections that bear on a slow or failing run, per GPU: PCIe generation and
width (current and max), virtualization mode, the power limit in force and its default, the clocks
event reasons that are active (``Clocks Throttle Reasons`` before driver 535), volatile
uncorrectable ECC errors, row remapping, and the fabric state (NVSwitch systems). The layout is
indentation: a heading, then ``Key : Value`` lines under it, four spaces a level::

    GPU 00000000:00:06.0
        Product Name                          : NVIDIA H200
        PCI
            GPU Link Info
                PCIe Generation
                    Max                       : 5
"""

from __future__ import annotations

import re
from dataclasses import replace

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import GpuSeen

_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
_TOP = re.compile(r"^(?:=+NVSMI LOG=+|Driver Version\s+:|Timestamp\s+:|CUDA Version\s+:|Attached GPUs\s+:)")
_HEADING = re.compile(r"^\s+[A-Za-z][\w.()/-]*(?: [\w.()/-]+)*\s*$")  # words one space apart
_KV = re.compile(r"^(\s*)(\S.*?)\s*:\s*(.*)$")
_REASONS = re.compile(r"^\s*Clocks (?:Event|Throttle) Reasons\s*:?\s*$")
_GREP_GAP = "--"  # grep's line between the matches of two GPUs' sections


def starts(lines: list[str], i: int) -> bool:
    """Whether nvidia-smi -q begins at line ``i`` (its banner, a GPU heading with keys under it, or the
    clocks reasons section alone, as `grep -A8 'Clocks Throttle'` leaves it)."""
    if _TOP.match(lines[i]) and any(_GPU.match(x) or "NVSMI LOG" in x for x in lines[i : i + 12]):
        return True
    if _REASONS.match(lines[i]) and i + 1 < len(lines) and _KV.match(lines[i + 1]):
        return i == 0 or not lines[i - 1].startswith(" ") or not lines[i - 1].strip()
    return bool(_GPU.match(lines[i]) and i + 1 < len(lines) and lines[i + 1].startswith("    ") and ":" in lines[i + 1])


def read(lines: list[str], i: int, piece: int) -> Block:
    """Every GPU's section from line ``i`` on, with the driver and CUDA versions above them."""
    if _REASONS.match(lines[i]):
        return _reasons_alone(lines, i, piece)
    parts = Parts()
    j = i
    current: GpuSeen | None = None
    index = 0
    stack: list[tuple[int, str]] = []
    active: list[str] = []
    open_heading = ""  # a heading with nothing under it yet: where the paste ended, if it ends here
    ended: list[bool] = []  # per GPU: whether its section reached Processes, the last of every section
    while j < len(lines):
        line = lines[j]
        if not line.strip():
            j += 1
            continue
        if m := _GPU.match(line):
            if current is not None:
                parts.gpus.append(replace(current, clock_event_reasons=tuple(active)))
            bus = m.group(1).upper()
            current = GpuSeen(piece, index, bus_id=bus.zfill(16) if len(bus) < 16 else bus)
            index += 1
            stack, active = [], []
            ended.append(False)
            open_heading = line.strip()
            j += 1
            continue
        kv = _KV.match(line)
        if current is None:
            if kv and kv.group(2) == "Driver Version":
                parts.driver_version = kv.group(3).strip()
            elif kv and kv.group(2) == "CUDA Version":
                version = kv.group(3).strip()  # "Not Found" where no CUDA driver is installed (580+)
                parts.cuda_version = version if version[:1].isdigit() else ""
            elif not (_TOP.match(line) or kv or _top_heading(lines, j)):
                break
            j += 1
            continue
        if not line.startswith(" "):
            break  # the -q output ended: a line of something else at the margin
        indent = len(line) - len(line.lstrip())
        if kv is None and not _HEADING.match(line):
            break  # an indented line that is not -q's (the next tool's header)
        if kv and kv.group(3).strip():
            key, value = kv.group(2), kv.group(3).strip()
        else:  # a heading (a key with nothing after it, or no colon at all)
            key, value = (kv.group(2) if kv else line.strip().rstrip(":")), None
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = tuple(s for _, s in stack)
        open_heading = key if value is None else ""
        if key == "Processes" and not path:
            ended[-1] = True
        if value is None:
            stack.append((indent, key))
        else:
            current, on = _field(current, path, key, value)
            if on:
                active.append(key)
        j += 1
    if current is not None:
        parts.gpus.append(replace(current, clock_event_reasons=tuple(active)))
    cut = "" if parts.gpus else "no GPU section"
    if parts.gpus and open_heading:  # every section ends in a value: one ending in a heading was cut
        cut = f"the paste ends inside the section of GPU {parts.gpus[-1].bus_id} (at {open_heading!r})"
    elif parts.gpus and not ended[-1] and (any(ended) or parts.gpus[-1].name):
        # a whole -q names the product and ends each GPU with Processes (-d's filtered view names neither)
        cut = f"the paste ends inside the section of GPU {parts.gpus[-1].bus_id} (before its Processes line)"
    return Block("smi-query", i, j, parts, cut=cut)


def _top_heading(lines: list[str], j: int) -> bool:
    """Whether line ``j`` is a heading above the GPUs with keys under it (580's ``vGPU Driver Capability``)."""
    below = lines[j + 1] if j + 1 < len(lines) else ""
    return bool(_HEADING.match(" " + lines[j]) and below.startswith("    ") and _KV.match(below))


def _int(value: str) -> int | None:
    v = value.rstrip("x").strip()
    return int(v) if v.isdigit() else None


def _watts(value: str) -> float | None:
    """``250.00 W`` as 250.0; None for N/A and the like."""
    number = value.removesuffix("W").strip()
    try:
        return float(number)
    except ValueError:
        return None


def _field(gpu: GpuSeen, path: tuple[str, ...], key: str, value: str) -> tuple[GpuSeen, bool]:
    """The GPU with one ``Key : Value`` line applied, and whether it is an active clocks reason."""
    where = path[-1] if path else ""
    if key == "Product Name" and not path:
        return replace(gpu, name=value), False
    if key == "GPU UUID":
        return replace(gpu, uuid=value), False
    if key == "Minor Number" and value.isdigit() and not path:
        return gpu, False
    if where == "PCIe Generation" and key in ("Max", "Current"):
        got = replace(gpu, pcie_gen_max=_int(value)) if key == "Max" else replace(gpu, pcie_gen=_int(value))
        return got, False
    if where == "Link Width" and key in ("Max", "Current"):
        got = replace(gpu, pcie_width_max=_int(value)) if key == "Max" else replace(gpu, pcie_width=_int(value))
        return got, False
    if key.lower() == "virtualization mode":  # "Virtualization mode" before driver 450
        return replace(gpu, virtualization=value), False
    if path and path[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons") and value == "Active":
        return gpu, key != "Idle"
    uncorrectable = "Uncorrectable" in key or key.startswith("Double Bit") or key == "Total"
    if "Volatile" in path and uncorrectable and path[-1] != "Single Bit" and value.isdigit():
        return replace(gpu, ecc_uncorrected=(gpu.ecc_uncorrected or 0) + int(value)), False
    if where == "Remapped Rows" and key == "Pending":
        return replace(gpu, remapping_pending=value.lower() == "yes"), False
    if where == "Remapped Rows" and key == "Remapping Failure Occurred":
        return replace(gpu, remapping_failed=value.lower() == "yes"), False
    if where in ("GPU Power Readings", "Power Readings") and (watts := _watts(value)) is not None:
        # 535+: "GPU Power Readings" with Current Power Limit; before: "Power Readings" with Power Limit and
        # Enforced Power Limit (the one in force); Default Power Limit in both
        if key == "Default Power Limit":
            return replace(gpu, power_default_w=watts), False
        if key in ("Current Power Limit", "Enforced Power Limit") or (
            key == "Power Limit" and gpu.power_limit_w is None
        ):
            return replace(gpu, power_limit_w=watts), False
    if where == "Fabric" and key in ("State", "Status") and value != "N/A":
        both = f"{gpu.fabric_state} / {value}" if gpu.fabric_state else value
        return replace(gpu, fabric_state=both), False
    return gpu, False


def _reasons_alone(lines: list[str], i: int, piece: int) -> Block:
    """The clocks reasons sections without the GPU line above them (`grep -A8 'Clocks Throttle'`): one
    section is the host's GPU, its index unknown (taken as its one GPU); several cannot be tied to GPUs,
    and the cut says which reasons were active."""
    sections: list[list[str]] = []
    j = i
    while j < len(lines):
        line = lines[j]
        if _REASONS.match(line):
            sections.append([])
        elif line.strip() == _GREP_GAP or not line.strip():
            pass
        elif (kv := _KV.match(line)) and sections:
            if kv.group(3).strip() == "Active" and kv.group(2) != "Idle":
                sections[-1].append(kv.group(2))
        else:
            break
        j += 1
    parts = Parts()
    if len(sections) == 1:
        parts.gpus.append(GpuSeen(piece, 0, clock_event_reasons=tuple(sections[0])))
        cut = "the clocks reasons without their GPU line: a GPU of the host, its index unknown (taken as GPU0)"
    else:
        active = sorted({r for sec in sections for r in sec})
        cut = f"{len(sections)} clocks reasons sections without their GPU lines: not tied to GPUs"
        cut += f" (active: {', '.join(active)})" if active else " (none active)"
    return Block("smi-query", i, j, parts, cut=cut)
