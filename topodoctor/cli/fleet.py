"""`topodoctor fleet`: many nodes' results in, per-node verdicts, outliers and a drain list out."""

from __future__ import annotations

import io
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from topodoctor.cli.options import FailLevel, TimeoutOpt, budget
from topodoctor.core.text import printable

if TYPE_CHECKING:
    from topodoctor.service.fleet import FleetReport


class FleetFormat(str, Enum):
    """``fleet``'s output formats: text, JSON, the nodes to drain, scontrol commands, Prometheus text."""

    text = "text"
    json = "json"
    drain = "drain"
    scontrol = "scontrol"
    prometheus = "prometheus"


class NameFrom(str, Enum):
    """Where ``fleet`` takes a node's name from: the host named in the result, or the file's name."""

    host = "host"
    file = "file"


def fleet(
    results: Annotated[
        list[Path],
        typer.Argument(metavar="RESULT...", hidden=True),
    ],
    fmt: Annotated[
        FleetFormat,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help="text; json; drain (NODE REASON lines); scontrol (scontrol update lines); prometheus.",
        ),
    ] = FleetFormat.text,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write there (atomically) instead of to stdout."),
    ] = None,
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            metavar="SHARE",
            min=0.0,
            max=0.9,
            help="A figure this share below the fleet median may be slow.",
        ),
    ] = 0.05,
    z_threshold: Annotated[
        float,
        typer.Option("--z", metavar="Z", min=0.0, help="... and this many robust standard deviations (MAD) below it."),
    ] = 3.5,
    min_nodes: Annotated[
        int,
        typer.Option("--min-nodes", metavar="N", min=3, help="Compare a figure only when this many nodes measured it."),
    ] = 3,
    fail_level: Annotated[
        FailLevel,
        typer.Option("--fail-level", metavar="LEVEL", help="Lowest severity of a node's finding that drains it."),
    ] = FailLevel.error,
    systemic_share: Annotated[
        float,
        typer.Option(
            "--systemic-share",
            metavar="SHARE",
            min=0.0,
            max=1.0,
            help="A failing finding on more than this share of the nodes is fleet-wide: reported, drains no node.",
        ),
    ] = 0.5,
    name_from: Annotated[
        NameFrom,
        typer.Option("--name-from", metavar="FROM", help="Name nodes by the host in each result, or by the file name."),
    ] = NameFrom.host,
    timeout: TimeoutOpt = 60.0,
) -> None:
    """Roll up many nodes' results: status per node, shared findings, outliers among nodes of one type.

    RESULT... are result files (check, bandwidth or collectives JSON) or directories of them;
    --timeout bounds the reading of them all."""
    from topodoctor.service.fleet import Settings, roll_up_paths

    settings = Settings(tolerance, z_threshold, min_nodes, fail_level.value, systemic_share)
    report = roll_up_paths(results, name_from.value, budget(timeout).left(), settings)

    from topodoctor.cli.io import Outputs, render

    outputs = Outputs()
    if fmt is FleetFormat.text:
        from topodoctor.report.fleet import print_fleet
        from topodoctor.report.terminal import make_console

        if output is None:
            render(lambda: print_fleet(report, make_console()))
        else:
            buf = io.StringIO()
            print_fleet(report, make_console(buf, width=150))
            outputs.write(lambda: _write(output, buf.getvalue()))
    else:
        outputs.write(lambda: _write(output, _render(report, fmt)))
    for u in report.unreadable:
        typer.echo(f"topodoctor: warning: {printable(u.error)}", err=True)
    if report.fleet_wide and (fmt is not FleetFormat.text or output is not None):
        from topodoctor.report.fleet import fleet_wide_line

        # Beside the drain list, never in it: a fleet-wide finding drains no node.
        typer.echo(f"topodoctor: {printable(fleet_wide_line(report))} (drains no node)", err=True)
    raise typer.Exit(outputs.exit_code(report))


def _render(report: FleetReport, fmt: FleetFormat) -> str:
    if fmt is FleetFormat.json:
        from topodoctor.core.fileio import dumps_strict
        from topodoctor.core.text import utf8_safe_doc
        from topodoctor.report.fleet import fleet_json

        return dumps_strict(utf8_safe_doc(fleet_json(report)), indent=1) + "\n"
    if fmt is FleetFormat.drain:
        from topodoctor.report.fleet import drain_lines

        return drain_lines(report)
    if fmt is FleetFormat.scontrol:
        from topodoctor.report.fleet import scontrol_lines

        return scontrol_lines(report)
    from topodoctor.report.prometheus import fleet_metrics

    return fleet_metrics(report)


def _write(output: Path | None, text: str) -> None:
    from topodoctor.core.fileio import write_atomic

    write_atomic("-" if output is None else output, text)


def register(app: typer.Typer) -> None:
    """Add ``topodoctor fleet`` to the app."""
    from topodoctor.cli.io import EXITS, reports_errors
    from topodoctor.cli.options import PlainUsage

    app.command("fleet", epilog=EXITS["fleet"], cls=PlainUsage)(reports_errors(fleet))
