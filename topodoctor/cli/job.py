"""`topodoctor job`: what a hung or slow job left behind, read and joined into one verdict."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from topodoctor.core.errors import InputError, TopodoctorError

if TYPE_CHECKING:
    from topodoctor.core.budget import Budget
    from topodoctor.job.ras import RasReport
    from topodoctor.job.verdict import JobReport
    from topodoctor.probe.activity import ActivitySample

EPILOG = (
    "Exit codes:\n\n\b\n"
    "  0  nothing wrong found\n"
    "  1  a culprit named: a rank, host or GPU (or a stall seen)\n"
    "  2  usage or input error: bad option, no readable dump, corrupt map or RAS file\n"
    "  3  could not analyse: RAS or NVML unavailable with nothing else to judge, budget spent\n"
    "  128+N  stopped by signal N"
)


class JobFormat(str, Enum):
    text = "text"
    json = "json"
    line = "line"


def job(
    dumps: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="DUMP...", help="Flight-recorder dumps (<prefix><rank>, pickle or JSON) or directories."
        ),
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
        int | None, typer.Option("--world-size", min=1, help="Ranks the job had (finds ranks without a dump).")
    ] = None,
    ras: Annotated[
        str | None, typer.Option("--ras", metavar="HOST:PORT", help="Ask a live job's NCCL RAS (localhost:28028).")
    ] = None,
    ras_file: Annotated[Path | None, typer.Option("--ras-file", metavar="FILE", help="A saved RAS answer.")] = None,
    ras_json: Annotated[bool, typer.Option("--ras-json", help="Ask RAS for JSON (NCCL 2.28.7+).")] = False,
    live: Annotated[bool, typer.Option("--live", help="Sample this node's GPUs through NVML.")] = False,
    live_seconds: Annotated[float, typer.Option("--live-seconds", min=0.2, max=60.0, help="How long to sample.")] = 3.0,
    record_live: Annotated[
        Path | None, typer.Option("--record-live", metavar="FILE", help="Also write the NVML sampling to FILE.")
    ] = None,
    replay_live: Annotated[
        Path | None, typer.Option("--replay-live", metavar="FILE", help="Judge a recorded sampling instead.")
    ] = None,
    host: Annotated[str, typer.Option("--host", help="The name of this node, for --live (default: hostname).")] = "",
    last: Annotated[int, typer.Option("--last", min=2, help="Collectives the straggler ranking looks at.")] = 200,
    late_ms: Annotated[float, typer.Option("--late-ms", min=0.0, help="Lateness that counts, in ms.")] = 5.0,
    fmt: Annotated[JobFormat, typer.Option("--format", "-f", help="text, json or line.")] = JobFormat.text,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds for everything.")] = 60.0,
) -> None:
    """Name the rank, node, GPU and collective of a hung or slow job, and the likely cause."""
    from topodoctor.cli import io as cli_io
    from topodoctor.core.budget import Budget
    from topodoctor.job import load
    from topodoctor.job.placement import Place, by_rank
    from topodoctor.job.verdict import JobInput, judge_job

    cli_io.line_mode = fmt is JobFormat.line
    budget = Budget.start(timeout)
    if not (dumps or ras or ras_file or live or replay_live):
        raise InputError("nothing to judge: give dumps, --ras, --ras-file, --live or --replay-live")
    notes: list[str] = []
    got, dump_notes = load.read_dumps(dumps or [], budget.left()) if dumps else ((), ())
    notes += dump_notes
    if dumps and not got and not (ras or ras_file or live or replay_live):
        raise InputError(
            f"no readable flight-recorder dump ({dump_notes[0] if dump_notes else 'no file named <prefix><rank>'})"
        )
    places = by_rank(tuple(p for m in rank_map or [] for p in load.read_map(m)))
    if host_from_dir:  # dumps collected per node: DIR/node07/nccl_trace_rank_12
        places = {**{d.rank: Place(d.rank, Path(d.source).parent.name) for d in got}, **places}
    nodes, bad = load.read_results(results, max(budget.left(), 1.0)) if results else ((), ())
    notes += bad
    report = None
    if ras_file is not None:
        report = load.read_ras(ras_file)
    elif ras is not None:
        report = _ask_ras(ras, ras_json, budget.left(), notes)
    activity = None
    if live or replay_live:
        try:
            activity = _activity(live, replay_live, record_live, live_seconds, budget)
        except TopodoctorError as exc:  # NVML missing, the budget spent: a note where other evidence stands
            if isinstance(exc, InputError) or not (got or report is not None):
                raise
            notes.append(f"--live: {exc}")
    job_input = JobInput(
        got,
        places,
        world_size,
        report,
        activity,
        host or (cli_io.hostname() if live else ""),
        nodes,
        last,
        late_ms,
        tuple(notes),
    )
    verdict = judge_job(job_input)
    _show(verdict, fmt)
    raise typer.Exit(verdict.exit_code)


def _ask_ras(address: str, as_json: bool, left: float, notes: list[str]) -> RasReport | None:
    from topodoctor.job import ras

    try:
        return ras.parse(ras.query(address, min(left, 30.0), "json" if as_json else "text"), f"RAS at {address}")
    except ras.RasUnavailable as exc:
        notes.append(str(exc))
        return None


def _activity(live: bool, replay: Path | None, record: Path | None, seconds: float, budget: Budget) -> ActivitySample:
    from topodoctor.core import codec, fileio
    from topodoctor.probe import activity

    if replay is not None:
        return activity.replay_activity(fileio.read_json(replay, "activity recording"), str(replay))
    from topodoctor.core.budget import run_with_budget

    interval = 0.25
    samples = max(2, int(seconds / interval) + 1)

    def work(deadline: float) -> dict[str, object]:
        got, doc = activity.live_sample(samples, interval, record is not None)
        return {"sample": codec.to_jsonable(got), "recording": doc}

    answer = run_with_budget(work, budget)
    if record is not None and answer.get("recording") is not None:
        fileio.write_atomic(record, fileio.dumps_strict(answer["recording"]) + "\n", "activity recording")
    return codec.from_jsonable(activity.ActivitySample, answer["sample"], "activity sample")


def _show(report: JobReport, fmt: JobFormat) -> None:
    from topodoctor.cli.io import emit, emit_json, render
    from topodoctor.job import render as out

    if fmt is JobFormat.json:
        render(lambda c: emit_json(out.job_json(report)))
    elif fmt is JobFormat.line:
        render(lambda c: emit(out.one_line(report)))
    else:
        render(lambda c: emit("\n".join(out.text_lines(report))))


def register(app: typer.Typer) -> None:
    from topodoctor.cli.options import reports_errors

    app.command("job", epilog=EPILOG)(reports_errors(job))
