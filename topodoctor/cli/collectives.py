"""`topodoctor collectives`: NCCL collectives through torch.distributed, measured as nccl-tests
measures them and judged against the topology.

Started on its own it spawns one rank per GPU; started by torchrun or srun (RANK / WORLD_SIZE
or SLURM_PROCID / SLURM_NTASKS in the environment) each process joins that world as one rank
and rank 0 reports.
"""

from __future__ import annotations

from typing import Any

from topodoctor.cli.args_measure import CollectivesArgs
from topodoctor.cli.io import Env, Outputs
from topodoctor.cli.nodes import emit_metrics
from topodoctor.cli.pictures import check_picture_path, draw_collectives
from topodoctor.core.budget import Budget
from topodoctor.core.codec import to_jsonable
from topodoctor.core.fileio import write_atomic
from topodoctor.core.text import printable
from topodoctor.model.collective_ops import Plan, parse_ops, parse_sizes
from topodoctor.model.collectives import result_to_json
from topodoctor.model.findings import fail_from
from topodoctor.model.outcome import DONE
from topodoctor.report.collectives import collectives_json, prediction_doc, prediction_lines, text_report
from topodoctor.report.collectives_nodes import node_lines
from topodoctor.report.collectives_sweeps import algo_lines, scaling_lines
from topodoctor.service.collective_runs import CollectivesRun, node_settings
from topodoctor.service.collective_runs import run_collectives as collect
from topodoctor.service.collective_sweeps import predict_busbw, run_sweeps
from topodoctor.service.passes import Source


def run_collectives(args: CollectivesArgs, env: Env) -> int:
    """Measure (spawned ranks, or a launcher's world), judge saved results, predict, or compare
    algorithms and GPU counts; print and write what came out."""
    run_, limits, judge, pred, sweep, nodes_, out_ = (
        args.run,
        args.limits,
        args.judge,
        args.predict,
        args.sweep,
        args.nodes,
        args.out,
    )
    op, size, step_factor, iters, warmup = list(run_.op) or None, run_.size, run_.step_factor, run_.iters, run_.warmup
    no_check, nprocs, backend = run_.no_check, run_.nprocs, run_.backend
    op_timeout, start_timeout, timeout = limits.op_timeout, limits.start_timeout, limits.timeout
    from_file, replay = judge.from_file, judge.replay
    bandwidth_file, expect_busbw = judge.bandwidth_file, judge.expect_busbw
    predict, predict_nodes = pred.predict, pred.predict_nodes
    algo, scaling = sweep.algo, sweep.scaling
    spawn, pairwise, expect_nodes, pair_size = nodes_.spawn, nodes_.pairwise, nodes_.expect_nodes, nodes_.pair_size
    pair_tolerance, pair_timeout, nic_loopback = nodes_.pair_tolerance, nodes_.pair_timeout, nodes_.nic_loopback
    expect_pair_busbw = nodes_.expect_pair_busbw
    fmt, output, plot, metrics_file, log_dir = out_.fmt, out_.output, out_.plot, out_.metrics_file, out_.log_dir
    fail_level, strict = out_.fail_level, out_.strict

    if predict:
        return _predict(parse_ops(op), Source(replay), Budget.start(timeout), predict_nodes, fmt, env)

    if plot is not None:  # a bad picture path is refused before anything is measured
        check_picture_path(plot)
    plan = Plan(
        ops=parse_ops(op),
        sizes=parse_sizes(size, step_factor),
        iters=iters,
        warmup_iters=warmup,
        check=not no_check,
        op_timeout_s=op_timeout,
        backend=backend,  # type: ignore[arg-type]
    )

    tty = env.stderr.isatty()

    def progress(what: str) -> None:
        env.stderr.write(f"\r\033[K{what}")
        env.stderr.flush()

    nodes = None
    if not from_file:
        nodes = node_settings(
            pairwise, expect_nodes, pair_size, pair_tolerance, pair_timeout, expect_pair_busbw, nic_loopback
        )
    run = CollectivesRun(
        plan,
        Source(replay),
        nprocs=nprocs,
        start_timeout_s=start_timeout,
        spawn=spawn,
        log_dir=log_dir,
        nodes=nodes,
        from_files=tuple(from_file or ()),
        bandwidth_file=bandwidth_file,
        expect_busbw=expect_busbw,
        progress=progress if tty else None,
        fail_level=fail_from(fail_level, strict),
    )
    if algo is not None or scaling:
        return _sweep(run, algo, scaling, Budget.start(timeout), fmt, env)
    out = collect(run, Budget.start(timeout))
    if tty and not from_file:
        env.stderr.write("\r\033[K")
    if out is None:
        return DONE.exit_code  # not rank 0: rank 0 reports for the world
    res, snap, findings = out.result, out.snapshot, list(out.findings)

    outputs = Outputs(env)
    if output is not None:
        outputs.write(lambda: write_atomic(output, result_to_json(res), "collectives result"))
    if plot is not None:
        expected = {str(row.op): expect_busbw for row in res.rows} if expect_busbw is not None else None
        outputs.write(lambda: draw_collectives(res, plot, expected))

    if metrics_file is not None or fmt == "prometheus":
        emit_metrics(out, metrics_file, outputs, stdout=fmt == "prometheus")
    if fmt == "json":
        doc = collectives_json(res, findings)
        env.render(lambda: env.emit_json(doc))
    elif fmt == "text":
        # a host or GPU name never acts on the terminal
        lines = [printable(line) for line in [*text_report(res, findings, snap), *node_lines(res)]]
        env.write("".join(f"{line}\n" for line in lines))
        if snap is None and res.snapshot is None:
            env.say("(no host snapshot: busbw and transports not judged; pass --replay NAME|FILE)")
    return outputs.exit_code(out)


def _predict(ops: tuple[str, ...], where: Any, within: Any, nodes: int, fmt: str, env: Env) -> int:
    """``--predict``: the model's busbw per op for this host (or a recording), then exit 0."""
    preds = predict_busbw(where, within, ops, nodes)
    if fmt == "json":
        env.render(lambda: env.emit_json(prediction_doc(preds)))
    else:
        env.render(lambda: env.emit("\n".join(prediction_lines(preds))))
    return DONE.exit_code


def _sweep(run: Any, algo: str | None, scaling: bool, within: Any, fmt: str, env: Env) -> int:
    """``--algo`` / ``--scaling``: several runs, compared; exit 1 when a run failed or a group of
    GPUs is slow against its peers, else 0. Under a launcher, rank 0 reports for the world."""
    out = run_sweeps(run, algo, scaling, within)
    if out is None:
        return DONE.exit_code  # not rank 0: the world leaves with rank 0's code (service/world.py)
    doc: dict[str, Any] = {}
    lines: list[str] = []
    if out.algorithms is not None:
        if run.plan.backend != "nccl":
            lines.append("# gloo: NCCL_ALGO has no effect here; the runs exercise the sweep, not NCCL")
        doc["algorithms"] = to_jsonable(out.algorithms)
        lines += algo_lines(out.algorithms)
    if out.scaling is not None:
        doc["scaling"] = to_jsonable(out.scaling)
        lines += scaling_lines(out.scaling)
    if fmt == "json":
        env.render(lambda: env.emit_json(doc))
    else:
        env.render(lambda: env.emit("\n".join(lines)))
    return out.exit_code
