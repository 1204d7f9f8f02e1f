"""`topodoctor job`: what a hung or slow job left behind, read and joined into one verdict."""

from __future__ import annotations

from topodoctor.cli.io import Env, Outputs
from topodoctor.core import fileio
from topodoctor.core.budget import Budget
from topodoctor.job.verdict import JobOutcome
from topodoctor.report import job as out
from topodoctor.service.job import JobRequest, diagnose


def run_job(args: JobRequest, env: Env) -> int:
    """Judge what the job left (dumps, RAS, the nodes' results, this node's GPUs) and print the verdict."""
    verdict, recording = diagnose(args, Budget.start(args.timeout))
    outputs = Outputs(env)
    record_live = args.record_live
    if record_live is not None and recording is not None:
        text = fileio.dumps_strict(recording) + "\n"
        outputs.write(lambda: fileio.write_atomic(record_live, text, "activity recording"))
    _show(verdict, args.fmt, env)
    return outputs.exit_code(verdict)


def _show(report: JobOutcome, fmt: str, env: Env) -> None:
    if fmt == "json":
        env.render(lambda: env.emit_json(out.job_json(report)))
    elif fmt == "line":
        env.render(lambda: env.emit(out.one_line(report)))
    else:
        env.render(lambda: env.emit("\n".join(out.text_lines(report))))
