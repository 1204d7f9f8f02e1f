"""nvidia-smi's short outputs: ``-L``, ``nvlink -s`` / ``--status``, ``nvlink -e`` (they share the
``GPU 0: NAME (UUID: GPU-...)`` line, told apart by the lines under it), and plain ``nvidia-smi``
(the boxed table with the driver and CUDA versions)::

    GPU 0: NVIDIA H200 (UUID: GPU-...)
    \t Link 0: 26.562 GB/s            (nvlink -s; an idle link: "Link 3: <inactive>")
    \t Link 0: Replay Errors: 0       (nvlink -e)
    | NVIDIA-SMI 580.159.04    Driver Version: 580.159.04     CUDA Version: 13.0     |
    |   0  NVIDIA H200      On  |   00000000:00:06.0 Off |                    0 |
"""

from __future__ import annotations

import re

from topodoctor.evidence.lines import Block, Parts, number
from topodoctor.model.evidence import GpuSeen, Kind

_GPU = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")
_LINK = re.compile(r"^\s*Link (\d+): (.*)$")
_MIG = re.compile(r"^\s+MIG \S+\s+Device\s+\d+:")  # -L's MIG devices under their GPU: read past
_CAPABILITY = re.compile(r"^\s*Link \d+(?:, |: Remote Device )")  # nvlink -c and -R: read past, not kept
_ELIDED = re.compile(r"^\s*(?:\.{3,}|…)\s*$")  # "..." where the poster left lines out
_RATE = re.compile(r"([\d.]+) GB/s")
_ERRORS = re.compile(r"^(.*?Errors?|.*?[Cc]ounter\w*)\s*:\s*(\d+)")
_BANNER = re.compile(r"NVIDIA-SMI (\S+)\s+Driver Version: (\S+)(?:\s+CUDA Version: (\S+))?")
_ROW = re.compile(r"^\|\s+(\d+)\s+(.+?)\s{2,}(?:On|Off)\s+\|\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)")


def starts_gpu_list(lines: list[str], i: int) -> bool:
    """Whether ``-L`` or an ``nvlink`` listing begins at line ``i``."""
    return bool(_GPU.match(lines[i]))


def read_gpu_list(lines: list[str], i: int, piece: int) -> Block:
    """``-L``, ``nvlink -s`` or ``nvlink -e`` from line ``i``: each GPU and its links' lines."""
    j = i
    kind: Kind = "smi-list"
    gpus: list[GpuSeen] = []
    while j < len(lines):
        m = _GPU.match(lines[j])
        if m is None:
            break
        j += 1
        up = listed = 0
        rates: list[float] = []
        errors: dict[str, int] = {}
        while j < len(lines) and (
            _LINK.match(lines[j]) or _CAPABILITY.match(lines[j]) or _MIG.match(lines[j]) or not lines[j].strip()
        ):
            if not lines[j].strip() or _CAPABILITY.match(lines[j]) or _MIG.match(lines[j]):
                j += 1
                continue
            lm = _LINK.match(lines[j])
            assert lm is not None
            detail = lm.group(2)
            if em := _ERRORS.match(detail):
                kind = "nvlink-errors"
                errors[em.group(1).strip()] = errors.get(em.group(1).strip(), 0) + int(em.group(2))
            else:
                kind = "nvlink-status"
                listed += 1
                if rm := _RATE.search(detail):
                    up += 1
                    rates.append(float(rm.group(1)))
            j += 1
        gpus.append(
            GpuSeen(
                piece,
                int(m.group(1)),
                name=m.group(2).strip(),
                uuid=(m.group(3) or "").strip(),
                nvlinks_up=up if kind == "nvlink-status" else None,
                nvlinks_listed=listed if kind == "nvlink-status" else None,
                nvlink_gbps=min(rates) if rates else None,
                nvlink_errors=errors,
            )
        )
    # -L has no link lines: a listing whose GPUs all lack them stays smi-list
    parts = Parts(gpus=gpus)
    while j > i + 1 and not lines[j - 1].strip():
        j -= 1
    cut = ""
    listed_by = [g.nvlinks_listed for g in gpus if g.nvlinks_listed is not None]
    last = gpus[-1]
    # nvidia-smi lists every link of every GPU, up or not: a last GPU with fewer is a listing the paste ended
    short = kind == "nvlink-status" and len(listed_by) > 1 and listed_by[-1] < max(listed_by[:-1])
    if j < len(lines) and _ELIDED.match(lines[j]):
        cut = f"the paste leaves lines out after GPU {last.index} ({lines[j].strip()})"
        j += 1
    if short:
        shown = f"GPU {last.index} lists {listed_by[-1]} of the {max(listed_by[:-1])} links the others list"
        cut = "; ".join(x for x in (shown, cut) if x)
    return Block(kind, i, j, parts, cut=cut)


def starts_summary(lines: list[str], i: int) -> bool:
    """Whether plain ``nvidia-smi``'s table begins at line ``i``: its banner line, or (a paste that
    left out the banner) a GPU's row."""
    return bool(_BANNER.search(lines[i]) or _ROW.match(lines[i]))


def read_summary(lines: list[str], i: int, piece: int) -> Block:
    """The driver and CUDA versions, and each GPU's index, name and bus id."""
    m = _BANNER.search(lines[i])
    parts = Parts(driver_version=m.group(2), cuda_version=m.group(3) or "") if m else Parts()
    j = i + 1 if m else i
    while j < len(lines) and lines[j].lstrip().startswith(("|", "+")):
        if rm := _ROW.match(lines[j]):
            name = re.sub(r"\s*\.\.\.$", "", rm.group(2).strip())  # a name too long for its box ends in "..."
            parts.gpus.append(GpuSeen(piece, int(rm.group(1)), name=name, bus_id=_bus(rm.group(3))))
        j += 1
    cut = "" if parts.gpus else "no GPU row"
    if parts.gpus and not lines[j - 1].lstrip().startswith("+"):  # each GPU's rows end in a +---+ line
        first = re.match(r"^\|\s+(\d+)\s", lines[j - 1])  # the first row of a GPU, cut before its bus id
        index = int(first.group(1)) if first and not _ROW.match(lines[j - 1]) else parts.gpus[-1].index
        cut = f"the table ends inside the rows of GPU {index}"
    if m is None:
        cut = "; ".join(x for x in ("the paste starts below the banner (no driver or CUDA version)", cut) if x)
    start = i - 1 if m and i and lines[i - 1].startswith("+") else i
    return Block("smi-summary", start, j, parts, m.group(1) if m else "", cut)


def _bus(text: str) -> str:
    """A bus id as nvidia-smi -q prints it (8-digit domain, upper case)."""
    domain, _, rest = text.upper().partition(":")
    return f"{domain.zfill(8)}:{rest}"


def rate(text: str) -> float | None:
    """``26.562 GB/s`` -> 26.562."""
    m = _RATE.search(text)
    return number(m.group(1)) if m else None
