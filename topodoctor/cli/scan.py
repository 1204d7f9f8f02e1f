"""``topodoctor scan``: the host probed, printed as text or JSON, and its graph and picture written."""

from __future__ import annotations

from topodoctor.cli.io import Env, Outputs
from topodoctor.core.budget import Budget
from topodoctor.model.outcome import DONE
from topodoctor.report import scan as report
from topodoctor.report import scan_text
from topodoctor.service.probing import probe, probe_scan_text
from topodoctor.service.request_scan import ScanRequest


def run_scan(args: ScanRequest, env: Env) -> int:
    """Probe, then print the topology (text or json) and write the graph and the picture asked
    for; the exit code (a file not written is told after the output). The text shows no fitness
    reading, so a text scan with no file to write reads the topology alone (half the NVML calls),
    and its child sets the text out: this process only draws it."""
    draw, export_graph = args.draw, args.export_graph
    if draw is not None or export_graph is not None:
        # the picture's and the graph file's writers (SVG, PNG, networkx): only when one is asked for
        from topodoctor.cli import pictures
    if draw is not None:
        pictures.check_picture_path(draw)
    budget = Budget.start(args.timeout)
    outputs = Outputs(env, budget.deadline)
    where = args.source()
    if where.topology_only:
        text = probe_scan_text(where, budget)
        env.render(lambda: scan_text.print_scan_text(text, env.console()))
        return outputs.exit_code(DONE)
    host = probe(where, budget, environment=draw is not None)
    g = host.view.graph
    if draw is not None:  # the rules' findings, drawn in place; the picture judges nothing itself
        outputs.write(lambda: pictures.draw_host(host, draw))
    if export_graph is not None:
        outputs.write(lambda: pictures.export_graph(g, export_graph))
    if args.fmt == "json":
        env.render(lambda: env.emit_json(report.scan_json(host.snapshot, host.origin, g)))
    else:
        env.render(lambda: report.print_scan(host.snapshot, host.origin, g, env.console()))
    return outputs.exit_code(DONE)
