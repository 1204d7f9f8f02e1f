"""`nccl-log` as the service runs it: any program's NCCL output read (bounded, under the command's
budget) and explained."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from topodoctor.core import decode, fileio, inputs
from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.guarded import bounded
from topodoctor.core.text import plural
from topodoctor.diagnosis.evidence import judge
from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding, Severity
from topodoctor.model.outcome import CommandOutcome
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import LogFile, parse_file

MAX_FILE_BYTES = 64 << 20  # a long job's stderr at INFO; more is refused, one line
MAX_FILES = 4096
SEPARATE_RUNS = "TD983"  # diagnose's code for a launch whose processes never joined one test
SEPARATE_RUNS_MAX_CHARS = 4 << 20  # nccl-tests' own output is short; a long job's log is read by nccl/ alone
_LOGS = (".log", ".txt", ".out", ".err")
# A directory's logs, and the same compressed or archived (core/decode reads them by their bytes).
LOG_SUFFIXES = _LOGS + tuple(s + z for s in _LOGS for z in (".gz", ".bz2", ".xz")) + (".zip", ".tgz", ".tar.gz")
_KIND = inputs.Kind(
    "NCCL logs",
    "NCCL log",
    "NCCL log directory",
    LOG_SUFFIXES,
    "*.log, *.txt, *.out or *.err file (nor one of them compressed)",
    MAX_FILES,
    MAX_FILE_BYTES,
)


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
    if not any(f.severity in ("error", "critical") for f in findings):
        findings = bounded(budget, "reading nccl-tests' launch", lambda: _separate_runs(texts, files)) + findings
    return NcclLogOutcome(files, findings, fail_level, passed_over=tuple(said))


def _separate_runs(texts: list[tuple[str, str]], files: tuple[LogFile, ...]) -> tuple[Finding, ...]:
    """nccl-tests launched over several hosts whose processes each ran a test of their own (TD983): the reading
    `diagnose` gives the same output, for a log of nccl-tests that shows no failure of NCCL's."""
    tests = [(name, text) for (name, text), f in zip(texts, files, strict=True)
             if f.nccl_tests and len(text) <= SEPARATE_RUNS_MAX_CHARS]  # fmt: skip
    if not tests:
        return ()
    found = judge(join([read_input(name, text) for name, text in tests]))
    return tuple(f for f in found if f.code == SEPARATE_RUNS)


def _read_all(paths: list[Path], deadline: float, said: list[str]) -> list[tuple[str, str]]:
    """Every file named (``-`` standard input), and the log files of every directory named, as text
    (bounded reads; each archive member a file of its own; a file named twice read once). A file named
    that holds no text is an input error; one in a directory is passed over (in ``said``); all of them
    empty is an input error."""
    out: list[tuple[str, str]] = []
    for got in inputs.gather(paths, deadline, _KIND):
        if got.why:  # a directory's file gone since it was listed, or no file at all
            said.append(f"not read: {fileio.shown(got.name)}: {got.why}")
            continue
        # a job's log mixes whatever its processes wrote: undecodable bytes are shown, not fatal
        out.extend(_usable(decode.texts(got.data, got.name, MAX_FILE_BYTES), got.by_name, said))
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
