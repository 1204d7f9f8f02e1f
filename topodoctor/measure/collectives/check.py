"""Collectives inside a check: the quick pass, and the verdict of the TD0xx rules on a result.

``check --collectives`` runs ``quick_pass`` in its budgeted child (beside the probe) and puts
the result in the rules' context as ``ctx.extra["collectives"]``; ``judge`` does the same for
the ``collectives`` command. No torch here.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Literal

from topodoctor.bandwidth.result import Activity
from topodoctor.measure.collectives.launch import CollectivesUnavailable, measure
from topodoctor.measure.collectives.plan import Plan
from topodoctor.measure.collectives.result import CollectivesResult
from topodoctor.model import HostSnapshot

QUICK_SIZE_BYTES = 256 << 20


def visible_gpus(snap: HostSnapshot | None, environ: dict[str, str] | None = None) -> int:
    """How many GPUs the ranks can use: CUDA_VISIBLE_DEVICES when set, else the live GPUs probed."""
    env = os.environ if environ is None else environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return len([d for d in cvd.split(",") if d.strip() and not d.strip().startswith("-")])
    return len([g for g in snap.gpus if g.lost is None]) if snap is not None else 0


def gpu_activity(snap: HostSnapshot, nvml: Any) -> tuple[Activity, ...]:
    """What else runs on each GPU before our ranks start (NVML, as the bandwidth tester asks)."""
    if nvml is None:
        return ()
    from topodoctor.probe.counters import activity

    return tuple(Activity(g.index, *activity(nvml, g.index)) for g in snap.gpus if g.lost is None)


def quick_pass(
    snap: HostSnapshot,
    deadline: float,
    nvml: Any = None,
    size_bytes: int = QUICK_SIZE_BYTES,
    backend: Literal["nccl", "gloo"] = "nccl",
) -> CollectivesResult:
    """all_reduce and sendrecv at one large size on every visible GPU, within ``deadline``.

    The result carries no snapshot (the check has its own); put it in the rules' context as
    ``ctx.extra["collectives"]`` and the TD0xx rules judge it with the rest.
    """
    n = visible_gpus(snap)
    if n < 2:
        raise CollectivesUnavailable(f"collectives need at least 2 GPUs; {n} visible")
    left = deadline - time.monotonic()
    if left <= 1:
        raise CollectivesUnavailable("no time left in the budget for the collectives pass")
    plan = replace(Plan.quick(size_bytes), backend=backend)
    plan = replace(plan, op_timeout_s=min(plan.op_timeout_s, left))
    res = measure(plan, n, snapshot=snap, activity=gpu_activity(snap, nvml), deadline=deadline, start_timeout_s=left)
    return replace(res, snapshot=None)


def unknown_host(hostname: str) -> HostSnapshot:
    """A host with no GPUs known: the rules that need no topology (data errors, hangs) still run;
    those that do say they could not check."""
    from topodoctor.model import SNAPSHOT_SCHEMA_VERSION, HostInfo
    from topodoctor.probed import Unsupported

    none = Unsupported("no host snapshot")
    info = HostInfo(hostname, none, "unknown", "", False, none, none, none, none, none, none, (), none)
    return HostSnapshot("snapshot", SNAPSHOT_SCHEMA_VERSION, info, none, (), (), (), (), (), (), ())


def judge(
    res: CollectivesResult,
    snap: HostSnapshot | None,
    bandwidth: Any = None,
    expect_gbps: float | None = None,
    environ: dict[str, str] | None = None,
) -> list[Any]:
    """The collectives rules (TD0xx) on a result, against the host it ran on (or, with none
    known, only those that need no topology)."""
    from topodoctor.rules import Context, capture_environment, evaluate

    snap = snap or res.snapshot or unknown_host(res.host)
    ctx = Context(snap, capture_environment(environ or {}), bandwidth=bandwidth)
    ctx.extra["collectives"] = res
    if expect_gbps:
        ctx.extra["collectives_expect_gbps"] = expect_gbps
    return evaluate(ctx, select=["TD0", "TD901"])
