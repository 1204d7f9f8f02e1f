"""`topodoctor fleet`: many nodes' results in, per-node verdicts, outliers and a drain list out;
with ``--history DB``, the results kept in a database and each node judged over time too."""

from __future__ import annotations

import io
from pathlib import Path

from topodoctor.cli.io import Env, Outputs
from topodoctor.cli.pictures import check_picture_path
from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.fileio import dumps_strict, write_atomic
from topodoctor.core.text import utf8_safe_doc
from topodoctor.report.fleet import drain_lines, fleet_json, fleet_wide_line, print_fleet, scontrol_lines
from topodoctor.report.fleet_heat import heat_strip_svg
from topodoctor.report.fleet_history import history_json, print_history
from topodoctor.report.svg import write_picture
from topodoctor.report.terminal import make_console
from topodoctor.service.fleet import FleetOutcome, FleetRequest, HistoryReport, history, roll_up_paths


def run_fleet(args: FleetRequest, env: Env) -> int:
    """Roll up the results under the paths given (and, with --history, keep them and judge each
    node over time); print or write the roll-up."""
    budget = Budget.start(args.timeout)
    past = None
    if args.history.history_db is not None:
        past = _history(args, budget.left(), env)
        report = past.fleet
    elif not args.results:
        raise InputError("give RESULT... (files or directories), or --history DB")
    else:
        report = roll_up_paths(args.results, args.name_from, budget.left(), args.thresholds)  # type: ignore[arg-type]
    output, strip = args.output, args.history.heat_strip
    outputs = Outputs(env)
    if past is not None and strip is not None:
        outputs.write(lambda: _heat(past, strip))
    if args.fmt == "text" and output is None:
        env.render(lambda: _print(report, past, env.console(), args.details))
    elif args.fmt == "text":
        buf = io.StringIO()
        _print(report, past, make_console(buf, width=150), args.details)
        if not outputs.wrote(lambda: _write(output, buf.getvalue())):
            # The verdicts and the drain list are not lost with the file: they go to the terminal.
            env.render(lambda: _print(report, past, env.console(), args.details))
    else:
        text = _render(report, past, args.fmt)
        if not outputs.wrote(lambda: _write(output, text)) and output is not None:
            env.write(text)
    for u in report.unreadable:
        env.say(f"topodoctor: warning: {u.error}")
    if report.fleet_wide and (args.fmt != "text" or output is not None):
        # Beside the drain list, never in it: a fleet-wide finding drains no node.
        env.say(f"topodoctor: {fleet_wide_line(report)} (drains no node)")
    return outputs.exit_code(report)


def _history(args: FleetRequest, left: float, env: Env) -> HistoryReport:
    """Add the results to the history and judge it; its warnings (a network file system) on stderr."""
    if args.history.heat_strip is not None:
        check_picture_path(args.history.heat_strip)
    report, warnings = history(args, left)
    for w in warnings:
        env.say(f"topodoctor: warning: {w}")
    return report


def _print(report: FleetOutcome, past: HistoryReport | None, console: object, details: bool) -> None:
    print_fleet(report, console, details)  # type: ignore[arg-type]
    if past is not None:
        print_history(past, console, details)  # type: ignore[arg-type]


def _heat(past: HistoryReport, path: Path) -> None:
    figure = past.settings.heat_key or ""
    if not past.heat:
        raise InputError(f"--heat-strip: no result in the window measured {figure!r} (see the findings' figures)")
    unit, better = past.heat_how
    write_picture(heat_strip_svg(past.heat, figure, unit, better), path)


def _render(report: FleetOutcome, past: HistoryReport | None, fmt: str) -> str:
    if fmt == "json":
        doc = fleet_json(report)
        if past is not None:
            doc["history"] = history_json(past)
        return dumps_strict(utf8_safe_doc(doc), indent=1) + "\n"
    if fmt == "drain":
        return drain_lines(report)
    if fmt == "scontrol":
        return scontrol_lines(report)
    from topodoctor.report.prometheus import fleet_metrics  # Prometheus' text: only in its format

    return fleet_metrics(report, history=past)


def _write(output: Path | None, text: str) -> None:
    write_atomic("-" if output is None else output, text)
