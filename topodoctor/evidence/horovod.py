"""Horovod's account of its own build as people paste it (``horovodrun --check-build``)::

    Horovod v0.21.2:

    Available Frameworks:
        [X] PyTorch
    Available Controllers:
        [ ] MPI
        [X] Gloo
    Available Tensor Operations:
        [ ] NCCL
        [X] Gloo

Each section's names, with whether the build has them ([X]). Text in, plain data out.
"""

from __future__ import annotations

import re

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import HorovodBuild

_TITLE = re.compile(r"^\s*Horovod v(?P<v>\d+\.\d+\.\d+)\S*:\s*$")
_SECTION = re.compile(r"^\s*Available (?P<what>Frameworks|Controllers|Tensor Operations):\s*$")
_ITEM = re.compile(r"^\s*\[(?P<mark>[Xx ])\]\s+(?P<name>\S.*?)\s*$")
_GAP = 2  # blank lines a paste may leave between the sections


def starts(lines: list[str], i: int) -> bool:
    """The title line of Horovod's build account, with a section under it."""
    return bool(_TITLE.match(lines[i])) and any(_SECTION.match(ln) for ln in lines[i + 1 : i + 2 + _GAP])


def read(lines: list[str], i: int, piece: int) -> Block:
    """The build's sections, each name with whether it is built, up to the first line that is neither."""
    title = _TITLE.match(lines[i])
    assert title is not None
    found: dict[str, list[tuple[str, bool]]] = {}
    section = ""
    j, blank = i + 1, 0
    while j < len(lines) and blank <= _GAP:
        line = lines[j]
        if m := _SECTION.match(line):
            section, blank = m["what"], 0
            found.setdefault(section, [])
        elif section and (m := _ITEM.match(line)):
            found[section].append((m["name"], m["mark"] != " "))
            blank = 0
        elif not line.strip():
            blank += 1
        else:
            break
        j += 1
    while j > i + 1 and not lines[j - 1].strip():
        j -= 1  # the blank lines after the last section are not the build's
    build = HorovodBuild(
        piece,
        title["v"],
        tuple(found.get("Frameworks", ())),
        tuple(found.get("Controllers", ())),
        tuple(found.get("Tensor Operations", ())),
        i + 1,
    )
    return Block("horovod-build", i, j, Parts(horovod=[build]))
