"""`topodoctor bandwidth`: copies between GPUs and to the host, measured in a budgeted child."""

from __future__ import annotations

from topodoctor.cli import pictures as cli_pictures
from topodoctor.cli.io import Env, Outputs
from topodoctor.core import fileio
from topodoctor.core.budget import Budget
from topodoctor.model.copies import result_to_json
from topodoctor.model.findings import finding_json
from topodoctor.report import bandwidth as report
from topodoctor.report.prometheus import write_textfile
from topodoctor.report.prometheus_copies import bandwidth_metrics
from topodoctor.service import copies
from topodoctor.service.passes import Source
from topodoctor.service.request_bandwidth import BandwidthRequest


def run_bandwidth(args: BandwidthRequest, env: Env) -> int:
    """Measure GPU-to-GPU and host copies (or read a saved result), judge them (TD7xx) and print
    them; the pictures, result and metrics files written."""
    heatmap, output, metrics = args.heatmap, args.output, args.metrics
    if heatmap is not None:
        cli_pictures.check_picture_path(heatmap)
    budget = Budget.start(args.timeout)
    outputs = Outputs(env, budget.deadline)
    if args.from_file is not None:
        result = copies.load_saved(str(args.from_file), Source(args.replay) if args.replay else None, budget)
    else:
        result = copies.measure(args, budget, env.progress_bar())
    if output is not None:
        outputs.write(lambda: fileio.write_atomic(output, result_to_json(result), "bandwidth result"))
    outcome = copies.judged(result, args.fails_from)
    findings = outcome.findings
    if heatmap is not None:
        outputs.write(lambda: cli_pictures.draw_heatmap(result, heatmap, findings))
    if metrics is not None or args.fmt == "prometheus":
        text = bandwidth_metrics(result, findings, outcome.exit_code)
        if metrics is not None:
            outputs.write(lambda: write_textfile(metrics, text))
        if args.fmt == "prometheus":
            env.write(text)
    if args.fmt == "json":
        doc = {**report.bandwidth_json(result), "findings": [finding_json(f) for f in findings]}
        env.render(lambda: env.emit_json(doc))
    elif args.fmt == "text":
        fails = outcome.fail_level
        env.render(lambda: report.print_bandwidth(result, env.console(), findings, args.matrix, fail_level=fails))
    return outputs.exit_code(outcome)
