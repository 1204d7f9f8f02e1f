"""`topodoctor job`: what a hung or slow job left behind, read and joined into one verdict."""

from __future__ import annotations

from topodoctor.cli import io as cli_io
from topodoctor.cli.args_cluster import JobArgs
from topodoctor.cli.io import emit, emit_json, render
from topodoctor.core import fileio
from topodoctor.core.budget import Budget
from topodoctor.job.verdict import JobReport
from topodoctor.model.findings import fail_from
from topodoctor.report import job as out
from topodoctor.service.job import JobRequest, diagnose


def run_job(args: JobArgs) -> int:
    """Judge what the job left (dumps, RAS, the nodes' results, this node's GPUs) and print the verdict."""
    cli_io.line_mode = args.fmt == "line"
    request = JobRequest(
        dumps=args.dumps,
        maps=args.rank_map,
        results=args.results,
        host_from_dir=args.host_from_dir,
        world_size=args.world_size,
        ras=args.ras,
        ras_file=args.ras_file,
        ras_json=args.ras_json,
        live=args.live,
        live_seconds=args.live_seconds,
        record_live=args.record_live is not None,
        replay_live=args.replay_live,
        host=args.host or (cli_io.hostname() if args.live else ""),
        last=args.last,
        late_ms=args.late_ms,
        fail_level=fail_from(args.fail_level, args.strict),
    )
    verdict, recording = diagnose(request, Budget.start(args.timeout))
    outputs = cli_io.Outputs()
    record_live = args.record_live
    if record_live is not None and recording is not None:
        text = fileio.dumps_strict(recording) + "\n"
        outputs.write(lambda: fileio.write_atomic(record_live, text, "activity recording"))
    _show(verdict, args.fmt)
    return outputs.exit_code(verdict)


def _show(report: JobReport, fmt: str) -> None:
    if fmt == "json":
        render(lambda: emit_json(out.job_json(report)))
    elif fmt == "line":
        render(lambda: emit(out.one_line(report)))
    else:
        render(lambda: emit("\n".join(out.text_lines(report))))
