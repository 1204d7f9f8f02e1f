"""`collectives --latency` as the service runs it: small messages through every path a program
can take between this node's GPUs, one rank per GPU spawned under the command's budget."""

from __future__ import annotations

import time
from dataclasses import dataclass

from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError, ProbeUnavailable
from topodoctor.core.sizes import parse_sizes
from topodoctor.core.text import human_size
from topodoctor.measure.collectives.latency_run import measure_latency
from topodoctor.measure.collectives.world import from_env
from topodoctor.model.collective_latency import LatencyPlan, LatencyResult
from topodoctor.model.collective_ops import OPS
from topodoctor.model.outcome import CommandOutcome
from topodoctor.service.collective_runs import CollectivesRun, _deadline, _made, _snapshot
from topodoctor.service.collectives import visible_gpus
from topodoctor.service.stamping import stamp

# The paths a failure of which is the host's, not an optional library's: NCCL itself.
GATING = ("nccl_eager", "nccl_graph")


@dataclass(frozen=True)
class LatencyOutcome(CommandOutcome):
    """The table, and what failed in it: a run (a hang, a rank that died) or an NCCL path; a path
    that is not available, or an optional one that broke, is reported only."""

    result: LatencyResult
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()

    @property
    def failing(self) -> tuple[object, ...]:
        """The runs that failed, and the NCCL paths that failed."""
        res = self.result
        return (*res.failures, *(c for c in res.cells if c.status == "failed" and c.path in GATING))


def latency_plan(run: CollectivesRun, sizes: tuple[int, ...] | None) -> LatencyPlan:
    """The paths' plan from the command's: ``--op`` all_reduce and/or sendrecv (point-to-point),
    ``--size`` when given (for both), ``--iters``, ``--warmup``, ``--no-check``."""
    ops = set(run.plan.ops)
    if ops == set(OPS):  # no --op: both
        ops = {"all_reduce", "sendrecv"}
    other = sorted(ops - {"all_reduce", "sendrecv"})
    if other:
        raise InputError(f"--latency times all_reduce and sendrecv (point-to-point), not {', '.join(other)}")
    base = LatencyPlan()
    p2p = (sizes or base.p2p_sizes) if "sendrecv" in ops else ()
    reduce = (sizes or base.all_reduce_sizes) if "all_reduce" in ops else ()
    return LatencyPlan(
        p2p_sizes=p2p,
        all_reduce_sizes=reduce,
        iters=run.plan.iters,
        warmup=max(run.plan.warmup_iters, base.warmup),
        check=run.plan.check,
    )


def run_latency(run: CollectivesRun, lplan: LatencyPlan, budget: Budget) -> LatencyOutcome:
    """Spawn one rank per visible GPU (or ``--nprocs``) and time every path of ``lplan``."""

    if not run.spawn and from_env() is not None:
        raise InputError("--latency times this node's GPUs with ranks it starts itself: run it without torchrun / srun")
    gpu = run.plan.backend == "nccl"
    started_at = time.time()
    snap = _snapshot(run.source, budget, gpu and run.nprocs is None)
    n = run.nprocs or (visible_gpus(snap) if gpu else 2)
    if run.nprocs == 1:
        raise InputError("--nprocs must be at least 2: a message needs two ranks")
    if gpu and n < 2:
        raise ProbeUnavailable(f"--latency needs at least 2 GPUs; {n} visible (CUDA_VISIBLE_DEVICES?)")
    res = measure_latency(
        lplan,
        n,
        backend=run.plan.backend,
        op_timeout_s=run.plan.op_timeout_s,
        start_timeout_s=run.start_timeout_s,
        deadline=_deadline(budget),
        log_dir=str(_made(run.log_dir)) if run.log_dir else None,
        progress=run.progress,
    )
    res = stamp(res, snap, started_at)
    return LatencyOutcome(res)


def sizes_given(text: str | None) -> tuple[int, ...] | None:
    """``--size`` when the user gave one, parsed (None: the paths' own sizes); a few sizes, not a sweep."""
    if text is None:
        return None
    got = parse_sizes(text)
    if len(got) > 8:
        raise InputError(f"--latency takes a few sizes, not a sweep of {len(got)} ({human_size(got[0])} and up)")
    return got
