"""The work of ``topodoctor check``, shared by its typer command (cli/commands.py) and the plain
path (cli/plain.py) that answers a prolog's ``check`` without loading the command-line library.

Nothing here imports typer: a prolog runs ``check`` before every job, and typer and click are a
sixth of a live check's start on the GPU hosts."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from topodoctor.cli import io as cli_io
from topodoctor.cli.io import Outputs, console, emit, emit_json, fail, render
from topodoctor.core.budget import Budget
from topodoctor.core.errors import TopodoctorError
from topodoctor.core.text import LINE_LIMIT, printable, truncate, truncate_middle
from topodoctor.model.findings import fail_from
from topodoctor.service.passes import Source

if TYPE_CHECKING:
    from topodoctor.model.outcome import Outcome
    from topodoctor.service.passes import Pass

DEFAULT_CHECK_TIMEOUT_S = 30.0
LEVEL_TIMEOUT_S = {"quick": 60.0, "long": 300.0}  # the default budget of a measuring level


def split(values: list[str] | None) -> tuple[str, ...]:
    """Repeated and comma-separated values as one tuple: --select TD1,TD3 --select TD5."""
    return tuple(p.strip() for v in values or [] for p in v.split(",") if p.strip())


def run_check(
    replay: str | None,
    fmt: str,
    metrics: Path | None,
    timeout: float,
    select: list[str] | None,
    ignore: list[str] | None,
    prolog: bool,
    strict: bool,
    level_to_fail: str,
    expect: Path | None,
    baseline: Path | None,
    with_bandwidth: bool,
    with_collectives: bool,
    scope: str,
    sysfs_root: str,
    level: str,
) -> int:
    """Probe, judge and print the verdict in ``fmt`` (text, json, line, prometheus), writing the
    metrics file asked for; the exit code: 0 healthy, 1 unhealthy, 2 misconfigured, 3 could not
    check (a file not written is told after the verdict)."""
    from topodoctor.service import check as doctor

    cli_io.line_mode = fmt == "line"
    if level != "static" and timeout == DEFAULT_CHECK_TIMEOUT_S:
        timeout = LEVEL_TIMEOUT_S[level]
    options = doctor.CheckOptions(
        source=Source(replay, sysfs_root),
        timeout_s=timeout,
        select=split(select),
        ignore=split(ignore),
        tags=("prolog",) if prolog else (),
        fail_level=fail_from(level_to_fail, strict),
        expect=expect,
        passes=_passes(with_bandwidth, with_collectives, scope, level),
        scope=scope,
        baseline=baseline,
    )
    outputs = Outputs(Budget.start(timeout).deadline)  # a metrics FIFO nobody reads waits no longer than the check
    try:
        outcome = doctor.check(options)
    except TopodoctorError as exc:
        if metrics is not None or fmt == "prometheus":  # "could not check", rather than a stale answer
            from topodoctor.report import prometheus as prom

            asked = doctor.unseen_scope(scope, os.environ)
            text = prom.check_metrics([], [], exc.exit_code, None, host=cli_io.hostname(), scope=asked, scope_gpus=())
            if metrics is not None:
                outputs.write(lambda: prom.write_textfile(metrics, text))
            if fmt == "prometheus":
                render(lambda: sys.stdout.write(text))
        if fmt == "json":  # machines reading stdout get an answer in their format, too
            from topodoctor.report import check as report
            from topodoctor.service.stamping import stamp_now

            doc = {**report.could_not_check_json(str(exc), exc.exit_code), **stamp_now(replay is None)}
            render(lambda: emit_json(doc))
        if cli_io.line_mode:  # what could not be written ends the one line, which stays within its limit
            after = truncate_middle(outputs.in_line(), LINE_LIMIT // 2)
            room = LINE_LIMIT - len("topodoctor UNKNOWN: ") - len(after)
            fail(truncate(printable(str(exc)), room) + after, exc.exit_code)
        else:
            fail(str(exc), exc.exit_code)
        return outputs.exit_code(exc.exit_code)

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
            scope=meta.scope_label,
            scope_gpus=meta.scope_gpus,
            fitness=o.fitness,
        )

    if metrics is not None:
        from topodoctor.report.prometheus import write_textfile

        outputs.write(lambda: write_textfile(metrics, metrics_text()))
    show = {
        "json": lambda: emit_json(report.check_json(outcome)),
        "line": lambda: emit(report.one_line(outcome, after=outputs.in_line())),
        "text": lambda: _print_check(outcome),
        "prometheus": lambda: sys.stdout.write(metrics_text()),
    }
    if outcome.meta.expectations_unused is not None and fmt != "line":  # the line says it itself
        fail(f"{outcome.meta.expectations_unused}; judged without it", outcome.exit_code)
    render(show[fmt])
    return outputs.exit_code(outcome.exit_code)


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
