"""`topodoctor nccl-log`: any program's NCCL output explained (versions, ranks, transports,
NCCL's choices, and why it failed)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from topodoctor.cli.options import FailLevel, FailLevelOpt, StrictOpt, TimeoutOpt
from topodoctor.cli.options import fail_level as severity_to_fail


class LogFormat(str, Enum):
    """``nccl-log``'s output formats."""

    text = "text"
    json = "json"


def nccl_log(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="FILE...", hidden=True),
    ],
    fmt: Annotated[LogFormat, typer.Option("--format", "-f", metavar="FORMAT", help="text, or json.")] = LogFormat.text,
    timeout: TimeoutOpt = 60.0,
    fail_level: FailLevelOpt = FailLevel.error,
    strict: StrictOpt = False,
) -> None:
    """Explain NCCL's output: NCCL version per rank, ranks and nodes, transports, channels, the
    algorithm NCCL chose per op and size, and every failure with a code, the evidence line and a fix.

    FILE... is NCCL output: a job's stderr, NCCL_DEBUG_FILE files, nccl-tests output; a directory
    adds its *.log, *.txt, *.out and *.err files."""
    from topodoctor.cli import io as cli_io
    from topodoctor.cli.options import budget
    from topodoctor.core.text import printable
    from topodoctor.report.nccl_log import finding_doc, summary, text
    from topodoctor.service.nccl_logs import explain_logs

    files, findings = explain_logs(paths, budget(timeout))
    s = summary(files)
    if fmt is LogFormat.json:
        cli_io.emit_json({"summary": s, "findings": [finding_doc(f) for f in findings]})
    else:
        import shutil  # only the text report asks the terminal's width

        width = shutil.get_terminal_size((100, 24)).columns  # COLUMNS first, then the terminal
        for line in text(s, findings, width).splitlines():
            cli_io.emit(printable(line))
    from topodoctor.model.findings import failing

    raise typer.Exit(1 if failing(findings, severity_to_fail(fail_level, strict)) else 0)


def register(app: typer.Typer) -> None:
    """Add ``topodoctor nccl-log`` to the app."""
    from topodoctor.cli.io import EXITS, reports_errors
    from topodoctor.cli.options import PlainUsage

    app.command("nccl-log", epilog=EXITS["nccl-log"], cls=PlainUsage)(reports_errors(nccl_log))
