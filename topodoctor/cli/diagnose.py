"""`topodoctor diagnose`: the evidence users bring (nccl-tests tables, nvidia-smi outputs, copy
matrices, NCCL logs and dumps, lspci, launch command lines) read and judged."""

from __future__ import annotations

from topodoctor.cli.io import Env
from topodoctor.core.budget import Budget
from topodoctor.core.errors import TopodoctorError
from topodoctor.report import diagnose as report
from topodoctor.service.diagnose import diagnose
from topodoctor.service.request_diagnose import DiagnoseRequest


def run_diagnose(args: DiagnoseRequest, env: Env) -> int:
    """Read the inputs (bounded, under the budget), judge them and print the answer."""
    try:
        outcome = diagnose(args.paths, Budget.start(args.timeout), args.fails_from)
    except TopodoctorError as exc:
        if args.fmt == "json":  # machines reading stdout get an answer in their format, as check gives them
            doc = report.could_not_read_json(str(exc), exc.exit_code)
            env.render(lambda: env.emit_json(doc))
        raise
    if args.fmt == "json":
        env.emit_json(report.json_doc(outcome.evidence, outcome))
    elif args.fmt == "line":
        env.emit(report.one_line(outcome.evidence, outcome))
    else:
        for line in report.text(outcome.evidence, outcome).splitlines():
            env.emit(line)
    return outcome.exit_code
