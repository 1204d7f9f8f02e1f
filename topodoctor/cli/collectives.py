"""`topodoctor collectives`: NCCL collectives through torch.distributed, measured as nccl-tests
measures them and judged against the topology. Registered on the main app by ``register``.

Started on its own it spawns one rank per GPU; started by torchrun or srun (RANK / WORLD_SIZE
or SLURM_PROCID / SLURM_NTASKS in the environment) each process joins that world as one rank
and rank 0 reports.
"""

from __future__ import annotations

import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from topodoctor.core.errors import InputError, ProbeUnavailable, TopodoctorError


class Backend(str, Enum):
    nccl = "nccl"
    gloo = "gloo"


class Fmt(str, Enum):
    text = "text"
    json = "json"
    prometheus = "prometheus"


def _snapshot(replay: str | None, required: bool) -> Any:
    from topodoctor.probe import probe_host

    try:
        return probe_host(replay).snapshot
    except ProbeUnavailable:
        if required:
            raise
        return None


def collectives(
    op: Annotated[
        list[str] | None,
        typer.Option(
            "--op",
            help="Ops to run (repeatable or comma-separated): all_reduce, all_gather, "
            "reduce_scatter, all_to_all, broadcast, reduce, sendrecv. Default: all.",
        ),
    ] = None,
    size: Annotated[
        str,
        typer.Option("--size", "-s", help="Sizes: a sweep MIN:MAX (by --step-factor), a list, or both: 8:1G, 64M,1G."),
    ] = "8:1G",
    step_factor: Annotated[int, typer.Option("--step-factor", "-f", help="Sweep step factor.", min=2)] = 2,
    iters: Annotated[int, typer.Option("--iters", "-n", help="Timed iterations per row.", min=1)] = 20,
    warmup: Annotated[int, typer.Option("--warmup", "-w", help="Warm-up iterations per size.", min=0)] = 1,
    no_check: Annotated[bool, typer.Option("--no-check", help="Skip the data check (#wrong).")] = False,
    nprocs: Annotated[
        int | None,
        typer.Option("--nprocs", help="Local ranks to start (default: every visible GPU; 2 on gloo).", min=1),
    ] = None,
    backend: Annotated[Backend, typer.Option("--backend", help="nccl on GPUs; gloo runs the ranks on CPU.")] = (
        Backend.nccl
    ),
    op_timeout: Annotated[
        float, typer.Option("--op-timeout", help="Seconds one op at one size may take before it counts as hung.", min=1)
    ] = 30.0,
    start_timeout: Annotated[
        float, typer.Option("--start-timeout", help="Seconds for every rank to start and join.", min=1)
    ] = 120.0,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Budget for the whole run, seconds; 0 = none.", min=0)
    ] = 0,
    spawn: Annotated[bool, typer.Option("--spawn", help="Start local ranks even under torchrun / srun.")] = False,
    from_file: Annotated[
        list[Path] | None,
        typer.Option(
            "--from",
            help="Judge saved results instead of measuring: ours, or nccl-tests' -J JSON "
            "(repeatable: one file per op).",
        ),
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also save the result as JSON.")] = None,
    bandwidth_file: Annotated[
        Path | None, typer.Option("--bandwidth", help="A bandwidth result of this host: busbw is judged against it.")
    ] = None,
    expect_busbw: Annotated[
        float | None, typer.Option("--expect-busbw", help="GB/s every op should reach at its largest size.", min=0)
    ] = None,
    log_dir: Annotated[
        Path | None, typer.Option("--log-dir", help="Keep NCCL's per-rank INFO logs (and each rank's stderr) here.")
    ] = None,
    replay: Annotated[
        str | None, typer.Option("--replay", metavar="FILE|NAME", help="The host to judge against, from a recording.")
    ] = None,
    fmt: Annotated[
        Fmt, typer.Option("--format", help="text (nccl-tests' table), json, or prometheus (textfile collector).")
    ] = Fmt.text,
    metrics_file: Annotated[
        Path | None,
        typer.Option(
            "--metrics",
            metavar="FILE",
            help="Also write Prometheus metrics to FILE, atomically (node_exporter's textfile collector).",
        ),
    ] = None,
    pairwise: Annotated[
        bool, typer.Option("--pairwise", help="Across nodes: test the nodes in pairs and name a slow or stuck node.")
    ] = False,
    expect_nodes: Annotated[
        str | None,
        typer.Option("--expect-nodes", help="Nodes that should join (comma-separated): a missing one is named."),
    ] = None,
    pair_size: Annotated[str, typer.Option("--pair-size", help="all_reduce size of each pair test.")] = "64M",
    pair_tolerance: Annotated[
        float, typer.Option("--pair-tolerance", help="A pair below (1 - this) of the reference is slow.", min=0, max=1)
    ] = 0.1,
    pair_timeout: Annotated[
        float, typer.Option("--pair-timeout", help="Seconds one pair test may take before it counts as hung.", min=1)
    ] = 20.0,
    nic_loopback: Annotated[
        bool,
        typer.Option(
            "--nic-loopback", help="Under a launcher: also each node's GPUs through its own NICs (P2P and SHM off)."
        ),
    ] = False,
    expect_pair_busbw: Annotated[
        float | None, typer.Option("--expect-pair-busbw", help="GB/s a healthy pair of nodes reaches.", min=0)
    ] = None,
) -> None:
    """Time NCCL collectives as nccl-tests does (busbw, #wrong) and explain them: NCCL's transports and
    channels, judged against the topology (TD0xx)."""
    from topodoctor.model.collective_ops import Plan, parse_ops, parse_sizes

    plan = Plan(
        ops=parse_ops(op),
        sizes=parse_sizes(size, step_factor),
        iters=iters,
        warmup_iters=warmup,
        check=not no_check,
        op_timeout_s=op_timeout,
        backend=backend.value,
    )
    bw = None
    if bandwidth_file is not None:
        from topodoctor.model.copies import load_result as load_bw

        bw = load_bw(bandwidth_file)
    if from_file:
        from topodoctor.model.collectives import load_result, merge

        res = merge([load_result(p) for p in from_file])
        snap = res.snapshot if replay is None and res.snapshot is not None else _snapshot(replay, False)
    else:
        from topodoctor.cli.nodes import node_settings
        from topodoctor.measure.collectives.world import from_env

        nodes = node_settings(
            pairwise, expect_nodes, pair_size, pair_tolerance, pair_timeout, expect_pair_busbw, nic_loopback
        )
        world = None if spawn else from_env()
        from topodoctor.cli.nodes import check_launch

        check_launch(world, nodes)
        if world is not None:
            deadline = time.monotonic() + timeout if timeout > 0 else None
            res, snap = _join(plan, world, log_dir, replay, nodes, deadline)
            if res is None:
                return  # not rank 0: rank 0 reports for the world
        else:
            res, snap = _spawn(plan, nprocs, start_timeout, timeout, replay, log_dir)
    if output is not None:
        from topodoctor.core.fileio import write_atomic
        from topodoctor.model.collectives import result_to_json

        write_atomic(output, result_to_json(res), "collectives result")
    from topodoctor.service.collectives import judge

    findings = judge(res, snap, bw, expect_busbw)
    from topodoctor.report.collectives import collectives_json, text_report

    if metrics_file is not None or fmt is Fmt.prometheus:
        from topodoctor.cli.nodes import emit_metrics

        emit_metrics(res, findings, metrics_file, stdout=fmt is Fmt.prometheus)
    if fmt is Fmt.json:
        import json

        typer.echo(json.dumps(collectives_json(res, findings), indent=1))
    elif fmt is Fmt.text:
        from topodoctor.report.collectives_nodes import node_lines

        for line in [*text_report(res, findings), *node_lines(res)]:
            typer.echo(line)
        if snap is None and res.snapshot is None:
            typer.echo("(no host snapshot: busbw and transports not judged; pass --replay NAME|FILE)", err=True)
    from topodoctor.core.errors import EXIT_OK, EXIT_UNHEALTHY
    from topodoctor.service.check import failing

    raise typer.Exit(EXIT_UNHEALTHY if failing(findings, "error") else EXIT_OK)


def _spawn(
    plan: Any, nprocs: int | None, start_timeout: float, timeout: float, replay: str | None, log_dir: Path | None
) -> Any:
    from topodoctor.measure.collectives.launch import measure
    from topodoctor.service.collectives import gpu_activity, visible_gpus

    gpu = plan.backend == "nccl"
    snap = _snapshot(replay, gpu and nprocs is None)
    n = nprocs or (visible_gpus(snap) if gpu else 2)
    if nprocs == 1:
        raise InputError("--nprocs must be at least 2: a collective needs two ranks")
    if gpu and n < 2:
        raise ProbeUnavailable(f"collectives need at least 2 GPUs; {n} visible (CUDA_VISIBLE_DEVICES?)")
    acts: tuple[Any, ...] = ()
    if gpu and replay is None and snap is not None:
        from topodoctor.probe import live_nvml

        acts = gpu_activity(snap, live_nvml())
    tty = sys.stderr.isatty()

    def progress(what: str) -> None:
        sys.stderr.write(f"\r\033[K{what}")
        sys.stderr.flush()

    deadline = time.monotonic() + timeout if timeout > 0 else None
    res = measure(
        plan,
        n,
        snapshot=snap,
        activity=acts,
        deadline=deadline,
        start_timeout_s=start_timeout,
        progress=progress if tty else None,
        log_dir=str(_made(log_dir)) if log_dir else None,
    )
    if tty:
        sys.stderr.write("\r\033[K")
    return res, snap


def _join(
    plan: Any, world: Any, log_dir: Path | None, replay: str | None, nodes: Any = None, deadline: float | None = None
) -> Any:
    from dataclasses import replace

    from topodoctor.measure.collectives.guard import RankStopped
    from topodoctor.measure.collectives.launch import join

    # Rank 0 takes the host's snapshot before it joins, not after: once the ranks are done, a
    # launcher may end the world at any moment (torchrun's agents do when a node leaves), and
    # the report must be out by then. Only torch-free work is left after the run.
    snap = _snapshot(replay, False) if world.rank == 0 else None
    try:
        res = join(plan, world, str(_made(log_dir)) if log_dir else None, nodes, deadline)
    except ModuleNotFoundError as exc:
        raise TopodoctorError(f"{exc.name} is not installed: pip install 'topodoctor[bandwidth]'") from None
    except RankStopped as exc:
        sys.stderr.write(f"topodoctor: error: rank {world.rank} stopped: {exc}; rank 0 reports the run\n")
        from topodoctor.core.errors import EXIT_UNHEALTHY

        raise typer.Exit(EXIT_UNHEALTHY) from None
    if res is None:
        return None, None
    return replace(res, snapshot=snap), snap


def _made(d: Path) -> Path:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {d}: {exc.strerror or exc}") from None
    return d


def register(app: typer.Typer) -> None:
    """Add the command to the main app (called from cli.py)."""
    from topodoctor.cli.options import reports_errors

    app.command("collectives")(reports_errors(collectives))
