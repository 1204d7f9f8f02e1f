"""The inputs a file-reading command is given, read once each: standard input (``-``), the files named, the files
of every directory named; a file named twice (or named and inside a directory named) read once, every read bounded
in size and by the command's deadline. What the bytes mean is the command's own: this gives them and whether the
user named the file (a named file that cannot be read is an error; a directory's file is passed over, said)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from topodoctor.core import fileio, stdio
from topodoctor.core.errors import InputError
from topodoctor.core.text import plural

STDIN = "-"


@dataclass(frozen=True)
class Kind:
    """How a command speaks of its inputs: ``label`` opens its errors (``diagnose``, ``NCCL logs``), ``noun`` is one
    input (``evidence file``) and ``folder`` a directory of them, ``suffixes`` the names a directory's files must end
    in (``""``: any), ``none_there`` what a directory without one is told."""

    label: str
    noun: str
    folder: str
    suffixes: str | tuple[str, ...] = ""
    none_there: str = "file"
    max_files: int = 4096
    max_bytes: int = 64 << 20


@dataclass(frozen=True)
class Input:
    """One input: its name as given (``-`` for standard input), its bytes, or ``why`` it was not read (a directory's
    file gone since it was listed), and whether the user named it."""

    name: str
    data: bytes = b""
    why: str = ""
    by_name: bool = True


def gather(paths: Sequence[str | Path], deadline: float, kind: Kind) -> Iterator[Input]:
    """Each input once, in the order given (a directory's files sorted). Past the deadline or ``kind.max_files``:
    ``InputError``; a named file that cannot be read: ``InputError`` (``fileio``'s one line)."""
    seen: set[str] = set()
    count = 0
    for given in paths:
        p = str(given)
        left = deadline - time.monotonic()
        if left <= 0:
            raise InputError(f"{kind.label}: not read within the --timeout ({plural(count, 'input')} read)")
        if p == STDIN:
            if STDIN not in seen:  # given twice: read once, as a file named twice is
                seen.add(STDIN)
                count += 1
                yield Input(STDIN, stdio.read_stdin(kind.noun, kind.max_bytes, left))
            continue
        by_name = not Path(p).is_dir()
        names = [p] if by_name else _listed(p, kind, left)
        for f in names:
            if (key := os.path.realpath(f)) in seen:
                continue
            seen.add(key)
            left = deadline - time.monotonic()
            if left <= 0 or count >= kind.max_files:
                raise InputError(f"{kind.label}: more than {plural(count, 'input')}, or not read within the --timeout")
            count += 1
            try:
                data = fileio.read_bytes(f, kind.noun, kind.max_bytes, left)
            except InputError as exc:
                if by_name:
                    raise
                named = fileio.shown(f)  # said as "PATH: why", as every input not read is
                yield Input(f, why=str(exc).replace(f": {named}", "").replace(f" {named}", ""), by_name=False)
                continue
            yield Input(f, data, by_name=by_name)


def _listed(directory: str, kind: Kind, left: float) -> list[str]:
    found = fileio.list_files(directory, kind.folder, kind.suffixes, kind.max_files, left)
    if not found:
        raise InputError(f"{kind.folder} {directory} holds no {kind.none_there}")
    return [str(f) for f in found]
