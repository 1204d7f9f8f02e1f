"""The work of ``topodoctor scan``, shared by its typer command (cli/commands.py) and the plain
path (cli/plain.py) that answers ``topodoctor scan`` without loading the command-line library.

Nothing here imports typer: a person types ``scan`` bare more than any other form, and the
answer should come as soon as the probe's does."""

from __future__ import annotations

from pathlib import Path

from topodoctor.cli.io import Outputs, console, emit_json, render, reports_errors
from topodoctor.core.budget import Budget
from topodoctor.model.outcome import DONE
from topodoctor.service.passes import Source


def load_scan_report() -> None:
    """What drawing the scan needs (rich, the report), loaded while the probe's child works."""
    import topodoctor.report.scan
    import topodoctor.report.terminal  # noqa: F401


def load_scan_text() -> None:
    """What drawing the text scan needs (rich), loaded while its child probes and sets it out."""
    import topodoctor.report.scan_text
    import topodoctor.report.terminal  # noqa: F401


@reports_errors
def run_scan(
    replay: str | None, fmt: str, export_graph: Path | None, draw: Path | None, sysfs_root: str, timeout: float
) -> int:
    """Probe, then print the topology (``fmt`` text or json) and write the graph and the picture
    asked for; the exit code (a file not written is told after the output). The text shows no
    fitness reading, so a text scan with no file to write reads the topology alone (half the
    NVML calls). A failure is its one line and exit code (``Exit``)."""
    from topodoctor.service.probing import probe, probe_scan_text

    if draw is not None:
        from topodoctor.cli import pictures

        pictures.check_picture_path(draw)
    budget = Budget.start(timeout)
    outputs = Outputs(budget.deadline)
    where = Source(replay, sysfs_root, fmt == "text" and draw is None and export_graph is None)
    if where.topology_only:  # the child sets the text out; this process only draws it
        text = probe_scan_text(where, budget, meanwhile=load_scan_text)
        from topodoctor.report.scan_text import print_scan_text

        render(lambda: print_scan_text(text, console()))
        return 0
    host = probe(where, budget, environment=draw is not None, meanwhile=load_scan_report)
    g = host.view.graph
    if draw is not None:  # the rules' findings, drawn in place; the picture judges nothing itself
        from topodoctor.service import check as doctor

        findings = doctor.evaluate(doctor.make_context(host))[0]
        outputs.write(lambda: pictures.draw_scan(host.snapshot, draw, findings, g))
    if export_graph is not None:
        from topodoctor.report import graph_export

        outputs.write(lambda: graph_export.export_graph(g, export_graph))
    from topodoctor.report import scan as report

    if fmt == "json":
        render(lambda: emit_json(report.scan_json(host.snapshot, host.origin, g)))
    else:
        render(lambda: report.print_scan(host.snapshot, host.origin, g, console()))
    return outputs.exit_code(DONE)
