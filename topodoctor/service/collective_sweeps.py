"""`collectives --predict`, `--algo` and `--scaling` as the service runs them: the topology's
expected busbw without running anything, and several runs compared (spawned worlds, or process
groups of a launcher's world), all under the command's one budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from topodoctor.core.budget import Budget
from topodoctor.core.errors import CannotMeasure, InputError, ProbeUnavailable, TopodoctorError
from topodoctor.core.text import plural
from topodoctor.measure.collectives.guard import RankStopped
from topodoctor.measure.collectives.launch import measure
from topodoctor.measure.collectives.sweep_world import join_sweeps
from topodoctor.measure.collectives.sweeps import (
    ALGO_OPS,
    AlgoSweep,
    ScalingSweep,
    algo_sweep,
    joined_runs,
    scaling_sweep,
    subsets,
)
from topodoctor.measure.collectives.world import World, from_env
from topodoctor.model.collective_ops import Plan
from topodoctor.model.outcome import CommandOutcome
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.service import check as doctor
from topodoctor.service.collective_runs import CollectivesRun, RankDone, _deadline, _made, _snapshot
from topodoctor.service.collectives import visible_gpus
from topodoctor.topology.busbw import Prediction, bottleneck, nccl_link_gbps, predict
from topodoctor.topology.graph import nvlink_link_gbps, rdma_nics


@dataclass(frozen=True)
class Predicted:
    """``--predict``'s answer: each op's busbw, and the per-link NVLink rates behind it: NCCL's
    own model of the link (what the prediction uses) and the signalling rate (what ``scan`` shows)."""

    predictions: tuple[Prediction, ...]
    nccl_link_gbps: float | None
    signalling_gbps: float | None


def predict_busbw(source: doctor.Source, budget: Budget, ops: Sequence[str], nodes: int = 1) -> Predicted:
    """The busbw the topology gives each op at 1 GiB on this host (or ``nodes`` such hosts
    joined by their NICs): no GPU and no torch, a recording will do. When there is none, the
    one reason why (CannotMeasure: exit 3)."""
    snap = _snapshot(source, budget, True)
    assert snap is not None  # required: a probe that could not run has raised
    return predict_for(snap, ops, nodes)


def predict_for(snap: HostSnapshot, ops: Sequence[str], nodes: int = 1) -> Predicted:
    """``predict_busbw`` of a host already probed; CannotMeasure (exit 3) with the one reason where its
    topology says too little."""
    preds = predict(snap, tuple(ops), nodes=nodes)
    if not preds:
        raise CannotMeasure(f"no prediction: {_why_none(snap, nodes)}")
    worst = snap.gpu(preds[0].bottleneck.gpus[0]) if preds[0].bottleneck.gpus else None
    nccl = nccl_link_gbps(worst) if worst is not None and worst.nvlinks else None
    signalled = nvlink_link_gbps(worst) if worst is not None else None
    return Predicted(preds, nccl, signalled)


def _why_none(snap: HostSnapshot, nodes: int) -> str:
    """The one cause of an empty prediction, checked in the order the model needs its inputs."""
    live = [g for g in snap.gpus if g.lost is None]
    if len(live) * nodes < 2:
        return f"{plural(len(live), 'GPU')} on this host; a collective needs 2"
    if bottleneck(snap) is None:
        return "the GPUs' NVLinks and PCIe links were not read (see check's TD901)"
    if not rdma_nics(snap):
        return (
            f"this host has no RDMA NIC (InfiniBand or RoCE) to join {nodes} nodes by; NCCL would fall back "
            "to sockets, which the model does not predict"
        )
    return "the RDMA NICs' rates or their paths to the GPUs were not read"


@dataclass(frozen=True)
class SweepOutcome(CommandOutcome):
    """Each op under each algorithm asked for, and/or on growing sets of GPUs."""

    algorithms: AlgoSweep | None
    scaling: ScalingSweep | None
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()

    @property
    def failing(self) -> tuple[object, ...]:
        """The runs that failed, and the groups of GPUs slow against their peers."""
        algos, grown = self.algorithms, self.scaling
        return (
            *(algos.failures if algos is not None else ()),
            *(grown.slow if grown is not None else ()),
            *(f for r in (grown.runs if grown is not None else ()) for f in r.failures),
        )


def run_sweeps(run: CollectivesRun, algo: str | None, scaling: bool, budget: Budget) -> SweepOutcome | None:
    """``--algo`` / ``--scaling``: several runs of ``run.plan``, compared. Started on its own:
    spawned worlds, one per run. Under a launcher: runs on process groups of the launcher's world,
    rank 0 reporting (None on the other ranks)."""
    names = _algorithms(algo) if algo is not None else None
    world = None if run.spawn else from_env()
    if world is not None:
        return _joined(run, world, names, scaling, budget)

    plan: Plan = run.plan
    gpu = plan.backend == "nccl"
    snap = _snapshot(run.source, budget, gpu and run.nprocs is None)
    n = run.nprocs or (visible_gpus(snap) if gpu else 2)
    if n < 2:
        raise ProbeUnavailable(f"collectives need at least 2 ranks; {n} to run (GPUs visible, --nprocs)")
    deadline = _deadline(budget)

    def one(p: Plan, env: dict[str, str], ranks: int = n) -> Any:
        return measure(p, ranks, snapshot=snap, deadline=deadline, start_timeout_s=run.start_timeout_s, extra_env=env)

    algos = algo_sweep(plan, names, one) if names is not None else None
    grown = None
    if scaling:

        def on(p: Plan, gpus: tuple[int, ...]) -> Any:
            env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if gpu else {}
            return one(p, env, len(gpus))

        grown = scaling_sweep(plan, subsets(snap if gpu else None, n), on)
    return _outcome(algos, grown)


def _algorithms(algo: str) -> list[str]:
    names = list(dict.fromkeys(a.strip() for a in algo.split(",") if a.strip()))
    unknown = [a for a in names if a.lower() not in ALGO_OPS]
    if unknown or not names:
        raise InputError(f"--algo: unknown algorithm {unknown[0] if unknown else algo!r} ({', '.join(ALGO_OPS)})")
    return names


def _outcome(algos: AlgoSweep | None, grown: ScalingSweep | None) -> SweepOutcome:
    return SweepOutcome(algos, grown)


def _joined(
    run: CollectivesRun, world: World, names: list[str] | None, scaling: bool, budget: Budget
) -> SweepOutcome | None:
    """The sweeps inside a launcher's world: each run a process group of it (NCCL_ALGO set while
    its communicator is made; groups of 2, 4, ... consecutive ranks for scaling)."""
    nodes = run.nodes
    if nodes is not None and (nodes.pairwise or nodes.nic_loopback):
        raise InputError("--algo and --scaling do not combine with --pairwise or --nic-loopback")
    if world.world_size < 2:
        raise InputError(f"--algo and --scaling need a world of 2 ranks or more; the launcher made {world.world_size}")
    runs = joined_runs(run.plan, names, scaling, world.world_size)
    log_dir = str(_made(run.log_dir)) if run.log_dir else None
    try:
        results = join_sweeps(run.plan, runs, world, log_dir, _deadline(budget))
    except ModuleNotFoundError as exc:
        raise TopodoctorError(f"{exc.name} is not installed: pip install 'topodoctor[bandwidth]'") from None
    except RankStopped as exc:
        raise RankDone(f"rank {world.rank} stopped: {exc}; rank 0 reports the run") from None
    if results is None:
        return None
    got = {(r.kind, r.label): res for r, res in zip(runs, results, strict=True)}
    algos = None
    if names is not None:
        # the runs were planned before any measured: no second default run to take the spread from
        algos = algo_sweep(run.plan, names, lambda p, env: got[("algo", env.get("NCCL_ALGO", "default"))], repeat=False)
    grown = None
    if scaling:
        groups = [r.ranks for r in runs if r.kind == "scaling"]
        grown = scaling_sweep(run.plan, groups, lambda p, g: got[("scaling", ",".join(map(str, g)))], unit="ranks")
    return _outcome(algos, grown)
