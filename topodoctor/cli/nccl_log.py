"""`topodoctor nccl-log`: any program's NCCL output explained (versions, ranks, transports,
NCCL's choices, and why it failed)."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from topodoctor.core.errors import InputError

MAX_FILE_BYTES = 64 << 20  # a long job's stderr at INFO; more is refused, one line
MAX_FILES = 4096
EPILOG = (
    "Exit codes:\n\n\b\n"
    "  0  read; no failure at error level\n"
    "  1  the logs show a failure (a finding at error level)\n"
    "  2  usage or input error: a file missing, unreadable, too large, or no files\n"
    "  3  a bug in topodoctor"
)


class LogFormat(str, Enum):
    text = "text"
    json = "json"


def nccl_log(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE...",
            help="NCCL output: a job's stderr, NCCL_DEBUG_FILE files, nccl-tests output; a directory adds its *.log, "
            "*.txt, *.out and *.err files.",
        ),
    ],
    fmt: Annotated[LogFormat, typer.Option("--format", "-f", help="text, or json.")] = LogFormat.text,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds for reading all files.")] = 60.0,
) -> None:
    """Explain NCCL's output: NCCL version per rank, ranks and nodes, transports, channels, the
    algorithm NCCL chose per op and size, and every failure with a code, the evidence line and a fix."""
    from topodoctor.cli import io as cli_io
    from topodoctor.nccllog.explain import explain
    from topodoctor.nccllog.parse import parse_file
    from topodoctor.report.nccl_log import finding_doc, summary, text
    from topodoctor.report.terminal import printable

    deadline = time.monotonic() + timeout
    files = [parse_file(str(p), data) for p, data in _read_all(paths, deadline)]
    findings = explain(files)
    s = summary(files)
    if fmt is LogFormat.json:
        cli_io.emit_json({"summary": s, "findings": [finding_doc(f) for f in findings]})
    else:
        for line in text(s, findings).splitlines():
            cli_io.emit(printable(line))
    raise typer.Exit(1 if any(f.severity in ("error", "critical") for f in findings) else 0)


def _read_all(paths: list[Path], deadline: float) -> list[tuple[Path, str]]:
    """Every file named, and the log files of every directory named, as text (bounded reads)."""
    from topodoctor.core import fileio

    out: list[tuple[Path, str]] = []
    for p in paths:
        left = deadline - time.monotonic()
        if left <= 0:
            raise InputError(f"NCCL logs: not read within the --timeout ({len(out)} file(s) read)")
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
                raise InputError(f"NCCL logs: more than {len(out)} file(s), or not read within the --timeout")
            data = fileio.read_bytes(f, "NCCL log", MAX_FILE_BYTES, left)
            # a job's log mixes whatever its processes wrote: undecodable bytes are shown, not fatal
            out.append((f, data.decode("utf-8", "replace")))
    return out


def register(app: typer.Typer) -> None:
    from topodoctor.cli.options import reports_errors

    app.command("nccl-log", epilog=EPILOG)(reports_errors(nccl_log))
