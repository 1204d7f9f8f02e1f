"""`topodoctor collectives --latency`: small messages through each path between this node's GPUs
(the option is declared with the others in service/request_collectives.py; this is what it does)."""

from __future__ import annotations

import json
from pathlib import Path

from topodoctor.cli.io import Env, Outputs
from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.fileio import write_atomic
from topodoctor.core.text import printable
from topodoctor.report.collectives import text_width
from topodoctor.report.collectives_latency import latency_json, latency_lines
from topodoctor.service.collective_latency import latency_plan, run_latency, sizes_given
from topodoctor.service.collective_runs import CollectivesRun


def latency_mode(
    run: CollectivesRun, size: str | None, fmt: str, output: Path | None, within: Budget, others: bool, env: Env
) -> int:
    """``--latency``: each path's time per small message (``size``: the sizes the user gave, None
    for the defaults); exit 1 when a run or an NCCL path failed, else 0 (a path that is not
    available here is reported, not judged)."""
    if others:
        raise InputError("--latency runs on its own: not with --algo, --scaling, --from, --pairwise or --plot")
    if fmt == "prometheus":
        raise InputError("--latency writes text or json (--format), not prometheus")
    out = run_latency(run, latency_plan(run, sizes_given(size)), within)
    outputs = Outputs(env)
    if output is not None:
        doc = latency_json(out.result)
        outputs.write(lambda: write_atomic(output, json.dumps(doc, indent=1) + "\n", "latency result"))
    if fmt == "json":
        env.render(lambda: env.emit_json(latency_json(out.result)))
    else:
        # a host or GPU name never acts on the terminal
        env.render(lambda: env.emit("\n".join(printable(line) for line in latency_lines(out.result, text_width()))))
    return outputs.exit_code(out)
