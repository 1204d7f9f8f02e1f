"""`topodoctor fleet`: many nodes' results in, per-node verdicts, outliers and a drain list out."""

from __future__ import annotations

import io
from pathlib import Path

from topodoctor.cli.args_cluster import FleetArgs
from topodoctor.cli.io import Env, Outputs
from topodoctor.core.budget import Budget
from topodoctor.core.fileio import dumps_strict, write_atomic
from topodoctor.core.text import utf8_safe_doc
from topodoctor.report.fleet import drain_lines, fleet_json, fleet_wide_line, print_fleet, scontrol_lines
from topodoctor.report.prometheus import fleet_metrics
from topodoctor.report.terminal import make_console
from topodoctor.service.fleet import FleetReport, Settings, roll_up_paths


def run_fleet(args: FleetArgs, env: Env) -> int:
    """Roll up the results under the paths given, and print or write the roll-up."""
    settings = Settings(args.tolerance, args.z_threshold, args.min_nodes, args.fail_level, args.systemic_share)
    report = roll_up_paths(args.results, args.name_from, Budget.start(args.timeout).left(), settings)  # type: ignore[arg-type]
    output = args.output
    outputs = Outputs(env)
    if args.fmt == "text":
        if output is None:
            env.render(lambda: print_fleet(report, env.console()))
        else:
            buf = io.StringIO()
            print_fleet(report, make_console(buf, width=150))
            outputs.write(lambda: _write(output, buf.getvalue()))
    else:
        outputs.write(lambda: _write(output, _render(report, args.fmt)))
    for u in report.unreadable:
        env.say(f"topodoctor: warning: {u.error}")
    if report.fleet_wide and (args.fmt != "text" or output is not None):
        # Beside the drain list, never in it: a fleet-wide finding drains no node.
        env.say(f"topodoctor: {fleet_wide_line(report)} (drains no node)")
    return outputs.exit_code(report)


def _render(report: FleetReport, fmt: str) -> str:
    if fmt == "json":
        return dumps_strict(utf8_safe_doc(fleet_json(report)), indent=1) + "\n"
    if fmt == "drain":
        return drain_lines(report)
    if fmt == "scontrol":
        return scontrol_lines(report)

    return fleet_metrics(report)


def _write(output: Path | None, text: str) -> None:
    write_atomic("-" if output is None else output, text)
