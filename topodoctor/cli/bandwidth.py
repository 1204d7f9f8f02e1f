"""`topodoctor bandwidth`: copies between GPUs and to the host, measured in a budgeted child."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from topodoctor.cli.io import EXITS, Outputs, console, emit_json, progress_bar, render, reports_errors
from topodoctor.cli.options import (
    BwMode,
    FailLevel,
    FailLevelOpt,
    HeatmapOpt,
    MeasureFormat,
    MetricsOpt,
    OutputOpt,
    ReplayOpt,
    StrictOpt,
    TimeoutOpt,
    budget,
    source,
)
from topodoctor.cli.options import (
    fail_level as severity_to_fail,
)
from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_UNHEALTHY
from topodoctor.model.findings import failing


def bandwidth(
    matrix: Annotated[bool, typer.Option("--matrix/--no-matrix", help="Print the pair matrices.")] = True,
    mode: Annotated[
        list[BwMode] | None,
        typer.Option(
            "--mode",
            "-m",
            metavar="MODE",
            help="oneway, bidir, latency (copy engine), host, sm (SM kernels: sm-oneway, sm-bidir, sm-latency) "
            "or all (repeatable). Default: the copy engine's and the host's.",
        ),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A short pass sized for a prolog.")] = False,
    size_mib: Annotated[int | None, typer.Option("--size", metavar="MIB", help="Buffer per copy.", min=1)] = None,
    iters: Annotated[int | None, typer.Option("--iters", metavar="N", help="Copies per sample.", min=1)] = None,
    samples: Annotated[int | None, typer.Option("--samples", metavar="N", help="Samples each.", min=1)] = None,
    devices: Annotated[str | None, typer.Option("--devices", metavar="LIST", help="NVML indices, e.g. 0,1.")] = None,
    sm_kernel: Annotated[
        str | None,
        typer.Option(
            "--sm-kernel", metavar="NAME", help="The SM copies' kernel (default stride-u4; nvbandwidth's: stride-u12)."
        ),
    ] = None,
    pair_timeout: Annotated[
        float, typer.Option("--pair-timeout", metavar="SECONDS", help="When a copy counts as hung.", min=0.1)
    ] = 20.0,
    from_file: Annotated[
        Path | None, typer.Option("--from", metavar="FILE", help="Show a saved result instead of measuring.")
    ] = None,
    output: OutputOpt = None,
    heatmap: HeatmapOpt = None,
    replay: ReplayOpt = None,
    fmt: Annotated[
        MeasureFormat, typer.Option("--format", "-f", metavar="FORMAT", help="text, json or prometheus.")
    ] = MeasureFormat.text,
    metrics: MetricsOpt = None,
    fail_level: FailLevelOpt = FailLevel.error,
    strict: StrictOpt = False,
    timeout: TimeoutOpt = 900.0,
) -> None:
    """Measure GPU-to-GPU and host copies: bandwidth one way and both ways, latency, data integrity."""
    from topodoctor.cli import pictures as cli_pictures
    from topodoctor.core import fileio
    from topodoctor.model.copies import load_result, result_to_json
    from topodoctor.service import copies

    if heatmap is not None:
        cli_pictures.check_picture_path(heatmap)

    outputs = Outputs(budget(timeout).deadline)
    if from_file is not None:
        result = load_result(from_file)
    else:
        modes = [m.value for m in mode or []]
        settings = copies.bandwidth_settings(modes, quick, size_mib, iters, samples, devices, pair_timeout, sm_kernel)
        result = copies.measure(settings, source(replay), budget(timeout), progress_bar(), _load_report)
    if output is not None:
        outputs.write(lambda: fileio.write_atomic(output, result_to_json(result), "bandwidth result"))
    findings = copies.bandwidth_findings(result)
    from topodoctor.report import bandwidth as report  # rich: loaded while the copies ran (_load_report)

    if heatmap is not None:
        outputs.write(lambda: cli_pictures.draw_heatmap(result, heatmap, findings))
    code = EXIT_UNHEALTHY if failing(findings, severity_to_fail(fail_level, strict)) else 0
    if code == 0 and result.measurements and all(m.skipped for m in result.measurements):
        code = EXIT_CANNOT_CHECK  # every copy asked for could not run here: never a pass
    if metrics is not None or fmt is MeasureFormat.prometheus:
        from topodoctor.report.prometheus import write_textfile
        from topodoctor.report.prometheus_copies import bandwidth_metrics

        text = bandwidth_metrics(result, findings, code)
        if metrics is not None:
            outputs.write(lambda: write_textfile(metrics, text))
        if fmt is MeasureFormat.prometheus:
            render(lambda: sys.stdout.write(text))
    if fmt is MeasureFormat.json:
        from dataclasses import asdict

        doc = {**report.bandwidth_json(result), "findings": [asdict(f) for f in findings]}
        render(lambda: emit_json(doc))
    elif fmt is MeasureFormat.text:
        fails = severity_to_fail(fail_level, strict)
        render(lambda: report.print_bandwidth(result, console(), findings, matrix, fail_level=fails))
    raise typer.Exit(outputs.exit_code(code))


def _load_report() -> None:
    """Load the report (and rich) while the probe's child measures, not before it is forked."""
    import topodoctor.report.bandwidth  # noqa: F401


def register(app: typer.Typer) -> None:
    """Add ``topodoctor bandwidth`` to the app."""
    app.command("bandwidth", epilog=EXITS["bandwidth"])(reports_errors(bandwidth))
