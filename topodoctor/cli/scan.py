"""``topodoctor scan``: the host probed, printed as text or JSON, and its graph and picture written."""

from __future__ import annotations

from topodoctor.cli.args import ScanArgs
from topodoctor.cli.io import Outputs, console, emit_json, render
from topodoctor.core.budget import Budget
from topodoctor.model.outcome import DONE


def load_scan_report() -> None:
    """What drawing the scan needs (rich, the report), loaded while the probe's child works."""
    import topodoctor.report.scan
    import topodoctor.report.terminal  # noqa: F401


def load_scan_text() -> None:
    """What drawing the text scan needs (rich), loaded while its child probes and sets it out."""
    import topodoctor.report.scan_text
    import topodoctor.report.terminal  # noqa: F401


def run_scan(args: ScanArgs) -> int:
    """Probe, then print the topology (text or json) and write the graph and the picture asked
    for; the exit code (a file not written is told after the output). The text shows no fitness
    reading, so a text scan with no file to write reads the topology alone (half the NVML calls)."""
    from topodoctor.service.probing import probe, probe_scan_text

    draw, export_graph = args.draw, args.export_graph
    if draw is not None:
        from topodoctor.cli import pictures

        pictures.check_picture_path(draw)
    budget = Budget.start(args.timeout)
    outputs = Outputs(budget.deadline)
    where = args.source()
    if where.topology_only:  # the child sets the text out; this process only draws it
        text = probe_scan_text(where, budget, meanwhile=load_scan_text)
        from topodoctor.report.scan_text import print_scan_text

        render(lambda: print_scan_text(text, console()))
        return outputs.exit_code(DONE)
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

    if args.fmt == "json":
        render(lambda: emit_json(report.scan_json(host.snapshot, host.origin, g)))
    else:
        render(lambda: report.print_scan(host.snapshot, host.origin, g, console()))
    return outputs.exit_code(DONE)
