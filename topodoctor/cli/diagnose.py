"""`topodoctor diagnose`: the evidence users bring (nccl-tests tables, nvidia-smi outputs, copy
matrices, NCCL logs and dumps, lspci, launch command lines) read and judged."""

from __future__ import annotations

from topodoctor.cli.args_cluster import DiagnoseArgs
from topodoctor.cli.io import Env
from topodoctor.core.budget import Budget
from topodoctor.model.findings import fail_from
from topodoctor.report import diagnose as report
from topodoctor.service.diagnose import diagnose


def run_diagnose(args: DiagnoseArgs, env: Env) -> int:
    """Read the inputs (bounded, under the budget), judge them and print the answer."""
    outcome = diagnose(args.paths, Budget.start(args.timeout), fail_from(args.fail_level, args.strict))
    if args.fmt == "json":
        env.emit_json(report.json_doc(outcome.evidence, outcome))
    elif args.fmt == "line":
        env.emit(report.one_line(outcome.evidence, outcome))
    else:
        for line in report.text(outcome.evidence, outcome).splitlines():
            env.emit(line)
    return outcome.exit_code
