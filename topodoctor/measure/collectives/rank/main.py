"""A rank's process: join the world, run the plan on a ``worker.Rank``, report; the entry point
of a spawned rank (``python -m topodoctor.measure.collectives.rank.main``). Imports torch."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch  # this module is a measuring process: importing torch is its job
import torch.distributed as dist

from topodoctor.core import fileio
from topodoctor.core.codec import from_jsonable
from topodoctor.measure.collectives.guard import (
    RANK_KEY,
    Alarm,
    Emit,
    RankStopped,
    Watchdog,
    failure_of,
    flush_c_streams,
    nccl_environment,
    run_watched,
    world_store,
)
from topodoctor.measure.collectives.init_failure import InitFailed, explain_init_failure, init_fault
from topodoctor.measure.collectives.nodes import NodeSettings
from topodoctor.measure.collectives.rank.latency_loop import run_latency
from topodoctor.measure.collectives.rank.nodes import run_nodes
from topodoctor.measure.collectives.rank.sweeps import SweepState, run_sweep
from topodoctor.measure.collectives.rank.worker import Rank
from topodoctor.measure.collectives.sweeps import SweepRun
from topodoctor.measure.collectives.world import World, from_env
from topodoctor.model.collective_latency import PLAN_ENV, LatencyPlan
from topodoctor.model.collective_ops import Plan

# CUDA's own switches that change how NCCL's kernels run: kept beside NCCL's for the diagnosis
CUDA_SETTINGS = ("CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS")
IDENT_WIDTH = 4096  # bytes per rank for its identity (NCCL variables included)


def run_rank(
    plan: Plan,
    world: World,
    emit: Emit,
    log_dir: str | None,
    nodes: NodeSettings | None = None,
    keep: bool = False,
    deadline: float | None = None,
    sweep: Sequence[SweepRun] = (),
    latency: LatencyPlan | None = None,
) -> dict[str, Any] | None:
    """Join the world, run the plan (then the multi-node phases, see worker_nodes.py), or with
    ``sweep`` those runs instead (rank/sweeps.py: their results under "sweep", the rows of the run a
    stop met under "sweep_rows"), or with ``latency`` the small-message paths (rank/latency_loop.py);
    rank 0 returns the raw result, the others None. ``keep``: the group outlives this
    (worker_exit); ``deadline`` (time.monotonic): the whole run's budget, stopped and reported
    like a hang.

    A failure on any rank (an NCCL error, out of memory, a hang its watchdog cut) is announced
    on the world's store; the other ranks stop where they wait and rank 0 returns what it has,
    with the failure naming the rank, its node and the op. A rank other than 0 that stops
    raises RankStopped."""
    nccl_environment(os.environ, world.rank, log_dir)  # type: ignore[arg-type]
    for k, v in world.env().items():
        os.environ.setdefault(k, v)
    rank = Rank(plan, world, emit)
    # A forced NCCL_ALGO (--algo, spawned) is kept out of the world's own communicator, which
    # carries the bookkeeping (a forced tree refuses its AllGather), and given to the measured one.
    forced = os.environ.pop("NCCL_ALGO", None) if rank.cuda and not sweep else None
    kwargs: dict[str, Any] = {}
    if rank.cuda:
        torch.cuda.set_device(rank.device)
        kwargs["device_id"] = rank.device  # eager NCCL init: a broken NCCL fails here, not mid-run
    # env:// (MASTER_ADDR / MASTER_PORT): under torchrun it joins the agent's own store as a
    # client (TORCHELASTIC_USE_AGENT_STORE) instead of trying to open a second one on its port.
    try:
        if fault := init_fault(os.environ, world.rank):
            raise RuntimeError(fileio.read_text(fault, "fault text"))
        dist.init_process_group(
            plan.backend,
            init_method="env://",
            rank=world.rank,
            world_size=world.world_size,
            # The library's own timeout backs up the watchdog, which names the op that hung.
            timeout=timedelta(seconds=plan.op_timeout_s + 5.0),
            **kwargs,
        )
    except Exception as err:
        # NCCL's reason is in its log and in the exception's later lines, not in its first
        flush_c_streams()
        raise InitFailed(explain_init_failure(str(err), os.environ.get("NCCL_DEBUG_FILE"), os.environ)) from None
    finally:
        if forced is not None:
            os.environ["NCCL_ALGO"] = forced
    if forced is not None:
        measured = dist.new_group(list(range(world.world_size)), timeout=timedelta(seconds=plan.op_timeout_s + 5.0))
        rank = Rank(plan, world, emit, group=measured, control=dist.group.WORLD)
    alarm = Alarm(world_store(dist), world.rank)
    ours = ("NCCL_DEBUG_FILE", "NCCL_DEBUG") if log_dir else ()
    env = {k: v for k, v in os.environ.items() if _kept(k) and k not in ours}
    ident = {**rank.identity(), "env": env}
    while len(json.dumps(ident).encode()) > IDENT_WIDTH and ident["env"]:  # what fits goes round
        ident["env"] = dict(list(ident["env"].items())[:-1])
    alarm.publish(f"{RANK_KEY}{world.rank}", json.dumps(ident))  # read back by rank 0 if a gather fails
    version = torch.cuda.nccl.version() if rank.cuda else ""
    nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    meta: dict[str, Any] = {"torch": torch.__version__, "nccl": nccl, "ranks": [ident], "env": env}
    watchdog = Watchdog(plan.op_timeout_s, emit, world.rank)
    rank.watchdog = watchdog
    state = SweepState()

    def measure() -> dict[str, Any]:
        if rank.cuda:
            torch.cuda.set_device(rank.device)  # the CUDA device is per thread
        meta["ranks"] = rank.gather_json(ident, IDENT_WIDTH)
        if world.rank == 0:
            emit({"ev": "meta", **meta})
        emit({"ev": "ready", "rank": world.rank})
        # A stream of its own (non-blocking), as nccl-tests uses: no implicit waits on the
        # legacy default stream; synchronous collectives run on it (torch >= 2.8).
        with torch.cuda.stream(torch.cuda.Stream(rank.device)) if rank.cuda else contextlib.nullcontext():
            if sweep:
                return run_sweep(rank, sweep, emit, watchdog, alarm, state)
            if latency is not None:
                return run_latency(rank, latency, emit, watchdog)
            body = rank.run(watchdog)

        body.update(run_nodes(rank, plan, meta["ranks"], nodes or NodeSettings(), emit))
        return body

    body, exc, stopped = run_watched(measure, alarm, watchdog, deadline)
    where = watchdog.current
    watchdog.close()
    flush_c_streams()  # NCCL's log file is C stdio: complete on disk before we may be killed
    if exc is None and stopped is None:
        # "finished" first: a spawning parent kills the rank on it, sparing NCCL's teardown
        emit({"ev": "finished", "rank": world.rank})
        if not keep:
            dist.destroy_process_group()
        return {**meta, **body} if world.rank == 0 else None
    failure = stopped
    if exc is not None:
        # A peer's announced failure is the cause; this rank's own error is then its echo
        # (a gloo op that lost its peer, an NCCL error from a communicator a peer left).
        failure = alarm.peek()
        if failure is None:
            failure = failure_of(exc, world.rank, str(ident["node"]), where)
            alarm.announce(failure)
    if failure.get("kind") == "hang" and failure.get("rank") == world.rank:
        emit({"ev": "hang", "rank": world.rank, "op": failure["op"], "size": failure["size_bytes"] or 0, **failure})
    else:
        emit({"ev": "fail", **failure})
    if world.rank != 0:
        raise RankStopped(failure)
    if len(meta["ranks"]) < world.world_size:  # the identities never went round: the store has them
        meta["ranks"] = alarm.identities(world.world_size) or meta["ranks"]
        emit({"ev": "meta", **meta})
    emit({"ev": "finished", "rank": world.rank})
    done = {"sweep": list(state.done), "sweep_rows": list(state.rows)} if sweep else {}
    return {**meta, "rows": list(rank.rows), "failures": [*rank.failures, failure], **done}


def _emit_stdout(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    """Entry point of a spawned rank: plan and world from the environment, events (rank 0's
    rows among them) on stdout, so the parent keeps what finished when a later op hangs."""
    plan = from_jsonable(Plan, json.loads(os.environ["TOPODOCTOR_COLL_PLAN"]), "collectives plan")
    world = from_env()
    assert world is not None, "a spawned rank needs RANK and WORLD_SIZE"
    nodes_doc = os.environ.get("TOPODOCTOR_COLL_NODES")
    nodes = from_jsonable(NodeSettings, json.loads(nodes_doc), "node settings") if nodes_doc else None
    latency_doc = os.environ.get(PLAN_ENV)
    latency = from_jsonable(LatencyPlan, json.loads(latency_doc), "latency plan") if latency_doc else None
    _emit_stdout({"ev": "imported", "rank": world.rank})  # torch loaded: the start-up's first part
    try:
        run_rank(plan, world, _emit_stdout, os.environ.get("TOPODOCTOR_COLL_LOGDIR"), nodes, latency=latency)
    except RankStopped:
        return 1  # said on stdout already
    except InitFailed as exc:
        _emit_stdout({"ev": "fail", "rank": world.rank, "kind": "error", "message": exc.reason})
        return 1
    except Exception as exc:
        kind = "oom" if isinstance(exc, torch.cuda.OutOfMemoryError) else "error"
        first = (str(exc).strip().splitlines() or [""])[0]
        _emit_stdout({"ev": "fail", "rank": world.rank, "kind": kind, "message": f"{type(exc).__name__}: {first}"})
        return 1
    _emit_stdout({"ev": "done", "rank": world.rank})
    return 0


def _kept(name: str) -> bool:
    """A variable a rank reports with its result: NCCL's, torch's NCCL ones, CUDA's launch switches."""
    return name.startswith(("NCCL_", "TORCH_NCCL_")) or name in CUDA_SETTINGS


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # A measuring thread may still be stuck in NCCL after a stop: the interpreter's shutdown
    # (and NCCL's own teardown) would wait on it.
    os._exit(code)
