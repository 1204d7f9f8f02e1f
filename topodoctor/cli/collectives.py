"""`topodoctor collectives`: NCCL collectives through torch.distributed, measured as nccl-tests
measures them and judged against the topology.

One command that does one of several things, each a function here that reads its own part of
the request (service/request_collectives.py): predict the busbw the topology gives (``predict``), time small
messages through each path (``--latency``: cli/collectives_latency.py), compare algorithms or
GPU counts (``sweep``), or measure and judge (``measure``: spawned ranks, a launcher's world, or
saved results). Started by torchrun or srun (RANK / WORLD_SIZE or SLURM_PROCID / SLURM_NTASKS in
the environment) each process joins that world as one rank and rank 0 reports.
"""

from __future__ import annotations

from typing import Any

from topodoctor.cli.collectives_latency import latency_mode
from topodoctor.cli.io import Env, Outputs
from topodoctor.cli.nodes import emit_metrics
from topodoctor.cli.pictures import check_picture_path, draw_collectives
from topodoctor.core.budget import Budget
from topodoctor.core.codec import to_jsonable
from topodoctor.core.errors import InputError
from topodoctor.core.fileio import write_atomic
from topodoctor.core.sizes import parse_sizes
from topodoctor.core.text import printable
from topodoctor.model.collective_ops import parse_ops
from topodoctor.model.collectives import result_to_json
from topodoctor.model.outcome import DONE
from topodoctor.report.collectives import (
    collectives_json,
    fit,
    model_busbw,
    prediction_doc,
    prediction_lines,
    text_report,
    text_width,
)
from topodoctor.report.collectives_nodes import node_lines
from topodoctor.report.collectives_sweeps import algo_lines, scaling_lines
from topodoctor.service.collective_runs import CollectivesRun, run_collectives, run_of
from topodoctor.service.collective_sweeps import predict_busbw, run_sweeps
from topodoctor.service.passes import Source
from topodoctor.service.request_collectives import (
    SIZE_DEFAULT,
    CollectivesOutput,
    CollectivesRequest,
    JudgeOptions,
    PredictOptions,
    RunOptions,
)


def run(args: CollectivesRequest, env: Env) -> int:
    """``collectives``: what the options ask for, under one budget from the command's start."""
    budget = Budget.start(args.limits.timeout)
    if args.predict.predict:
        return predict(args.predict, args.run, args.judge, args.out, budget, env)
    if args.out.plot is not None:  # a bad picture path is refused before anything is measured
        check_picture_path(args.out.plot)
    what = collectives_run(args, env)
    if args.latency.latency:
        sweep_, judge = args.sweep, args.judge
        others = bool(sweep_.algo or sweep_.scaling or judge.from_file or args.nodes.pairwise or args.out.plot)
        size = args.run.size if args.run.size != SIZE_DEFAULT else None
        return latency_mode(what, size, args.out.fmt, args.out.output, budget, others, env)
    if args.sweep.algo is not None or args.sweep.scaling:
        return sweep(what, args.sweep.algo, args.sweep.scaling, args.out.fmt, budget, env)
    return measure(what, args.judge, args.out, budget, env)


def collectives_run(args: CollectivesRequest, env: Env) -> CollectivesRun:
    """What to run (or judge) and against which host, as the service makes it from the request."""

    def progress(what: str) -> None:
        env.stderr.write(f"\r\033[K{what}")
        env.stderr.flush()

    return run_of(args, progress=progress if env.stderr.isatty() else None)


def measure(what: CollectivesRun, judge: JudgeOptions, out: CollectivesOutput, budget: Budget, env: Env) -> int:
    """Measure (spawned ranks, or a launcher's world) or judge saved results; print the table and
    the findings, write the result, the plot and the metrics asked for."""
    got = run_collectives(what, budget)
    if what.progress is not None and not judge.from_file:
        env.stderr.write("\r\033[K")
    if got is None:
        return DONE.exit_code  # not rank 0: rank 0 reports for the world
    res, snap, findings = got.result, got.snapshot, list(got.findings)
    outputs = Outputs(env)
    output, plot = out.output, out.plot
    if output is not None:
        outputs.write(lambda: write_atomic(output, result_to_json(res), "collectives result"))
    if plot is not None:
        expected, source_of = model_busbw(res, snap or res.snapshot), "the topology model's busbw at 1 GiB"
        if judge.expect_busbw is not None:
            expected, source_of = {str(row.op): judge.expect_busbw for row in res.rows}, "--expect-busbw"
        outputs.write(lambda: draw_collectives(res, plot, expected, expected_from=source_of))
    if out.metrics_file is not None or out.fmt == "prometheus":
        emit_metrics(got, out.metrics_file, outputs, stdout=out.fmt == "prometheus")
    if out.fmt == "json":
        doc = collectives_json(res, findings, snap)
        env.render(lambda: env.emit_json(doc))
    elif out.fmt == "text":
        width = text_width()
        # a host or GPU name never acts on the terminal
        lines = [printable(line) for line in fit([*text_report(res, findings, snap, width), *node_lines(res)], width)]
        env.write("".join(f"{line}\n" for line in lines))
        if snap is None and res.snapshot is None:
            env.say("(no host snapshot: busbw and transports not judged; pass --replay NAME|FILE)")
    return outputs.exit_code(got)


def predict(
    pred: PredictOptions, run_args: RunOptions, judge: JudgeOptions, out: CollectivesOutput, budget: Budget, env: Env
) -> int:
    """``--predict``: the model's busbw per op for this host (or a recording); runs nothing."""
    judged = [flag for flag, given in (("--from", judge.from_file), ("--bandwidth", judge.bandwidth_file)) if given]
    if judged:  # they judge a run, and --predict runs and reads none: taking them silently would mislead
        raise InputError(f"--predict runs nothing, so {' and '.join(judged)} would judge nothing: leave it out")
    got = predict_busbw(Source(judge.replay), budget, parse_ops(list(run_args.op) or None), pred.predict_nodes)
    rates = (got.nccl_link_gbps, got.signalling_gbps)
    sizes = parse_sizes(run_args.size, run_args.step_factor) if run_args.size != SIZE_DEFAULT else ()
    if out.fmt == "json":
        env.render(lambda: env.emit_json(prediction_doc(got.predictions, *rates, sizes)))
    else:
        env.render(lambda: env.emit("\n".join(fit(prediction_lines(got.predictions, *rates, sizes), text_width()))))
    return DONE.exit_code


def sweep(what: CollectivesRun, algo: str | None, scaling: bool, fmt: str, budget: Budget, env: Env) -> int:
    """``--algo`` / ``--scaling``: several runs, compared; exit 1 when a run failed or a group of
    GPUs is slow against its peers, else 0. Under a launcher, rank 0 reports for the world."""
    out = run_sweeps(what, algo, scaling, budget)
    if out is None:
        return DONE.exit_code  # not rank 0: the world leaves with rank 0's code (service/world.py)
    doc: dict[str, Any] = {}
    lines: list[str] = []
    if out.algorithms is not None:
        if what.plan.backend != "nccl":
            lines.append("# gloo: NCCL_ALGO has no effect here; the runs exercise the sweep, not NCCL")
        doc["algorithms"] = to_jsonable(out.algorithms)
        lines += algo_lines(out.algorithms)
    if out.scaling is not None:
        doc["scaling"] = to_jsonable(out.scaling)
        lines += scaling_lines(out.scaling)
    if fmt == "json":
        env.render(lambda: env.emit_json(doc))
    else:
        env.render(lambda: env.emit("\n".join(fit(lines, text_width()))))
    return out.exit_code
