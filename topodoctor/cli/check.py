"""``topodoctor check``: the host probed, measured as asked and judged; the verdict printed in the
format asked for, and the metrics file written."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from topodoctor.cli import io as cli_io
from topodoctor.cli.args import CheckArgs
from topodoctor.cli.io import Outputs, console, emit, emit_json, fail, render
from topodoctor.core.budget import Budget
from topodoctor.core.errors import TopodoctorError
from topodoctor.model.findings import fail_from

if TYPE_CHECKING:
    from topodoctor.model.outcome import Outcome
    from topodoctor.service.passes import Pass


def run_check(args: CheckArgs) -> int:
    """Probe, judge and print the verdict in its format (text, json, line, prometheus), writing the
    metrics file asked for; the exit code: 0 healthy, 1 unhealthy, 2 misconfigured, 3 could not
    check (a file not written is told after the verdict)."""
    from topodoctor.service import check as doctor

    cli_io.line_mode = args.fmt == "line"
    fmt, metrics, scope = args.fmt, args.metrics, args.scope
    timeout = args.budget_s
    options = doctor.CheckOptions(
        source=args.source(),
        timeout_s=timeout,
        select=args.select,
        ignore=args.ignore,
        tags=("prolog",) if args.prolog else (),
        fail_level=fail_from(args.fail_level, args.strict),
        expect=args.expect,
        passes=_passes(args.bandwidth, args.collectives, scope, args.level),
        scope=scope,
        baseline=args.baseline,
    )
    outputs = Outputs(Budget.start(timeout).deadline)  # a metrics FIFO nobody reads waits no longer than the check
    try:
        outcome = doctor.check(options)
    except TopodoctorError as exc:
        if metrics is not None:  # a metrics file that says "could not check" instead of going stale
            from topodoctor.report import prometheus as prom

            asked = "job" if scope == "job" else "node"
            text = prom.check_metrics([], [], exc.exit_code, None, host=cli_io.hostname(), scope=asked, scope_gpus=())
            outputs.write(lambda: prom.write_textfile(metrics, text))
        if fmt == "json":  # machines reading stdout get an answer in their format, too
            from topodoctor.report import check as report

            doc = report.could_not_check_json(str(exc), exc.exit_code)
            render(lambda: emit_json(doc))
        fail(str(exc) + (outputs.in_line() if cli_io.line_mode else ""), exc.exit_code)
        return outputs.error_code(exc.exit_code)

    from topodoctor.report import check as report

    def metrics_text() -> str:
        from topodoctor.report import prometheus as prom  # only when metrics are asked for

        o = outcome
        meta = o.meta
        return prom.check_metrics(
            o.findings,
            o.incomplete,
            o.exit_code,
            o.snapshot,
            meta.elapsed_s,
            scope=meta.scope_kind,
            scope_gpus=meta.scope_gpus,
            fitness=o.fitness,
        )

    if metrics is not None:
        from topodoctor.report.prometheus import write_textfile

        outputs.write(lambda: write_textfile(metrics, metrics_text()))
    show = {
        "json": lambda: emit_json(report.check_json(outcome)),
        "line": lambda: emit(report.one_line(outcome) + outputs.in_line()),
        "text": lambda: _print_check(outcome),
        "prometheus": lambda: sys.stdout.write(metrics_text()),
    }
    if outcome.meta.expectations_unused is not None and fmt != "line":  # the line says it itself
        fail(f"{outcome.meta.expectations_unused}; judged without it", outcome.exit_code)
    render(show[fmt])
    return outputs.exit_code(outcome)


def _print_check(outcome: Outcome) -> None:
    """The check as text: the one format that loads rich."""
    from topodoctor.report.check_text import print_check

    print_check(outcome, console())


def _passes(bandwidth: bool, collectives: bool, scope: str, level: str = "static") -> tuple[Pass, ...]:
    """The measurements a check adds, in the order they run in its budgeted child. A level
    above static adds copies, fitness and (with more than one GPU) collectives. A static check
    loads none of the measuring code: it starts in every prolog."""
    if level == "static" and not (bandwidth or collectives):
        return ()
    from topodoctor.service import copies
    from topodoctor.service.collectives import check_pass, driver_gpus

    if level != "static":
        from topodoctor.service.fitness import fitness_pass

        bandwidth, collectives = True, collectives or driver_gpus() > 1
    passes = ((copies.bandwidth_pass(scope),) if bandwidth else ()) + ((check_pass(),) if collectives else ())
    return passes + ((fitness_pass(level, scope),) if level != "static" else ())
