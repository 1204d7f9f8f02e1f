"""Reading what a job left behind: bounded in size and time like every input, one bad file
one line (a note in the report), never the end of the analysis."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from pathlib import Path

from topodoctor.core import fileio
from topodoctor.core.errors import InputError
from topodoctor.fleet.inputs import read_results as fleet_read
from topodoctor.fleet.rollup import NodeResult
from topodoctor.job import dumps as fr
from topodoctor.job import placement, ras

MAX_MAP_BYTES = 16 * fileio.MiB
MAX_RAS_BYTES = 16 * fileio.MiB


def _dump_files(paths: Iterable[str | Path], timeout_s: float) -> tuple[list[Path], list[str]]:
    files: list[Path] = []
    notes: list[str] = []
    for p in paths:
        path = Path(p)
        try:
            if path.is_dir():
                found = fileio.list_files(path, "dump directory", "", max_files=100_000, timeout_s=timeout_s)
                files.extend(f for f in found if fr.rank_from_name(f.name) is not None)
            else:
                files.append(path)
        except InputError as exc:
            notes.append(str(exc))
        except OSError as exc:
            notes.append(f"cannot read {path}: {exc.strerror or type(exc).__name__}")
    return list(dict.fromkeys(files)), notes


def read_dumps(paths: Iterable[str | Path], budget_s: float = 60.0) -> tuple[tuple[fr.RankDump, ...], tuple[str, ...]]:
    """Flight-recorder dumps from files and directories (files named ``<prefix><rank>``);
    unreadable ones and a second dump of one rank become notes."""
    deadline = time.monotonic() + budget_s
    files, notes = _dump_files(paths, min(budget_s, fileio.DEFAULT_TIMEOUT_S))
    out: dict[int, fr.RankDump] = {}
    for path in files:
        left = deadline - time.monotonic()
        if left <= 0:
            notes.append(f"{path}: not read, the {budget_s:g} s budget for reading was spent")
            continue
        try:
            data = fileio.read_bytes(path, "flight-recorder dump", fr.MAX_DUMP_BYTES, min(left, 30.0))
            written = None
            with contextlib.suppress(OSError):
                written = os.stat(path).st_mtime_ns
            d = fr.parse_dump(data, str(path), written_ns=written)
        except InputError as exc:
            notes.append(str(exc))
            continue
        if d.rank in out:
            notes.append(f"{path}: a second dump of rank {d.rank} (kept {out[d.rank].source})")
            continue
        out[d.rank] = d
    return tuple(out[r] for r in sorted(out)), tuple(notes)


def read_map(path: str | Path) -> tuple[placement.Place, ...]:
    """A rank map: the line form, its JSON form, or a collectives result."""
    text = fileio.read_text(path, "rank map", MAX_MAP_BYTES)
    if text.lstrip().startswith(("{", "[")):
        return placement.parse_json(fileio.parse_json(text, f"rank map {path}"), f"rank map {path}")
    return placement.parse_text(text, f"rank map {path}")


def read_results(paths: Iterable[str | Path], budget_s: float = 60.0) -> tuple[tuple[NodeResult, ...], tuple[str, ...]]:
    """The nodes' topodoctor results, read as the fleet reads them."""
    nodes, bad = fleet_read(paths, "host", budget_s)
    return tuple(nodes), tuple(u.error for u in bad)


def read_ras(path: str | Path) -> ras.RasReport:
    """A saved RAS answer (text or JSON)."""
    text = fileio.read_text(path, "RAS output", MAX_RAS_BYTES)
    return ras.parse(text, f"RAS output {path}")
