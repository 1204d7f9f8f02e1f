"""`collectives --predict`, `--algo` and `--scaling` as the service runs them: the topology's
expected busbw without running anything, and several spawned runs compared, each under the
command's one budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from topodoctor.core.budget import Budget
from topodoctor.core.errors import EXIT_OK, EXIT_UNHEALTHY, InputError, ProbeUnavailable
from topodoctor.measure.collectives.sweeps import ALGO_OPS, AlgoSweep, ScalingSweep, algo_sweep, scaling_sweep, subsets
from topodoctor.model.collective_ops import Plan
from topodoctor.service import check as doctor
from topodoctor.service.collective_runs import CollectivesRun, _deadline, _snapshot
from topodoctor.service.collectives import visible_gpus
from topodoctor.topology.busbw import Prediction, predict


def predict_busbw(source: doctor.Source, budget: Budget, ops: Sequence[str], nodes: int = 1) -> tuple[Prediction, ...]:
    """The busbw the topology gives each op at 1 GiB on this host (or ``nodes`` such hosts
    joined by their NICs): no GPU and no torch, a recording will do."""
    snap = _snapshot(source, budget, True)
    assert snap is not None  # required: a probe that could not run has raised
    preds = predict(snap, tuple(ops), nodes=nodes)
    if not preds:
        why = "fewer than 2 GPUs, or links unread" + (", or no RDMA NIC of known rate" if nodes > 1 else "")
        raise ProbeUnavailable(f"the topology does not say enough for a prediction ({why})")
    return preds


@dataclass(frozen=True)
class SweepOutcome:
    """Each op under each algorithm asked for, and/or on growing sets of GPUs; the exit code."""

    algorithms: AlgoSweep | None
    scaling: ScalingSweep | None
    exit_code: int  # 1 when a run failed or a group of GPUs is slow against its peers


def run_sweeps(run: CollectivesRun, algo: str | None, scaling: bool, budget: Budget) -> SweepOutcome:
    """``--algo`` / ``--scaling``: several spawned runs of ``run.plan``, compared."""
    from topodoctor.measure.collectives.launch import measure

    plan: Plan = run.plan
    gpu = plan.backend == "nccl"
    snap = _snapshot(run.source, budget, gpu and run.nprocs is None)
    n = run.nprocs or (visible_gpus(snap) if gpu else 2)
    if n < 2:
        raise ProbeUnavailable(f"collectives need at least 2 ranks; {n} to run (GPUs visible, --nprocs)")
    deadline = _deadline(budget)

    def one(p: Plan, env: dict[str, str], ranks: int = n) -> Any:
        return measure(p, ranks, snapshot=snap, deadline=deadline, start_timeout_s=run.start_timeout_s, extra_env=env)

    algos = None
    if algo is not None:
        names = [a.strip() for a in algo.split(",") if a.strip()]
        unknown = [a for a in names if a.lower() not in ALGO_OPS]
        if unknown or not names:
            raise InputError(f"--algo: unknown algorithm {unknown[0] if unknown else algo!r} ({', '.join(ALGO_OPS)})")
        algos = algo_sweep(plan, names, one)
    grown = None
    if scaling:

        def on(p: Plan, gpus: tuple[int, ...]) -> Any:
            env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if gpu else {}
            return one(p, env, len(gpus))

        grown = scaling_sweep(plan, subsets(snap if gpu else None, n), on)
    bad = (algos is not None and bool(algos.failures)) or (
        grown is not None and (bool(grown.slow) or any(r.failures for r in grown.runs))
    )
    return SweepOutcome(algos, grown, EXIT_UNHEALTHY if bad else EXIT_OK)
