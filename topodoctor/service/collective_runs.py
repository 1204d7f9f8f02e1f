"""`collectives` as the service runs it: judge saved results, spawn one rank per GPU, or join a
launcher's world (torchrun, srun), all under the command's one budget (counted from its start,
the probe forked and killable like check's), ending in one outcome with its exit code."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from topodoctor.core import decode, fileio
from topodoctor.core.budget import Budget
from topodoctor.core.errors import EXIT_UNHEALTHY, InputError, ProbeUnavailable, TopodoctorError
from topodoctor.core.guarded import bounded
from topodoctor.core.sizes import parse_size, parse_sizes
from topodoctor.evidence import inputs as evidence
from topodoctor.evidence.results import collectives_result
from topodoctor.measure.collectives.guard import RankStopped
from topodoctor.measure.collectives.launch import join, measure
from topodoctor.measure.collectives.nodes import NodeSettings, node_name
from topodoctor.measure.collectives.world import World, from_env
from topodoctor.model.collective_ops import Plan, parse_ops
from topodoctor.model.collectives import CollectivesResult, load_result, merge
from topodoctor.model.copies import load_result as load_bw
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding, Severity
from topodoctor.model.outcome import CommandOutcome
from topodoctor.model.pairwise import check_launch as judge_launch
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.during import watch
from topodoctor.probe.sources import live_nvml
from topodoctor.service import check as doctor
from topodoctor.service.collectives import gpu_activity, judge, visible_gpus
from topodoctor.service.request_collectives import CollectivesRequest
from topodoctor.service.stamping import stamp

MAX_SAVED_BYTES = 64 << 20  # nccl-tests' text of a long sweep with NCCL's INFO lines; more is refused


class RankDone(TopodoctorError):
    """This rank stopped on a failure (its own or a peer's); rank 0 reports the run."""

    exit_code = EXIT_UNHEALTHY


@dataclass(frozen=True)
class CollectivesRun:
    """What to run (or judge) and against which host: what a request asks for (``run_of``), made
    into the plan the ranks run and the settings every rank of a multi-node run reads."""

    plan: Plan
    source: doctor.Source = field(default_factory=doctor.Source)
    nprocs: int | None = None
    start_timeout_s: float = 120.0
    spawn: bool = False  # start local ranks even under a launcher
    log_dir: Path | None = None
    nodes: NodeSettings | None = None
    from_files: tuple[Path, ...] = ()
    bandwidth_file: Path | None = None
    expect_busbw: float | None = None
    fail_level: Severity = "error"
    progress: Callable[[str], None] | None = None


@dataclass(frozen=True)
class CollectivesOutcome(CommandOutcome):
    """A run's result, the host it was judged against, and the findings."""

    result: CollectivesResult
    snapshot: HostSnapshot | None
    findings: tuple[Finding, ...]
    fail_level: Severity = "error"
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()


def node_settings(
    *,
    pairwise: bool,
    expect_nodes: str | None,
    pair_size: str,
    tolerance: float,
    timeout_s: float,
    expected_gbps: float | None,
    nic_loopback: bool = False,
) -> NodeSettings:
    """The options that reach every rank of a multi-node run."""
    names = tuple(dict.fromkeys(n.strip() for n in (expect_nodes or "").split(",") if n.strip()))
    return NodeSettings(
        pairwise=pairwise,
        expect_nodes=names,
        pair_size_bytes=parse_size(pair_size),
        pair_timeout_s=timeout_s,
        tolerance=tolerance,
        expected_gbps=expected_gbps,
        nic_loopback=nic_loopback,
    )


def run_of(
    request: CollectivesRequest,
    source: doctor.Source | None = None,
    progress: Callable[[str], None] | None = None,
) -> CollectivesRun:
    """What ``request`` runs (or judges) and against which host: its own (``--replay``), or
    ``source`` (the Python API's scanned host); ``progress`` told of each step, where it shows."""
    what, limits, judged, nodes = request.run, request.limits, request.judge, request.nodes
    plan = Plan(
        ops=parse_ops(list(what.op) or None),
        sizes=parse_sizes(what.size, what.step_factor),
        iters=what.iters,
        warmup_iters=what.warmup,
        check=not what.no_check,
        op_timeout_s=limits.op_timeout,
        backend=what.backend,  # type: ignore[arg-type]
    )
    across = node_settings(
        pairwise=nodes.pairwise,
        expect_nodes=nodes.expect_nodes,
        pair_size=nodes.pair_size,
        tolerance=nodes.pair_tolerance,
        timeout_s=nodes.pair_timeout,
        expected_gbps=nodes.expect_pair_busbw,
        nic_loopback=nodes.nic_loopback,
    )
    return CollectivesRun(
        plan,
        source or doctor.Source(judged.replay),
        nprocs=what.nprocs,
        start_timeout_s=limits.start_timeout,
        spawn=nodes.spawn,
        log_dir=request.out.log_dir,
        nodes=None if judged.from_file else across,
        from_files=judged.from_file,
        bandwidth_file=judged.bandwidth_file,
        expect_busbw=judged.expect_busbw,
        progress=progress,
        fail_level=request.fails_from,
    )


def check_launch(world: World | None, settings: NodeSettings) -> None:
    """A process that should be one of several nodes but sits in a world of one: the launch
    never handed it a world (nccl-tests' classic trap, "busbw 0"). A launch error, never a
    slow node: exit 2 with the cause."""
    many = len(settings.expect_nodes) > 1
    if world is None and not many:
        return  # started on its own: topodoctor spawns the ranks of this node
    if (world is not None and world.world_size > 1) or not (many or settings.pairwise):
        return
    err = judge_launch(max(len(settings.expect_nodes), 2), {node_name(): 1})
    if err is not None:
        raise InputError(f"launch error: {err.cause} on {node_name()}; {err.fix}")


def run_collectives(run: CollectivesRun, budget: Budget) -> CollectivesOutcome | None:
    """Measure (or judge saved results) and judge; None on a rank of a launched world other than
    rank 0, which reports for the world."""
    bw = None
    if run.bandwidth_file is not None:
        bw = load_bw(run.bandwidth_file)
    if run.from_files:
        res = merge([_saved(p, budget) for p in run.from_files])
        snap = res.snapshot if run.source.live and res.snapshot is not None else _snapshot(run.source, budget, False)
    else:
        started_at = time.time()
        nodes = run.nodes or node_settings(
            pairwise=False, expect_nodes=None, pair_size="64M", tolerance=0.1, timeout_s=20.0, expected_gbps=None
        )
        world = None if run.spawn else from_env()
        check_launch(world, nodes)
        if world is not None:
            joined = _join(run, world, nodes, budget)
            if joined is None:
                return None  # not rank 0: rank 0 reports for the world
            res, snap = joined
        else:
            res, snap = _spawn(run, budget)
        res = stamp(res, snap, started_at)
    findings = tuple(judge(res, snap, bw, run.expect_busbw))
    return CollectivesOutcome(res, snap, findings, run.fail_level)


def _saved(path: Path, budget: Budget) -> CollectivesResult:
    """A saved result: topodoctor's JSON or nccl-tests' ``-J`` JSON, or nccl-tests' text output (read by
    the evidence readers, NCCL's INFO lines in it included), the reading bounded by the budget."""
    left = budget.left() if budget.limited else fileio.DEFAULT_TIMEOUT_S
    data = fileio.read_bytes(path, "collectives result", MAX_SAVED_BYTES, left)
    found = decode.texts(data, fileio.shown(path), MAX_SAVED_BYTES)
    if len(found) == 1 and decode.json_like(found[0].text):
        return load_result(path)  # JSON: the strict reader's words say what is wrong with it
    for t in found:
        if t.why or not t.text.strip():
            raise InputError(f"collectives result {t.name} is {t.why or 'empty'}")

    def read_all() -> Evidence:
        reads: list[evidence.Read] = []
        for t in found:  # each member's pieces numbered after the ones before
            reads.append(evidence.read_input(t.name, t.text, sum(len(r.pieces) for r in reads)))
        return evidence.join(reads)

    ev = bounded(budget, f"reading {fileio.shown(path)}", read_all)
    return collectives_result(ev, f"collectives result {path}")


def _snapshot(source: doctor.Source, budget: Budget, required: bool) -> HostSnapshot | None:
    """The host the run is judged against, probed in a killable child under the budget."""
    try:
        return doctor.probe(source, budget).snapshot
    except ProbeUnavailable:
        if required:
            raise
        return None


def _deadline(budget: Budget) -> float | None:
    return budget.deadline if budget.limited else None


def _spawn(run: CollectivesRun, budget: Budget) -> tuple[CollectivesResult, HostSnapshot | None]:

    plan = run.plan
    gpu = plan.backend == "nccl"
    snap = _snapshot(run.source, budget, gpu and run.nprocs is None)
    n = run.nprocs or (visible_gpus(snap) if gpu else 2)
    if run.nprocs == 1:
        raise InputError("--nprocs must be at least 2: a collective needs two ranks")
    if gpu and n < 2:
        raise ProbeUnavailable(f"collectives need at least 2 GPUs; {n} visible (CUDA_VISIBLE_DEVICES?)")
    acts: tuple[Any, ...] = ()
    nvml = None
    if gpu and run.source.live and snap is not None:
        nvml = live_nvml()
        acts = gpu_activity(snap, nvml)
    with watch(nvml, snap) as during:  # NVML on a thread while the ranks run
        res = measure(
            plan,
            n,
            snapshot=snap,
            activity=acts,
            deadline=_deadline(budget),
            start_timeout_s=run.start_timeout_s,
            progress=run.progress,
            log_dir=str(_made(run.log_dir)) if run.log_dir else None,
        )
    return during.attach(res), snap


def _join(
    run: CollectivesRun, world: World, nodes: NodeSettings, budget: Budget
) -> tuple[CollectivesResult, HostSnapshot | None] | None:

    # Rank 0 takes the host's snapshot before it joins, not after: once the ranks are done, a
    # launcher may end the world at any moment (torchrun's agents do when a node leaves), and
    # the report must be out by then. Only torch-free work is left after the run.
    snap = _snapshot(run.source, budget, False) if world.rank == 0 else None
    try:
        res = join(run.plan, world, str(_made(run.log_dir)) if run.log_dir else None, nodes, _deadline(budget))
    except ModuleNotFoundError as exc:
        raise TopodoctorError(f"{exc.name} is not installed: pip install 'topodoctor[bandwidth]'") from None
    except RankStopped as exc:
        raise RankDone(f"rank {world.rank} stopped: {exc}; rank 0 reports the run") from None
    if res is None:
        return None
    return replace(res, snapshot=snap), snap


def _made(d: Path) -> Path:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {d}: {exc.strerror or exc}") from None
    return d
