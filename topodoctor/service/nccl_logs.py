"""`nccl-log` as the service runs it: any program's NCCL output read (bounded, under the command's
budget) and explained."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from topodoctor.core import decode, fileio, stdio
from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.guarded import bounded
from topodoctor.core.text import plural
from topodoctor.model.findings import Finding, Severity
from topodoctor.model.outcome import CommandOutcome
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import LogFile, parse_file

MAX_FILE_BYTES = 64 << 20  # a long job's stderr at INFO; more is refused, one line
MAX_FILES = 4096
STDIN = "-"
_LOGS = (".log", ".txt", ".out", ".err")
# A directory's logs, and the same compressed or archived (core/decode reads them by their bytes).
LOG_SUFFIXES = _LOGS + tuple(s + z for s in _LOGS for z in (".gz", ".bz2", ".xz")) + (".zip", ".tgz", ".tar.gz")


@dataclass(frozen=True)
class NcclLogOutcome(CommandOutcome):
    """``nccl-log``'s answer: the files read, and what they say went wrong."""

    files: tuple[LogFile, ...]
    findings: tuple[Finding, ...]
    fail_level: Severity = "error"
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()
    passed_over: tuple[str, ...] = ()  # a directory's files not read, lines cut: said beside the answer


def explain_logs(paths: Sequence[Path], budget: Budget, fail_level: Severity = "error") -> NcclLogOutcome:
    """The files parsed, and what they say went wrong (``nccl.explain``)."""
    deadline = budget.deadline if budget.limited else time.monotonic() + 3600.0
    said: list[str] = []
    texts = _read_all(list(paths), deadline, said)
    what = f"reading {plural(len(texts), 'NCCL log')}"
    files = bounded(budget, what, lambda: tuple(parse_file(str(p), data) for p, data in texts))
    if files and not any(f.speaks for f in files):
        named = ", ".join(f.name for f in files[:3]) + (" ..." if len(files) > 3 else "")
        raise InputError(
            f"not an NCCL log: no line of NCCL, torch.distributed, the dynamic linker on libnccl or XLA's NCCL "
            f"found in {named}"
        )
    findings = bounded(budget, "explaining the logs", lambda: tuple(explain(list(files))))
    return NcclLogOutcome(files, findings, fail_level, passed_over=tuple(said))


def _read_all(paths: list[Path], deadline: float, said: list[str]) -> list[tuple[str, str]]:
    """Every file named (``-`` standard input), and the log files of every directory named, as text
    (bounded reads; each archive member a file of its own; a file named twice read once). A file named
    that holds no text is an input error; one in a directory is passed over (in ``said``); all of them
    empty is an input error."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for p in paths:
        left = deadline - time.monotonic()
        if left <= 0:
            raise InputError(f"NCCL logs: not read within the --timeout ({plural(len(out), 'file')} read)")
        if str(p) == STDIN:
            if STDIN in seen:  # given twice: read once, as a file named twice is
                continue
            seen.add(STDIN)
            data = stdio.read_stdin("NCCL log", MAX_FILE_BYTES, left)
            out.extend(_usable(decode.texts(data, STDIN, MAX_FILE_BYTES), True, said))
            continue
        by_name = not p.is_dir()
        if not by_name:
            found = fileio.list_files(p, "NCCL log directory", LOG_SUFFIXES, MAX_FILES, left)
            if not found:
                raise InputError(
                    f"NCCL log directory {p} holds no *.log, *.txt, *.out or *.err file (nor one of them compressed)"
                )
            names = sorted(set(found))
        else:
            names = [p]
        for f in names:
            if (key := os.path.realpath(f)) in seen:
                continue
            seen.add(key)
            left = deadline - time.monotonic()
            if left <= 0 or len(out) >= MAX_FILES:
                raise InputError(f"NCCL logs: more than {plural(len(out), 'file')}, or not read within the --timeout")
            try:
                data = fileio.read_bytes(f, "NCCL log", MAX_FILE_BYTES, left)
            except InputError as exc:
                if by_name:
                    raise
                said.append(f"not read: {exc}")  # a directory's file gone since it was listed, or no file at all
                continue
            # a job's log mixes whatever its processes wrote: undecodable bytes are shown, not fatal
            out.extend(_usable(decode.texts(data, str(f), MAX_FILE_BYTES), by_name, said))
    if not out:
        raise InputError("NCCL logs: no file given holds text")
    if not any(text.strip() for _, text in out):
        raise InputError(
            f"NCCL logs: {'every file given is' if len(out) > 1 else f'{fileio.shown(out[0][0])} is'} empty"
        )
    return out


def _usable(found: list[decode.Text], by_name: bool, said: list[str]) -> list[tuple[str, str]]:
    """The texts of one file; one that is not text is an error when named, said when in a directory."""
    for t in found:
        if t.why and by_name:
            raise InputError(f"NCCL log {fileio.shown(t.name)} is {t.why}")
        if t.why or t.cut:
            said.append(f"not read: {fileio.shown(t.name)}: {t.why}" if t.why else f"{fileio.shown(t.name)}: {t.cut}")
    return [(t.name, t.text) for t in found if not t.why]
