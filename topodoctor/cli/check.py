"""``topodoctor check``: the host probed, measured as asked and judged; the verdict printed in the
format asked for, and the metrics file written."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from topodoctor.cli.io import Env, Outputs, hostname
from topodoctor.core.budget import Budget
from topodoctor.core.errors import TopodoctorError
from topodoctor.core.fileio import write_atomic
from topodoctor.core.text import printable, truncate, truncate_middle
from topodoctor.report import check as report
from topodoctor.service import check as doctor
from topodoctor.service.request_check import CheckRequest
from topodoctor.service.stamping import stamp_now

if TYPE_CHECKING:
    from topodoctor.model.outcome import CheckOutcome


def run_check(args: CheckRequest, env: Env) -> int:
    """Probe, judge and print the verdict in its format (text, json, line, prometheus), writing the
    metrics file asked for; the exit code: 0 healthy, 1 unhealthy, 2 misconfigured, 3 could not
    check (a file not written is told after the verdict)."""
    fmt, metrics, scope = args.fmt, args.metrics, args.scope
    timeout = args.budget_s
    outputs = Outputs(env, Budget.start(timeout).deadline)  # a metrics FIFO nobody reads waits no longer than the check
    try:
        outcome = doctor.check(args)
    except TopodoctorError as exc:
        if metrics is not None or fmt == "prometheus":  # "could not check", rather than a stale answer
            text = _metrics(None, exc.exit_code, scope)
            if metrics is not None:
                outputs.write(lambda: write_atomic(metrics, text, "metrics file"))
            if fmt == "prometheus":
                env.render(lambda: env.stdout.write(text))
        if fmt == "json":  # machines reading stdout get an answer in their format, too
            doc = {**report.could_not_check_json(str(exc), exc.exit_code), **stamp_now(args.replay is None)}
            env.render(lambda: env.emit_json(doc))
        if env.line:  # what could not be written ends the one line, which stays within its limit
            after = truncate_middle(outputs.in_line(), args.line_limit // 2)
            room = args.line_limit - len("topodoctor UNKNOWN: ") - len(after)
            env.fail(truncate(printable(str(exc)), room) + after, exc.exit_code)
        else:
            env.fail(str(exc), exc.exit_code)
        return outputs.error_code(exc.exit_code)

    if metrics is not None:
        outputs.write(lambda: write_atomic(metrics, _metrics(outcome, outcome.exit_code, scope), "metrics file"))
    show = {
        "json": lambda: env.emit_json(report.check_json(outcome)),
        "line": lambda: env.emit(report.one_line(outcome, args.line_limit, after=outputs.in_line())),
        "text": lambda: _print_check(outcome, env),
        "prometheus": lambda: env.stdout.write(_metrics(outcome, outcome.exit_code, scope)),
    }
    if outcome.meta.expectations_unused is not None and fmt != "line":  # the line says it itself
        env.fail(f"{outcome.meta.expectations_unused}; judged without it", outcome.exit_code)
    env.render(show[fmt])
    return outputs.exit_code(outcome)


def _metrics(outcome: CheckOutcome | None, code: int, scope: str) -> str:
    """The check as Prometheus text; with no outcome, the text of a check that could not run."""
    from topodoctor.report import prometheus as prom  # Prometheus' text: only where metrics are asked for

    if outcome is None:
        asked = doctor.unseen_scope(scope, os.environ)
        return prom.check_metrics([], [], code, None, host=hostname(), scope=asked, scope_gpus=())
    meta = outcome.meta
    return prom.check_metrics(
        outcome.findings,
        outcome.incomplete,
        code,
        outcome.snapshot,
        meta.elapsed_s,
        scope=meta.scope_label,
        scope_gpus=meta.scope_gpus,
        fitness=outcome.fitness,
    )


def _print_check(outcome: CheckOutcome, env: Env) -> None:
    """The check as text: the one format that loads rich."""
    from topodoctor.report.check_text import print_check  # rich: only the text format draws

    print_check(outcome, env.console())
