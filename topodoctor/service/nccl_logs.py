"""`nccl-log` as the service runs it: any program's NCCL output read (bounded, under the command's
budget) and explained."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from topodoctor.core import fileio
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


@dataclass(frozen=True)
class NcclLogOutcome(CommandOutcome):
    """``nccl-log``'s answer: the files read, and what they say went wrong."""

    files: tuple[LogFile, ...]
    findings: tuple[Finding, ...]
    fail_level: Severity = "error"
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()


def explain_logs(paths: Sequence[Path], budget: Budget, fail_level: Severity = "error") -> NcclLogOutcome:
    """The files parsed, and what they say went wrong (``nccl.explain``)."""
    deadline = budget.deadline if budget.limited else time.monotonic() + 3600.0
    texts = _read_all(list(paths), deadline)
    what = f"reading {plural(len(texts), 'NCCL log')}"
    files = bounded(budget, what, lambda: tuple(parse_file(str(p), data) for p, data in texts))
    if files and not any(f.speaks for f in files):
        named = ", ".join(f.name for f in files[:3]) + (" ..." if len(files) > 3 else "")
        raise InputError(
            f"not an NCCL log: no line of NCCL, torch.distributed, the dynamic linker on libnccl or XLA's NCCL "
            f"found in {named}"
        )
    findings = bounded(budget, "explaining the logs", lambda: tuple(explain(list(files))))
    return NcclLogOutcome(files, findings, fail_level)


def _read_all(paths: list[Path], deadline: float) -> list[tuple[Path, str]]:
    """Every file named, and the log files of every directory named, as text (bounded reads)."""
    out: list[tuple[Path, str]] = []
    for p in paths:
        left = deadline - time.monotonic()
        if left <= 0:
            raise InputError(f"NCCL logs: not read within the --timeout ({plural(len(out), 'file')} read)")
        if p.is_dir():
            found = [
                f
                for suffix in (".log", ".txt", ".out", ".err")
                for f in fileio.list_files(p, "NCCL log directory", suffix, MAX_FILES, left)
            ]
            if not found:
                raise InputError(f"NCCL log directory {p} holds no *.log, *.txt, *.out or *.err file")
            names = sorted(set(found))
        else:
            names = [p]
        for f in names:
            left = deadline - time.monotonic()
            if left <= 0 or len(out) >= MAX_FILES:
                raise InputError(f"NCCL logs: more than {plural(len(out), 'file')}, or not read within the --timeout")
            data = fileio.read_bytes(f, "NCCL log", MAX_FILE_BYTES, left)
            # a job's log mixes whatever its processes wrote: undecodable bytes are shown, not fatal
            out.append((f, data.decode("utf-8", "replace")))
    return out
