"""`topodoctor fleet`: many nodes' results in, per-node verdicts, outliers and a drain list out."""

from __future__ import annotations

import io
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from topodoctor.core.errors import InputError

if TYPE_CHECKING:
    from topodoctor.fleet.rollup import FleetReport


class FleetFormat(str, Enum):
    text = "text"
    json = "json"
    drain = "drain"
    scontrol = "scontrol"
    prometheus = "prometheus"


class NameFrom(str, Enum):
    host = "host"
    file = "file"


class FailLevel(str, Enum):
    warning = "warning"
    error = "error"
    critical = "critical"


def fleet(
    results: Annotated[
        list[Path],
        typer.Argument(
            metavar="RESULT...", help="Result files (check, bandwidth, collectives JSON) or directories of them."
        ),
    ],
    fmt: Annotated[
        FleetFormat,
        typer.Option(
            "--format",
            "-f",
            help="text; json; drain (NODE REASON lines); scontrol (scontrol update lines); prometheus.",
        ),
    ] = FleetFormat.text,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write there (atomically) instead of to stdout.")
    ] = None,
    tolerance: Annotated[
        float,
        typer.Option("--tolerance", min=0.0, max=0.9, help="A figure this share below the fleet median may be slow."),
    ] = 0.05,
    z_threshold: Annotated[
        float, typer.Option("--z", min=0.0, help="... and this many robust standard deviations (MAD) below it.")
    ] = 3.5,
    min_nodes: Annotated[
        int, typer.Option("--min-nodes", min=3, help="Compare a figure only when this many nodes measured it.")
    ] = 3,
    fail_level: Annotated[
        FailLevel, typer.Option("--fail-level", help="Lowest severity of a node's finding that drains it.")
    ] = FailLevel.error,
    systemic_share: Annotated[
        float,
        typer.Option(
            "--systemic-share",
            min=0.0,
            max=1.0,
            help="A failing finding on more than this share of the nodes is fleet-wide: reported, drains no node.",
        ),
    ] = 0.5,
    name_from: Annotated[
        NameFrom, typer.Option("--name-from", help="Name nodes by the host in each result, or by the file name.")
    ] = NameFrom.host,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds for reading all files.")] = 60.0,
) -> None:
    """Roll up many nodes' results: status per node, shared findings, outliers among nodes of one type.

    Exit 0 all healthy, 1 some node to drain, 3 a node or file could not be judged, 2 no readable result.
    """
    from topodoctor.fleet.inputs import read_results
    from topodoctor.fleet.rollup import Settings, roll_up

    nodes, unreadable = read_results(results, name_from.value, timeout)
    if not nodes:
        first = f" ({unreadable[0].error})" if unreadable else ""
        raise InputError(f"no readable result among {len(results)} path(s){first}")
    settings = Settings(tolerance, z_threshold, min_nodes, fail_level.value, systemic_share)
    report = roll_up(nodes, unreadable, settings)

    if fmt is FleetFormat.text:
        from rich.console import Console

        from topodoctor.report.fleet import print_fleet

        if output is None:
            print_fleet(report, Console(soft_wrap=False, width=None if sys.stdout.isatty() else 150))
        else:
            buf = io.StringIO()
            print_fleet(report, Console(file=buf, width=150, color_system=None))
            _write(output, buf.getvalue())
    else:
        _write(output, _render(report, fmt))
    for u in report.unreadable:
        typer.echo(f"topodoctor: warning: {u.error}", err=True)
    raise typer.Exit(report.exit_code)


def _render(report: FleetReport, fmt: FleetFormat) -> str:
    if fmt is FleetFormat.json:
        from topodoctor.core.fileio import dumps_strict
        from topodoctor.report.fleet import fleet_json

        return dumps_strict(fleet_json(report), indent=1) + "\n"
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
    from topodoctor.cli.options import reports_errors

    app.command("fleet")(reports_errors(fleet))
