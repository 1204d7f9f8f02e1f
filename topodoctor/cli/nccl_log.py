"""`topodoctor nccl-log`: any program's NCCL output explained (versions, ranks, transports,
NCCL's choices, and why it failed)."""

from __future__ import annotations

from topodoctor.cli.args_cluster import NcclLogArgs
from topodoctor.cli.io import Env
from topodoctor.core.budget import Budget
from topodoctor.core.text import printable, text_width
from topodoctor.model.findings import fail_from, finding_json
from topodoctor.report.nccl_log import summary, text
from topodoctor.service.nccl_logs import explain_logs


def run_nccl_log(args: NcclLogArgs, env: Env) -> int:
    """Read the logs (bounded, under the budget), explain them and print the explanation."""
    outcome = explain_logs(args.paths, Budget.start(args.timeout), fail_from(args.fail_level, args.strict))
    for note in outcome.passed_over:
        env.say(note)
    s = summary(list(outcome.files))
    findings = list(outcome.findings)
    if args.fmt == "json":
        env.emit_json({"summary": s, "findings": [finding_json(f) for f in findings]})
    else:
        for line in text(s, findings, text_width()).splitlines():
            env.emit(printable(line))
    return outcome.exit_code
