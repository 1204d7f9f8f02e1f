"""`diagnose` as the service runs it: what users bring (files, directories, standard input) read,
bounded, into ``Evidence`` by the readers (``evidence/``), and judged (``diagnosis.evidence``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from topodoctor.core import decode, inputs
from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.guarded import bounded
from topodoctor.core.text import plural
from topodoctor.diagnosis.evidence import judge
from topodoctor.evidence.inputs import KINDS_READ, Read, context_only, join, read_input
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding, Severity
from topodoctor.model.outcome import CommandOutcome

MAX_FILE_BYTES = 64 << 20  # a long job's stderr at INFO; more is refused, one line
MAX_FILES = 4096
_KIND = inputs.Kind("diagnose", "evidence file", "evidence directory", max_files=MAX_FILES, max_bytes=MAX_FILE_BYTES)


@dataclass(frozen=True)
class DiagnoseOutcome(CommandOutcome):
    """``diagnose``'s answer: what was read, and what it says."""

    evidence: Evidence
    findings: tuple[Finding, ...]
    fail_level: Severity = "error"
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()


def diagnose(paths: Sequence[str | Path], budget: Budget, fail_level: Severity = "error") -> DiagnoseOutcome:
    """Every input read and joined, then judged. No input of a kind it reads: ``InputError`` (exit 2)
    naming what it reads."""
    if not paths:
        raise InputError(f"diagnose: no input given (it reads {KINDS_READ})")
    deadline = budget.deadline if budget.limited else time.monotonic() + 3600.0
    texts = _texts([str(p) for p in paths], deadline)
    size = sum(len(t.text) for t, _ in texts)
    # the readers' work is bounded by the same --timeout as the reads: a 64 MiB log takes a while
    what = f"reading the evidence ({_mib(size)} in {plural(len(texts), 'input')})"
    reads, named = bounded(budget, what, lambda: _read_all(texts))
    ev = bounded(budget, "joining the evidence", lambda: join(reads))
    if all(not r.pieces or context_only(r) for r in reads):  # a host named alone is context, no input by itself
        why = ev.unreadable + tuple(f"{r.pieces[0].source}: only names the host or its links" for r in reads
                                    if r.pieces)  # fmt: skip
        shown = "; ".join(why[:3]) + (f" (and {len(why) - 3} more)" if len(why) > 3 else "")
        raise InputError(f"{shown}; diagnose reads {KINDS_READ}")
    # A directory's files of no kind it reads (a screenshot, the reporter's notes) are said, not an error.
    findings = bounded(budget, "judging the evidence", lambda: judge(ev))
    return DiagnoseOutcome(ev, findings, fail_level, unusable=tuple(named))


def _read_all(texts: list[tuple[decode.Text, bool]]) -> tuple[list[Read], list[str]]:
    """Each input read into its pieces, and the inputs of no kind it reads that the user named (not a
    directory's other files)."""
    reads: list[Read] = []
    named: list[str] = []
    pieces = 0
    for item, by_name in texts:
        got = Read((), (), f"{item.name}: {item.why}") if item.why else read_input(item.name, item.text, pieces)
        if item.cut:
            got = Read(tuple(replace(p, cut="; ".join(filter(None, (p.cut, item.cut)))) for p in got.pieces), got.parts)
        pieces += len(got.pieces)
        reads.append(got)
        if got.unreadable and by_name:
            named.append(got.unreadable)
    return reads, named


def _mib(chars: int) -> str:
    return f"{chars / (1 << 20):.1f} MiB" if chars >= 1 << 20 else f"{chars} characters"


def _texts(paths: list[str], deadline: float) -> list[tuple[decode.Text, bool]]:
    """Every input as text, and whether the user named it: standard input, the files named, every
    file of a directory named, each member of an archive; a file named twice (or named and in a
    directory named) is read once."""
    out: list[tuple[decode.Text, bool]] = []
    for got in inputs.gather(paths, deadline, _KIND):
        if got.why:
            out.append((decode.Text(got.name, why=got.why), False))
        else:
            out.extend((t, got.by_name) for t in decode.texts(got.data, got.name, MAX_FILE_BYTES))
    return out
