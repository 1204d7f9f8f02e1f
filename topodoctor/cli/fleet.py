"""`topodoctor fleet`: many nodes' results in, per-node verdicts, outliers and a drain list out;
with ``--history DB``, the results kept in a database and each node judged over time too."""

from __future__ import annotations

import io
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from topodoctor.cli.options import FailLevel, TimeoutOpt, budget
from topodoctor.core.errors import InputError
from topodoctor.core.text import printable

if TYPE_CHECKING:
    from topodoctor.service.fleet import FleetReport, HistoryReport, HistoryRequest


class FleetFormat(str, Enum):
    """``fleet``'s output formats: text, JSON, the nodes to drain, scontrol commands, Prometheus text."""

    text = "text"
    json = "json"
    drain = "drain"
    scontrol = "scontrol"
    prometheus = "prometheus"


class NameFrom(str, Enum):
    """Where ``fleet`` takes a node's name from: the node (else host) named in the result, or the file's name."""

    host = "host"
    file = "file"


class FlapLevel(str, Enum):
    """The lowest severity of a finding whose flapping ``fleet --history`` follows."""

    info = "info"
    warning = "warning"
    error = "error"
    critical = "critical"


def _history_opt(name: str, metavar: str, text: str, **kw: Any) -> Any:
    """An option of the history's: listed under its own heading in --help."""
    return typer.Option(name, metavar=metavar, help=text, rich_help_panel="History (with --history)", **kw)


def fleet(
    results: Annotated[
        list[Path] | None,
        typer.Argument(metavar="RESULT...", hidden=True),
    ] = None,
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
    details: Annotated[
        bool, typer.Option("--details", help="Text: every node and every reason in full, not one line each.")
    ] = False,
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
    latency_tolerance: Annotated[
        float,
        typer.Option(
            "--latency-tolerance",
            metavar="SHARE",
            min=0.0,
            help="A latency this share above the median (its peers', or its own baseline's) may be slow.",
        ),
    ] = 0.15,
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
        typer.Option("--name-from", metavar="FROM", help="Name nodes by the node in each result, or by the file name."),
    ] = NameFrom.host,
    timeout: TimeoutOpt = 60.0,
    history_db: Annotated[
        Path | None,
        _history_opt(
            "--history",
            "DB",
            "A SQLite history on this host's disk (not a network file system): RESULT... are added to it "
            "(made if absent), then every node is judged over time; without RESULT..., from it alone.",
        ),
    ] = None,
    as_of: Annotated[
        str | None, _history_opt("--as-of", "TIME", "Judge as of this UTC time (ISO 8601); default now.")
    ] = None,
    window_days: Annotated[
        float, _history_opt("--window-days", "DAYS", "Read the results of this many days before --as-of.", min=1.0)
    ] = 30.0,
    baseline: Annotated[
        int, _history_opt("--baseline", "N", "A node's own baseline: the median of its last N healthy results.", min=1)
    ] = 7,
    min_baseline: Annotated[
        int, _history_opt("--min-baseline", "N", "Judge a figure against its own past from N healthy results.", min=1)
    ] = 3,
    drift_tolerance: Annotated[
        float,
        _history_opt(
            "--drift-tolerance", "SHARE", "A rate this share below its own baseline has drifted.", min=0.0, max=0.9
        ),
    ] = 0.05,
    lemon_k: Annotated[int, _history_opt("--lemon-k", "K", "A node or GPU that failed K ...", min=1)] = 3,
    lemon_n: Annotated[int, _history_opt("--lemon-n", "N", "... of its last N checks is a lemon.", min=1)] = 10,
    repair_days: Annotated[
        float, _history_opt("--repair-days", "D", "Failing again within D days of a repair is a lemon too.", min=0.0)
    ] = 7.0,
    flap_results: Annotated[
        int,
        _history_opt("--flap-results", "N", "Count a finding's appearing and clearing in the last N results.", min=2),
    ] = 14,
    flap_clears: Annotated[
        int, _history_opt("--flap-clears", "N", "A finding that cleared N times in them is flapping.", min=1)
    ] = 2,
    flap_level: Annotated[
        FlapLevel, _history_opt("--flap-level", "LEVEL", "Follow the flapping of findings from this severity.")
    ] = FlapLevel.warning,
    counter_days: Annotated[
        float, _history_opt("--counter-days", "DAYS", "Watch health counters over the last DAYS days.", min=1.0)
    ] = 7.0,
    counter_rise_days: Annotated[
        int, _history_opt("--counter-rise-days", "N", "A counter that rose on N of those days is rising.", min=1)
    ] = 3,
    counter_min_rise: Annotated[
        list[str] | None,
        _history_opt(
            "--counter-min-rise",
            "NAME=N",
            "A day's rise of counter NAME below N does not count (repeatable; default nvlink_crc=100).",
        ),
    ] = None,
    stale_days: Annotated[
        float, _history_opt("--stale-days", "DAYS", "A node with no result for DAYS days is silent.", min=0.0)
    ] = 3.0,
    keep_days: Annotated[
        float, _history_opt("--keep-days", "DAYS", "Delete results older than DAYS days (0: keep all).", min=0.0)
    ] = 90.0,
    max_mb: Annotated[
        float, _history_opt("--max-mb", "MB", "Delete the oldest results beyond MB megabytes (0: no bound).", min=0.0)
    ] = 1024.0,
    heat_strip: Annotated[
        Path | None, _history_opt("--heat-strip", "FILE", "Draw one figure, nodes by days: .svg, or .png (draw extra).")
    ] = None,
    heat_figure: Annotated[
        str, _history_opt("--heat-figure", "FIGURE", "The heat strip's figure, as the findings name it.")
    ] = "hbm ce GPU0",
) -> None:
    """Roll up many nodes' results: status per node, shared findings, outliers among nodes of one type.

    RESULT... are result files (check, bandwidth, collectives or fitness JSON) or directories of
    them; --timeout bounds the reading of them all. With --history DB they are kept, and each node
    is judged over time too: drift against its own baseline, lemons, flapping, rising counters."""
    from topodoctor.service.fleet import Settings

    settings = Settings(tolerance, z_threshold, min_nodes, fail_level.value, systemic_share, latency_tolerance)
    paths = list(results or [])
    history = None
    if history_db is not None:
        from topodoctor.service.fleet import HistoryRequest, HistorySettings, Retention

        if heat_strip is not None:
            from topodoctor.cli.pictures import check_picture_path

            check_picture_path(heat_strip)
        judged = HistorySettings(
            window_days=window_days,
            baseline=baseline,
            min_baseline=min_baseline,
            drift_tolerance=drift_tolerance,
            lemon_k=lemon_k,
            lemon_n=lemon_n,
            repair_days=repair_days,
            flap_results=flap_results,
            flap_clears=flap_clears,
            flap_level=flap_level.value,
            counter_days=counter_days,
            counter_rise_days=counter_rise_days,
            counter_min_rise=_min_rises(counter_min_rise or []),
            stale_days=stale_days,
            heat_figure=heat_figure if heat_strip is not None else None,
        )
        kept = Retention(keep_days or None, max_mb or None)
        left = budget(timeout).left()
        history = _history(
            HistoryRequest(history_db, tuple(paths), name_from.value, left, settings, judged, kept, _time(as_of))
        )
        report = history.fleet
    elif not paths:
        raise InputError("give RESULT... (files or directories), or --history DB")
    else:
        from topodoctor.service.fleet import roll_up_paths

        report = roll_up_paths(paths, name_from.value, budget(timeout).left(), settings)

    from topodoctor.cli.io import Outputs, render

    outputs = Outputs()
    if history is not None and heat_strip is not None:
        outputs.write(lambda: _heat(history, heat_strip))
    if fmt is FleetFormat.text:
        from topodoctor.report.terminal import make_console

        if output is None:
            render(lambda: _print(report, history, make_console(), details))
        else:
            buf = io.StringIO()
            _print(report, history, make_console(buf, width=150), details)
            outputs.write(lambda: _write(output, buf.getvalue()))
    else:
        outputs.write(lambda: _write(output, _render(report, history, fmt)))
    for u in report.unreadable:
        typer.echo(f"topodoctor: warning: {printable(u.error)}", err=True)
    if report.fleet_wide and (fmt is not FleetFormat.text or output is not None):
        from topodoctor.report.fleet import fleet_wide_line

        # Beside the drain list, never in it: a fleet-wide finding drains no node.
        typer.echo(f"topodoctor: {printable(fleet_wide_line(report))} (drains no node)", err=True)
    raise typer.Exit(outputs.exit_code(report.exit_code))


def _time(text: str | None) -> float | None:
    if text is None:
        return None
    from topodoctor.model.stamp import parse_iso

    try:
        return parse_iso(text)
    except ValueError:
        raise InputError(f"--as-of takes an ISO 8601 time (2026-11-30T12:00:00Z); got {text!r}") from None


def _min_rises(items: list[str]) -> dict[str, int]:
    out = {"nvlink_crc": 100}  # raw CRC counts tick on healthy Hopper links: tens a day is no fault
    for item in items:
        name, eq, n = item.partition("=")
        if not eq or not name.strip() or not n.strip().isdigit():
            raise InputError(f"--counter-min-rise takes NAME=N (nvlink_crc=100); got {item!r}")
        out[name.strip()] = int(n)
    return out


def _history(req: HistoryRequest) -> HistoryReport:
    """Add the results to the history and judge it; its warnings (a network file system) on stderr."""
    from topodoctor.service.fleet import history

    report, warnings = history(req)
    for w in warnings:
        typer.echo(f"topodoctor: warning: {printable(w)}", err=True)
    return report


def _print(report: FleetReport, history: HistoryReport | None, console: object, details: bool) -> None:
    from topodoctor.report.fleet import print_fleet

    print_fleet(report, console, details)  # type: ignore[arg-type]
    if history is not None:
        from topodoctor.report.fleet_history import print_history

        print_history(history, console, details)  # type: ignore[arg-type]


def _heat(history: HistoryReport, path: Path) -> None:
    from topodoctor.report.fleet_heat import heat_strip_svg
    from topodoctor.report.svg import write_picture

    figure = history.settings.heat_figure or ""
    if not history.heat:
        raise InputError(f"--heat-strip: no result in the window measured {figure!r} (see the findings' figures)")
    unit, better = history.heat_how
    write_picture(heat_strip_svg(history.heat, figure, unit, better), path)


def _render(report: FleetReport, history: HistoryReport | None, fmt: FleetFormat) -> str:
    if fmt is FleetFormat.json:
        from topodoctor.core.fileio import dumps_strict
        from topodoctor.core.text import utf8_safe_doc
        from topodoctor.report.fleet import fleet_json

        doc = fleet_json(report)
        if history is not None:
            from topodoctor.report.fleet_history import history_json

            doc["history"] = history_json(history)
        return dumps_strict(utf8_safe_doc(doc), indent=1) + "\n"
    if fmt is FleetFormat.drain:
        from topodoctor.report.fleet import drain_lines

        return drain_lines(report)
    if fmt is FleetFormat.scontrol:
        from topodoctor.report.fleet import scontrol_lines

        return scontrol_lines(report)
    from topodoctor.report.prometheus import fleet_metrics

    return fleet_metrics(report, history=history)


def _write(output: Path | None, text: str) -> None:
    from topodoctor.core.fileio import write_atomic

    write_atomic("-" if output is None else output, text)


def register(app: typer.Typer) -> None:
    """Add ``topodoctor fleet`` to the app."""
    from topodoctor.cli.io import EXITS, reports_errors
    from topodoctor.cli.options import PlainUsage

    app.command("fleet", epilog=EXITS["fleet"], cls=PlainUsage)(reports_errors(fleet))
