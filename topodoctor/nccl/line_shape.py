"""One shape of the words a launcher, the job or a layer under NCCL prints, and what reading it settles: the row
of ``nccl.launcher_lines``' table (and of ``nccl.layer_lines``' part of it). Data only."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class LauncherLine:
    """One shape: the event kind it reads as and what its words settle (``what``: a short phrase)."""

    kind: str
    pattern: re.Pattern[str]
    what: str
    # read only in a distributed run (NCCL's lines, torch's rank prefix): words any program may print
    needs_run: bool = False
