"""The OSU micro-benchmarks' bandwidth tests as people paste them (osu_bw, osu_bibw; the CUDA build's header says
where each buffer was)::

    # OSU MPI-CUDA Bandwidth Test v5.6.1
    # Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)
    # Size      Bandwidth (MB/s)
    1                       0.73
    4194304              6098.41

Where the header does not say (the host-only build), the command line above it may (``osu_bw D D``); a paste's
``[...]`` between rows is skipped. Text in, plain data out.
"""

from __future__ import annotations

import re

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import OsuRun

_TITLE = re.compile(r"^\s*#\s*OSU (?:MPI|OpenSHMEM|UPC\+*|NCCL)[\w-]* (Bi-Directional )?Bandwidth Test\b", re.I)
_BUFFERS = re.compile(r"Send Buffer on (DEVICE|HOST|MANAGED)\b.*Receive Buffer on (DEVICE|HOST|MANAGED)\b", re.I)
_HEAD = re.compile(r"^\s*#\s*Size\s+Bandwidth \(MB/s\)", re.I)
_ROW = re.compile(r"^\s*(\d+)\s+(\d+(?:\.\d+)?)\s*$")
_COMMAND = re.compile(r"\bosu_(?:bi)?bw\b\s+(?:-\S+\s+(?:\S+\s+)?)*?([DHM])\s+([DHM])\b")
_SKIP = re.compile(r"^\s*(?:#|\[\.\.\.\]|\.\.\.|$)")  # the header's other lines, a paste's elision, blank lines
_WHERE = {"d": "device", "h": "host", "m": "device", "device": "device", "host": "host", "managed": "device"}
_LOOK_BACK = 3  # the lines above the title read for the command that ran it


def starts(lines: list[str], i: int) -> bool:
    """The title line of an OSU bandwidth test."""
    return bool(_TITLE.match(lines[i]))


def read(lines: list[str], i: int, piece: int) -> Block:
    """One run: its buffers, and every row of size and MB/s up to the first line that is neither."""
    title = _TITLE.match(lines[i])
    assert title is not None
    send = recv = ""
    for back in range(i - 1, max(-1, i - 1 - _LOOK_BACK), -1):  # "$ mpirun ... ./osu_bw D H" above the title
        if m := _COMMAND.search(lines[back]):
            send, recv = _WHERE[m.group(1).lower()], _WHERE[m.group(2).lower()]
            break
    j, rows, head = i + 1, [], False
    while j < len(lines):
        line = lines[j]
        if m := _BUFFERS.search(line):
            send, recv = _WHERE[m.group(1).lower()], _WHERE[m.group(2).lower()]
        elif _HEAD.match(line):
            head = True
        elif head and (row := _ROW.match(line)):
            rows.append((int(row.group(1)), float(row.group(2))))
        elif not _SKIP.match(line) or (rows and line.lstrip().startswith("#")):
            break  # another tool's line, or the next run's header
        j += 1
    test = "bibw" if title.group(1) else "bw"
    run = OsuRun(piece, test, send, recv, tuple(rows), i + 1)
    return Block("osu-bandwidth", i, j, Parts(osu=[run]))
