"""`topodoctor collectives`: NCCL collectives through torch.distributed, measured as nccl-tests
measures them and judged against the topology. Registered on the main app by ``register``.

Started on its own it spawns one rank per GPU; started by torchrun or srun (RANK / WORLD_SIZE
or SLURM_PROCID / SLURM_NTASKS in the environment) each process joins that world as one rank
and rank 0 reports.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from topodoctor.cli.options import (
    FailLevel,
    FailLevelOpt,
    MeasureFormat,
    MetricsOpt,
    ReplayOpt,
    StrictOpt,
    TimeoutOpt,
)
from topodoctor.cli.options import fail_level as severity_to_fail

SIZE_DEFAULT = "8:1G"


class Backend(str, Enum):
    """The process group backends ``collectives --backend`` takes: nccl on GPUs, gloo on CPU."""

    nccl = "nccl"
    gloo = "gloo"


def collectives(
    op: Annotated[
        list[str] | None,
        typer.Option(
            "--op",
            metavar="OPS",
            help="Ops to run (repeatable or comma-separated): all_reduce, all_gather, "
            "reduce_scatter, all_to_all, broadcast, reduce, sendrecv. Default: all.",
        ),
    ] = None,
    size: Annotated[
        str,
        typer.Option(
            "--size",
            "-s",
            metavar="SIZES",
            help="Sizes: a sweep MIN:MAX (by --step-factor), a list, or both: 8:1G, 64M,1G.",
        ),
    ] = SIZE_DEFAULT,
    step_factor: Annotated[int, typer.Option("--step-factor", metavar="N", help="Sweep step factor.", min=2)] = 2,
    iters: Annotated[int, typer.Option("--iters", "-n", metavar="N", help="Timed iterations per row.", min=1)] = 20,
    warmup: Annotated[int, typer.Option("--warmup", "-w", metavar="N", help="Warm-up iterations per size.", min=0)] = 1,
    no_check: Annotated[bool, typer.Option("--no-check", help="Skip the data check (#wrong).")] = False,
    nprocs: Annotated[
        int | None,
        typer.Option(
            "--nprocs", metavar="N", help="Local ranks to start (default: every visible GPU; 2 on gloo).", min=1
        ),
    ] = None,
    backend: Annotated[
        Backend, typer.Option("--backend", metavar="BACKEND", help="nccl on GPUs; gloo runs the ranks on CPU.")
    ] = Backend.nccl,
    op_timeout: Annotated[
        float,
        typer.Option(
            "--op-timeout",
            metavar="SECONDS",
            help="Seconds one op at one size may take before it counts as hung.",
            min=1,
        ),
    ] = 30.0,
    start_timeout: Annotated[
        float,
        typer.Option("--start-timeout", metavar="SECONDS", help="Seconds for every rank to start and join.", min=1),
    ] = 120.0,
    timeout: TimeoutOpt = 0,
    spawn: Annotated[bool, typer.Option("--spawn", help="Start local ranks even under torchrun / srun.")] = False,
    from_file: Annotated[
        list[Path] | None,
        typer.Option(
            "--from",
            metavar="FILE",
            help="Judge saved results instead of measuring: ours, or nccl-tests' -J JSON "
            "(repeatable: one file per op).",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Also save the result as JSON.")
    ] = None,
    bandwidth_file: Annotated[
        Path | None,
        typer.Option(
            "--bandwidth", metavar="FILE", help="A bandwidth result of this host: busbw is judged against it."
        ),
    ] = None,
    expect_busbw: Annotated[
        float | None,
        typer.Option("--expect-busbw", metavar="GBPS", help="GB/s every op should reach at its largest size.", min=0),
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option("--log-dir", metavar="DIR", help="Keep NCCL's per-rank INFO logs (and each rank's stderr) here."),
    ] = None,
    replay: ReplayOpt = None,
    fmt: Annotated[
        MeasureFormat,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help="text (nccl-tests' table), json, or prometheus (textfile collector).",
        ),
    ] = MeasureFormat.text,
    metrics_file: MetricsOpt = None,
    fail_level: FailLevelOpt = FailLevel.error,
    strict: StrictOpt = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", metavar="FILE", help="Also draw busbw by size per op: .svg, or .png with the draw extra (resvg)."
        ),
    ] = None,
    pairwise: Annotated[
        bool, typer.Option("--pairwise", help="Across nodes: test the nodes in pairs and name a slow or stuck node.")
    ] = False,
    expect_nodes: Annotated[
        str | None,
        typer.Option(
            "--expect-nodes",
            metavar="NODES",
            help="Nodes that should join (comma-separated): a missing one is named.",
        ),
    ] = None,
    pair_size: Annotated[
        str, typer.Option("--pair-size", metavar="SIZE", help="all_reduce size of each pair test.")
    ] = "64M",
    pair_tolerance: Annotated[
        float,
        typer.Option(
            "--pair-tolerance",
            metavar="SHARE",
            help="A pair below (1 - this) of the reference is slow.",
            min=0,
            max=1,
        ),
    ] = 0.1,
    pair_timeout: Annotated[
        float,
        typer.Option(
            "--pair-timeout",
            metavar="SECONDS",
            help="Seconds one pair test may take before it counts as hung.",
            min=1,
        ),
    ] = 20.0,
    nic_loopback: Annotated[
        bool,
        typer.Option(
            "--nic-loopback", help="Under a launcher: also each node's GPUs through its own NICs (P2P and SHM off)."
        ),
    ] = False,
    expect_pair_busbw: Annotated[
        float | None,
        typer.Option("--expect-pair-busbw", metavar="GBPS", help="GB/s a healthy pair of nodes reaches.", min=0),
    ] = None,
    predict: Annotated[
        bool,
        typer.Option(
            "--predict", help="Run nothing: the busbw the topology gives each op at 1 GiB (no GPU, no torch)."
        ),
    ] = False,
    predict_nodes: Annotated[
        int,
        typer.Option("--nodes", metavar="N", help="With --predict: that many such nodes, joined by their NICs.", min=1),
    ] = 1,
    algo: Annotated[
        str | None,
        typer.Option(
            "--algo",
            metavar="ALGOS",
            help="Each op under each of these NCCL algorithms (NCCL_ALGO per run: ring,tree,nvls,pat,...), "
            "beside NCCL's own choice; crossovers named.",
        ),
    ] = None,
    scaling: Annotated[
        bool,
        typer.Option(
            "--scaling",
            help="The ops on 2, 4, ... N GPUs (nearest GPUs grouped first); under a launcher, on groups of its ranks.",
        ),
    ] = False,
    latency: Annotated[
        bool,
        typer.Option(
            "--latency",
            help="Small messages through each path between the GPUs: NCCL eager and in a CUDA graph, PyTorch "
            "symmetric memory, NVSHMEM (the nvshmem extra); p2p 1K,100K and all_reduce 1K,1M,100M, each path's "
            "speedup over eager NCCL, and the size where NCCL catches up.",
        ),
    ] = False,
) -> None:
    """Time NCCL collectives as nccl-tests does (busbw, #wrong) and explain them: NCCL's transports and
    channels, judged against the topology (TD0xx)."""
    from topodoctor.cli.options import budget, source
    from topodoctor.model.collective_ops import Plan, parse_ops, parse_sizes

    if predict:
        _predict(parse_ops(op), source(replay), budget(timeout), predict_nodes, fmt)

    if plot is not None:  # a bad picture path is refused before anything is measured
        from topodoctor.cli.pictures import check_picture_path

        check_picture_path(plot)
    plan = Plan(
        ops=parse_ops(op),
        sizes=parse_sizes(size, step_factor),
        iters=iters,
        warmup_iters=warmup,
        check=not no_check,
        op_timeout_s=op_timeout,
        backend=backend.value,
    )
    from topodoctor.service.collective_runs import CollectivesRun, node_settings, run_collectives

    tty = sys.stderr.isatty()

    def progress(what: str) -> None:
        sys.stderr.write(f"\r\033[K{what}")
        sys.stderr.flush()

    nodes = None
    if not from_file:
        nodes = node_settings(
            pairwise, expect_nodes, pair_size, pair_tolerance, pair_timeout, expect_pair_busbw, nic_loopback
        )
    run = CollectivesRun(
        plan,
        source(replay),
        nprocs=nprocs,
        start_timeout_s=start_timeout,
        spawn=spawn,
        log_dir=log_dir,
        nodes=nodes,
        from_files=tuple(from_file or ()),
        bandwidth_file=bandwidth_file,
        expect_busbw=expect_busbw,
        progress=progress if tty else None,
        fail_level=severity_to_fail(fail_level, strict),
    )
    if latency:  # the small-message paths: cli/collectives_latency.py
        from topodoctor.cli.collectives_latency import latency_mode

        others = bool(algo or scaling or from_file or pairwise or plot)
        latency_mode(run, size if size != SIZE_DEFAULT else None, fmt, output, budget(timeout), others)
    if algo is not None or scaling:
        _sweep(run, algo, scaling, budget(timeout), fmt)
    out = run_collectives(run, budget(timeout))
    if tty and not from_file:
        sys.stderr.write("\r\033[K")
    if out is None:
        return  # not rank 0: rank 0 reports for the world
    res, snap, findings = out.result, out.snapshot, list(out.findings)
    from topodoctor.cli.io import Outputs, render

    outputs = Outputs()
    if output is not None:
        from topodoctor.core.fileio import write_atomic
        from topodoctor.model.collectives import result_to_json

        outputs.write(lambda: write_atomic(output, result_to_json(res), "collectives result"))
    if plot is not None:
        from topodoctor.cli.pictures import draw_collectives
        from topodoctor.report.collectives import model_busbw

        expected, source_of = model_busbw(res, snap or res.snapshot), "the topology model's busbw at 1 GiB"
        if expect_busbw is not None:
            expected, source_of = {str(row.op): expect_busbw for row in res.rows}, "--expect-busbw"
        outputs.write(lambda: draw_collectives(res, plot, expected, expected_from=source_of))
    from topodoctor.report.collectives import collectives_json, text_report

    if metrics_file is not None or fmt is MeasureFormat.prometheus:
        from topodoctor.cli.nodes import emit_metrics

        emit_metrics(res, findings, metrics_file, outputs, stdout=fmt is MeasureFormat.prometheus)
    if fmt is MeasureFormat.json:
        from topodoctor.cli.io import emit_json

        doc = collectives_json(res, findings)
        render(lambda: emit_json(doc))
    elif fmt is MeasureFormat.text:
        from topodoctor.core.text import printable
        from topodoctor.report.collectives import fit, text_width
        from topodoctor.report.collectives_nodes import node_lines

        # a host or GPU name never acts on the terminal
        width = text_width()
        lines = [printable(line) for line in fit([*text_report(res, findings, snap, width), *node_lines(res)], width)]
        render(lambda: sys.stdout.write("".join(f"{line}\n" for line in lines)))
        if snap is None and res.snapshot is None:
            typer.echo("(no host snapshot: busbw and transports not judged; pass --replay NAME|FILE)", err=True)
    raise typer.Exit(outputs.exit_code(out.exit_code))


def _predict(ops: tuple[str, ...], where: Any, within: Any, nodes: int, fmt: MeasureFormat) -> None:
    """``--predict``: the model's busbw per op for this host (or a recording), then exit 0."""
    from topodoctor.cli.io import emit, emit_json, render
    from topodoctor.report.collectives import fit, prediction_doc, prediction_lines, text_width
    from topodoctor.service.collective_sweeps import predict_busbw

    got = predict_busbw(where, within, ops, nodes)
    rates = (got.nccl_link_gbps, got.signalling_gbps)
    if fmt is MeasureFormat.json:
        render(lambda: emit_json(prediction_doc(got.predictions, *rates)))
    else:
        render(lambda: emit("\n".join(fit(prediction_lines(got.predictions, *rates), text_width()))))
    raise typer.Exit(0)


def _sweep(run: Any, algo: str | None, scaling: bool, within: Any, fmt: MeasureFormat) -> None:
    """``--algo`` / ``--scaling``: several runs, compared; exit 1 when a run failed or a group of
    GPUs is slow against its peers, else 0. Under a launcher, rank 0 reports for the world."""
    from topodoctor.cli.io import emit, emit_json, render
    from topodoctor.core.codec import to_jsonable
    from topodoctor.report.collectives_sweeps import algo_lines, scaling_lines
    from topodoctor.service.collective_sweeps import run_sweeps

    out = run_sweeps(run, algo, scaling, within)
    if out is None:
        raise typer.Exit(0)  # not rank 0: the world leaves with rank 0's code (service/world.py)
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
    if fmt is MeasureFormat.json:
        render(lambda: emit_json(doc))
    else:
        from topodoctor.report.collectives import fit, text_width

        render(lambda: emit("\n".join(fit(lines, text_width()))))
    raise typer.Exit(out.exit_code)


# The help lists the options by what a person is doing: the rest under "Options".
OPTION_GROUPS = {
    "What to run": ("op", "size", "step_factor", "iters", "warmup", "no_check", "backend", "nprocs"),
    "Time limits": ("op_timeout", "start_timeout", "timeout"),
    "Judge saved results, or predict": (
        "from_file",
        "replay",
        "bandwidth_file",
        "expect_busbw",
        "predict",
        "predict_nodes",
    ),
    "Compare algorithms and GPU counts": ("algo", "scaling"),
    "Small messages": ("latency",),
    "Across nodes (under torchrun or srun)": (
        "spawn",
        "pairwise",
        "expect_nodes",
        "pair_size",
        "pair_tolerance",
        "pair_timeout",
        "nic_loopback",
        "expect_pair_busbw",
    ),
    "Output and verdict": ("fmt", "output", "plot", "metrics_file", "log_dir", "fail_level", "strict"),
}


def register(app: typer.Typer) -> None:
    """Add the command to the main app (called from cli.py)."""
    from topodoctor.cli.io import EXITS, reports_errors
    from topodoctor.cli.options import grouped

    app.command("collectives", epilog=EXITS["collectives"], cls=grouped(OPTION_GROUPS))(reports_errors(collectives))
