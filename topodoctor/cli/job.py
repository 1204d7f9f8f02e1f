"""`topodoctor job`: what a hung or slow job left behind, read and joined into one verdict."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from topodoctor.cli.options import FailLevel, FailLevelOpt, StrictOpt, TimeoutOpt

if TYPE_CHECKING:
    from topodoctor.job.verdict import JobReport


class JobFormat(str, Enum):
    """``job``'s output formats: text, JSON, or one line."""

    text = "text"
    json = "json"
    line = "line"


def job(
    dumps: Annotated[
        list[Path] | None,
        typer.Argument(metavar="DUMP...", hidden=True),
    ] = None,
    rank_map: Annotated[
        list[Path] | None,
        typer.Option(
            "--map",
            metavar="FILE",
            help="Rank map: 'RANK HOST [LOCAL_RANK [GPU [NIC]]]' lines, JSON, or a collectives result.",
        ),
    ] = None,
    results: Annotated[
        list[Path] | None,
        typer.Option("--results", metavar="PATH", help="The nodes' topodoctor results (files or directories)."),
    ] = None,
    host_from_dir: Annotated[
        bool,
        typer.Option(
            "--host-from-dir", help="A rank the map does not place ran on the host its dump's directory is named after."
        ),
    ] = False,
    world_size: Annotated[
        int | None,
        typer.Option("--world-size", metavar="N", min=1, help="Ranks the job had (finds ranks without a dump)."),
    ] = None,
    ras: Annotated[
        str | None, typer.Option("--ras", metavar="HOST:PORT", help="Ask a live job's NCCL RAS (localhost:28028).")
    ] = None,
    ras_file: Annotated[Path | None, typer.Option("--ras-file", metavar="FILE", help="A saved RAS answer.")] = None,
    ras_json: Annotated[bool, typer.Option("--ras-json", help="Ask RAS for JSON (NCCL 2.28.7+).")] = False,
    live: Annotated[bool, typer.Option("--live", help="Sample this node's GPUs through NVML.")] = False,
    live_seconds: Annotated[
        float, typer.Option("--live-seconds", metavar="SECONDS", min=0.2, max=60.0, help="How long to sample.")
    ] = 3.0,
    record_live: Annotated[
        Path | None, typer.Option("--record-live", metavar="FILE", help="Also write the NVML sampling to FILE.")
    ] = None,
    replay_live: Annotated[
        Path | None, typer.Option("--replay-live", metavar="FILE", help="Judge a recorded sampling instead.")
    ] = None,
    host: Annotated[
        str, typer.Option("--host", metavar="NAME", help="The name of this node, for --live (default: hostname).")
    ] = "",
    last: Annotated[
        int, typer.Option("--last", metavar="N", min=2, help="Collectives the straggler ranking looks at.")
    ] = 200,
    late_ms: Annotated[
        float, typer.Option("--late-ms", metavar="MS", min=0.0, help="Lateness that counts, in ms.")
    ] = 5.0,
    fmt: Annotated[
        JobFormat, typer.Option("--format", "-f", metavar="FORMAT", help="text, json or line.")
    ] = JobFormat.text,
    fail_level: FailLevelOpt = FailLevel.error,
    strict: StrictOpt = False,
    timeout: TimeoutOpt = 60.0,
) -> None:
    """Name the rank, node, GPU and collective of a hung or slow job, and the likely cause.

    DUMP... are flight-recorder dumps (one file per rank, named by a prefix and the rank: pickle or
    JSON) or directories of them."""
    from topodoctor.cli import io as cli_io
    from topodoctor.cli.options import budget
    from topodoctor.cli.options import fail_level as severity_to_fail
    from topodoctor.service.job import JobRequest, diagnose

    cli_io.line_mode = fmt is JobFormat.line
    request = JobRequest(
        dumps=tuple(dumps or ()),
        maps=tuple(rank_map or ()),
        results=tuple(results or ()),
        host_from_dir=host_from_dir,
        world_size=world_size,
        ras=ras,
        ras_file=ras_file,
        ras_json=ras_json,
        live=live,
        live_seconds=live_seconds,
        record_live=record_live is not None,
        replay_live=replay_live,
        host=host or (cli_io.hostname() if live else ""),
        last=last,
        late_ms=late_ms,
        fail_level=severity_to_fail(fail_level, strict),
    )
    verdict, recording = diagnose(request, budget(timeout))
    outputs = cli_io.Outputs()
    if record_live is not None and recording is not None:
        from topodoctor.core import fileio

        text = fileio.dumps_strict(recording) + "\n"
        outputs.write(lambda: fileio.write_atomic(record_live, text, "activity recording"))
    _show(verdict, fmt)
    raise typer.Exit(outputs.exit_code(verdict))


def _show(report: JobReport, fmt: JobFormat) -> None:
    from topodoctor.cli.io import emit, emit_json, render
    from topodoctor.report import job as out

    if fmt is JobFormat.json:
        render(lambda: emit_json(out.job_json(report)))
    elif fmt is JobFormat.line:
        render(lambda: emit(out.one_line(report)))
    else:
        render(lambda: emit("\n".join(out.text_lines(report))))


def register(app: typer.Typer) -> None:
    """Add ``topodoctor job`` to the app."""
    from topodoctor.cli.io import EXITS, reports_errors

    app.command("job", epilog=EXITS["job"])(reports_errors(job))
