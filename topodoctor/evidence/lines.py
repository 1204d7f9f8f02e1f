"""What every reader shares: the pasted text as clean lines, and what a reader found in them.

A paste carries what the terminal and the launcher added: ANSI escapes (nvidia-smi underlines its
headers on a terminal), carriage returns, and a per-rank tag in front of every line (Open MPI's
``--tag-output`` ``[1,0]<stdout>:``, Slurm's ``srun -l`` ``0: ``), and a markdown quote (``> ``). They
are taken off once, here, so
that each reader sees the tool's own text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from topodoctor.model.collectives import NcclAccount
from topodoctor.model.evidence import (
    CollectiveRun,
    CopyMatrix,
    EvidenceSetting,
    GpuSeen,
    HorovodBuild,
    Kind,
    Launch,
    NcclLine,
    NcclSaid,
    NicSeen,
    OsuRun,
    PairSeen,
    PcieSeen,
    SweepPair,
    XidSeen,
)
from topodoctor.model.evidence_prose import ProseSaid
from topodoctor.model.nccl_account import NcclGraphSeen

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_BARE_SGR = re.compile(r"(?<![\w\]\[])\[[0-9;]{1,5}m")  # the same escapes, their ESC lost in a copy: "[4mGPU0"
_QUOTE = re.compile(r"^> ?")  # a paste quoted in markdown (or a shell's continuation prompt)
_TAG = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d{1,5}: (?=\S|\s+\S))")
# "  12  text", "12: text", "12| text": a number, then a colon, a bar or spaces (a blank numbered line too)
_NUMBERED = re.compile(r"^\s*(\d{1,6})(?::\s?|\|\s?|\t|\s{1,8}|$)")
_FIGURES = re.compile(r"^[\s\d.eE+-]*$")
MIN_NUMBERED = 3  # fewer lines than this are too few to tell numbering from content
MAX_LINES = 400_000  # a long job's INFO log; beyond, the rest is cut and said so


def clean(text: str) -> list[str]:
    """The text as lines without escapes, carriage returns, an editor's line numbers or launcher tags
    (tabs kept)."""
    out = []
    for raw in _unnumbered(text.splitlines()[:MAX_LINES]):
        line = _QUOTE.sub("", _BARE_SGR.sub("", _ANSI.sub("", raw)).replace("\r", "").rstrip(), count=1)
        out.append(_TAG.sub("", line, count=1))
    return out


def _unnumbered(lines: list[str]) -> list[str]:
    """The lines without the numbers an editor or a pager (`cat -n`, `nl`, a gist's view) put in front of
    each: taken off only where every non-blank line has one and they count up by one from 1 or more, so
    a table's own first column (sizes, a matrix's row numbers from 0) is never taken for them."""
    found = [(k, _NUMBERED.match(ln)) for k, ln in enumerate(lines) if ln.strip()]
    if len(found) < MIN_NUMBERED or any(m is None for _, m in found):
        return lines
    numbers = [int(m.group(1)) for _, m in found if m is not None]
    first = numbers[0]
    if first < 1 or any(n != first + k - found[0][0] for (k, _), n in zip(found, numbers, strict=True)):
        return lines
    out = [_NUMBERED.sub("", ln, count=1) if ln.strip() else ln for ln in lines]
    if all(_FIGURES.match(ln) for ln in out if ln.strip()):
        return lines  # rows of figures from the middle of a matrix: their first column is the row's GPU
    return out


@dataclass
class Parts:
    """What one piece showed, before it is joined into ``Evidence`` (each part names its piece)."""

    gpus: list[GpuSeen] = field(default_factory=list)
    pairs: list[PairSeen] = field(default_factory=list)
    nics: list[NicSeen] = field(default_factory=list)
    copies: list[CopyMatrix] = field(default_factory=list)
    collectives: list[CollectiveRun] = field(default_factory=list)
    pcie: list[PcieSeen] = field(default_factory=list)
    xids: list[XidSeen] = field(default_factory=list)
    settings: list[EvidenceSetting] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    graphs: list[NcclGraphSeen] = field(default_factory=list)
    nccl: NcclAccount | None = None
    nccl_lines: list[NcclLine] = field(default_factory=list)
    sweeps: list[SweepPair] = field(default_factory=list)
    osu: list[OsuRun] = field(default_factory=list)
    horovod: list[HorovodBuild] = field(default_factory=list)
    prose: list[ProseSaid] = field(default_factory=list)
    nccl_said: list[NcclSaid] = field(default_factory=list)
    driver_version: str = ""
    cuda_version: str = ""
    nccl_version: str = ""


@dataclass
class Block:
    """One piece a reader read: its kind, the lines it took (``start`` inclusive, ``end`` exclusive,
    0-based), the tool's version where printed, what was cut, and the parts."""

    kind: Kind
    start: int
    end: int
    parts: Parts
    version: str = ""
    cut: str = ""
    lines: tuple[int, ...] = ()  # a kind spread among other lines (an NCCL log): the lines it took


def number(text: str) -> float | None:
    """A printed figure, or None where the tool printed N/A, a dash or nothing."""
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def cells(line: str) -> list[str]:
    """A table row's cells: split on tabs where the tool wrote tabs, else on runs of spaces (a paste
    that turned tabs into spaces)."""
    if "\t" in line:
        return [c.strip() for c in line.split("\t") if c.strip()]
    return line.split()
