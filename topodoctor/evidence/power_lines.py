"""A GPU's power limit stated against its default, wherever a line of the paste says both: the form
that reports of a rig print (``Power: limit=250.00 W (default=370.00 W, max=390.00 W)``) and the
sentences that say it (``power limit 250 W (default 370 W)``, ``power limit set to 250W, default is
350W``). nvidia-smi -q's own Power Readings section is read by smi_query.py; ``nvidia-smi``'s table
shows the limit (``Pwr:Usage/Cap``) without the default, which alone says nothing.

The GPU a line speaks of is the nearest ``GPU N`` named on it or on the lines just above; else the
lines count the GPUs in their order."""

from __future__ import annotations

import re

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import GpuSeen

MAX_LINE = 1000  # a report's line is short; a longer one is not this
_WATTS = r"(\d{1,4}(?:\.\d{1,2})?) ?W\b"
# the limit, then its default within the same clause ("limit=250.00 W (default=370.00 W")
_LIMIT = re.compile(
    r"power\W{0,6}(?:[a-z]+\W{1,3}){0,3}?limit\w*\W{0,3}(?:(?:is|of|at|to|set to|=|:)\s*)?" + _WATTS
    + r"[^.;\n]{0,40}?\bdefault\w*\W{0,3}(?:(?:is|of|=|:)\s*)?" + _WATTS,
    re.I,
)  # fmt: skip
_GPU = re.compile(r"\bGPU ?#?(\d{1,3})\b")
# the GPU's name on the line that names it ("- **GPU 0:** NVIDIA GeForce RTX 3090 | 24576 MiB | driver ...")
_NAME = re.compile(r"\bGPU ?#?\d{1,3}\b\W{0,6}((?:NVIDIA|Tesla|GeForce|Quadro)\b[^|(,;\n]*[\w)])")
_LOOK_BACK = 3  # lines above a limit that may name its GPU ("- **GPU 0:** ..." then "  - **Power:** ...")


def power_lines(lines: list[str]) -> list[int]:
    """The lines that state a power limit with its default."""
    return [k for k, ln in enumerate(lines) if len(ln) <= MAX_LINE and "default" in ln.lower() and _LIMIT.search(ln)]


def read_power(lines: list[str], taken: list[int], piece: int) -> Block:
    """Each stated limit as the GPU's ``power_limit_w`` beside its ``power_default_w``."""
    parts = Parts()
    for n, k in enumerate(taken):
        m = _LIMIT.search(lines[k])
        if m is None:
            continue
        above = range(k, max(-1, k - _LOOK_BACK - 1), -1)
        named = [g for j in above for g in _GPU.findall(lines[j])]
        index = int(named[0]) if named else n
        name = next((nm.group(1).strip() for j in above if (nm := _NAME.search(lines[j]))), "")
        parts.gpus.append(GpuSeen(piece, index, name=name, power_limit_w=float(m.group(1)),
                                  power_default_w=float(m.group(2))))  # fmt: skip
    return Block("gpu-power", taken[0], taken[-1] + 1, parts, lines=tuple(taken))
