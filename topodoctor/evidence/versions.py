"""A version stated on its own line, as people write it under a slow run: ``NCCL 2.29.7``,
``NCCL version: 2.29.7``, NCCL's own version string (``2.29.7+cuda12.8``), ``nccl-tests 2.18.2``,
PyTorch's ``torch.cuda.nccl.version()`` answer (``(2, 21, 5)``, on its line or the next) and pip's
``nvidia-nccl-cu12==2.21.5`` (or ``pip list``'s ``nvidia-nccl-cu12  2.21.5``). Only whole lines: a
version inside a sentence may be the one the poster compares with. Consecutive lines are one piece.
"""

from __future__ import annotations

import re

from topodoctor.evidence.lines import Block, Parts

_V = r"v?(\d+\.\d+\.\d+)"
_NCCL = re.compile(rf"^\s*(?:NCCL|nccl|libnccl)(?:\s+version)?\s*[:=]?\s*{_V}(?:[-+][\w.]+)?\s*$")
_STRING = re.compile(r"^\s*(\d+\.\d+\.\d+)\+cuda\s?\d+(?:\.\d+)?\s*$")  # NCCL's own "2.29.7+cuda12.8"
_PIP = re.compile(r"^\s*nvidia-nccl-cu\d+\s*(?:==|\s)\s*(\d+\.\d+\.\d+)\b")
_TORCH_CALL = re.compile(r"nccl\.version\(\)")
_TUPLE = re.compile(r"\((\d+),\s*(\d+),\s*(\d+)\)")
_TESTS = re.compile(rf"^\s*nccl-tests(?:\s+version)?\s*[:=]?\s*{_V}\s*$")
# vLLM's log of the library its PyNccl wrapper loaded: "INFO 07-20 17:27:20 pynccl.py:63] vLLM is using nccl==2.21.5"
_VLLM = re.compile(r"^[^\]]{0,200}\] vLLM is using nccl==(\d+\.\d+\.\d+)\s*$")


def _nccl(lines: list[str], i: int) -> tuple[str, int] | None:
    """(the NCCL version, lines taken) stated at line ``i``."""
    line = lines[i]
    for rx in (_NCCL, _STRING, _PIP, _VLLM):
        if m := rx.match(line):
            return m.group(1), 1
    if _TORCH_CALL.search(line):
        if t := _TUPLE.search(line.split("nccl.version()", 1)[1]):
            return ".".join(t.groups()), 1
        if i + 1 < len(lines) and (t := _TUPLE.fullmatch(lines[i + 1].strip())):
            return ".".join(t.groups()), 2
    return None


def starts(lines: list[str], i: int) -> bool:
    """Whether a version line begins at line ``i``."""
    return _nccl(lines, i) is not None or bool(_TESTS.match(lines[i]))


def read(lines: list[str], i: int, piece: int) -> Block:
    """The version lines from ``i`` on; the first NCCL version stated is the run's."""
    parts = Parts()
    tool = ""
    j = i
    while j < len(lines):
        if (got := _nccl(lines, j)) is not None:
            parts.nccl_version = parts.nccl_version or got[0]
            j += got[1]
        elif m := _TESTS.match(lines[j]):
            tool = tool or f"nccl-tests {m.group(1)}"
            j += 1
        else:
            break
    version = " ".join(x for x in (f"NCCL {parts.nccl_version}" if parts.nccl_version else "", tool) if x)
    return Block("version-line", i, j, parts, version=version)
