"""Collectives inside a check: the quick pass, and the verdict of the TD0xx rules on a result.

``check --collectives`` runs ``quick_pass`` in its budgeted child (beside the probe) and puts
the result in the rules' context as ``ctx.collectives``; ``judge`` does the same for
the ``collectives`` command. No torch here.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from topodoctor.core.codec import from_jsonable, to_jsonable
from topodoctor.core.errors import TopodoctorError
from topodoctor.core.probed import Unsupported
from topodoctor.measure.collectives.assemble import CollectivesUnavailable, build_result
from topodoctor.measure.collectives.launch import start
from topodoctor.model.collective_ops import Plan
from topodoctor.model.collectives import CollectivesResult
from topodoctor.model.copies import Activity
from topodoctor.model.snapshot import SNAPSHOT_SCHEMA_VERSION, HostInfo, HostSnapshot
from topodoctor.probe.counters import activity
from topodoctor.probe.during import watch
from topodoctor.probe.environment import capture_environment
from topodoctor.probe.sources import live_nvml
from topodoctor.rules import Context, evaluate
from topodoctor.rules.one_cause import one_per_setting
from topodoctor.service.passes import Pass

if TYPE_CHECKING:
    from topodoctor.rules.context import Context
    from topodoctor.service.passes import Source

QUICK_SIZE_BYTES = 256 << 20


@dataclass(frozen=True)
class QuickAnswer:
    """What the quick pass of a check hands to the rules: a result, or why there is none."""

    result: CollectivesResult | None = None
    error: str | None = None


def driver_gpus(proc: str = "/proc/driver/nvidia/gpus") -> int:
    """GPUs the driver lists, without NVML or CUDA: the ranks start before the probe has run."""
    try:
        return len(os.listdir(proc))
    except OSError:
        return 0


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

    return tuple(Activity(g.index, *activity(nvml, g.index)) for g in snap.gpus if g.lost is None)


class QuickPass:
    """The pass ``check --collectives`` runs: all_reduce and sendrecv at one large size on every
    visible GPU. ``start`` it before probing (the ranks' torch start-up overlaps the probe), then
    ``finish`` it within the check's deadline.

    In the check's budgeted child::

        qp = QuickPass.start(visible_gpus(None), deadline)   # before the probe
        snap = probe...; answer = qp.answer(snap, deadline, activity)   # JSON-able
    and in the parent, before the rules run: ``attach(ctx, answer)``.
    """

    def __init__(self, running: Any, tmp: tempfile.TemporaryDirectory[str], plan: Plan) -> None:
        self.running, self.tmp, self.plan = running, tmp, plan

    @staticmethod
    def start(
        nprocs: int, deadline: float, size_bytes: int = QUICK_SIZE_BYTES, backend: Literal["nccl", "gloo"] = "nccl"
    ) -> QuickPass:
        """Spawn the ranks for the quick pass on ``nprocs`` GPUs within the deadline; raises
        CollectivesUnavailable when there are too few GPUs or too little time."""
        if nprocs < 2:
            raise CollectivesUnavailable(f"collectives need at least 2 GPUs; {nprocs} visible")
        left = deadline - time.monotonic()
        if left <= 1:
            raise CollectivesUnavailable("no time left in the budget for the collectives pass")
        plan = replace(Plan.quick(size_bytes), backend=backend)
        plan = replace(plan, op_timeout_s=min(plan.op_timeout_s, left))
        tmp = tempfile.TemporaryDirectory(prefix="topodoctor-coll-")
        try:
            return QuickPass(start(plan, nprocs, tmp.name), tmp, plan)
        except BaseException:
            tmp.cleanup()
            raise

    def finish(
        self, snap: HostSnapshot | None, deadline: float, activity: tuple[Activity, ...] = ()
    ) -> CollectivesResult:
        """The result (without a snapshot: the check has its own)."""
        try:
            left = max(0.1, deadline - time.monotonic())
            got = self.running.finish(start_timeout_s=left, deadline=deadline)
            res = build_result(got, self.plan, time.monotonic() - self.running.t0, self.tmp.name, activity, snap)
        finally:
            self.tmp.cleanup()
        return replace(res, snapshot=None)

    def stop(self) -> None:
        """Kill the ranks and drop their files (the probe failed: nothing to judge them against)."""
        try:
            self.running.stop()
        finally:
            self.tmp.cleanup()

    def answer(self, snap: HostSnapshot | None, deadline: float, activity: tuple[Activity, ...] = ()) -> dict[str, Any]:
        """``finish`` as JSON-able data for the budgeted child's pipe: the result, or why there is none."""
        try:
            return {"result": to_jsonable(self.finish(snap, deadline, activity))}
        except TopodoctorError as exc:
            return {"error": str(exc)}


def quick_pass(
    snap: HostSnapshot,
    deadline: float,
    nvml: Any = None,
    size_bytes: int = QUICK_SIZE_BYTES,
    backend: Literal["nccl", "gloo"] = "nccl",
) -> CollectivesResult:
    """The quick pass in one call (see ``QuickPass`` to overlap it with the probe)."""
    acts = gpu_activity(snap, nvml)
    return QuickPass.start(visible_gpus(snap), deadline, size_bytes, backend).finish(snap, deadline, acts)


def attach(ctx: Context, answer: QuickAnswer | dict[str, Any] | None) -> None:
    """Put a quick pass's answer in the rules' context: its result, or the reason it has none
    (TD005 then reports that the collectives could not be checked)."""
    if isinstance(answer, QuickAnswer):
        if answer.result is not None:
            ctx.collectives = answer.result
        else:
            ctx.collectives_error = answer.error or "unknown"
        return
    if not answer:
        return
    if "result" in answer:
        ctx.collectives = from_jsonable(CollectivesResult, answer["result"], "collectives result")
    else:
        ctx.collectives_error = str(answer.get("error", "unknown"))


def unknown_host(hostname: str) -> HostSnapshot:
    """A host with no GPUs known: the rules that need no topology (data errors, hangs) still run;
    those that do say they could not check."""
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
    snap = snap or res.snapshot or unknown_host(res.host)
    ctx = Context(
        snap,
        capture_environment(environ or {}),
        bandwidth=bandwidth,
        collectives=res,
        collectives_expect_gbps=expect_gbps or None,
    )
    out: Any = evaluate(ctx, select=["TD0", "TD901"])
    return one_per_setting(getattr(out, "findings", out))  # a list, or an Evaluation carrying one


def check_pass(
    backend: Literal["nccl", "gloo"] = "nccl", nprocs: int | None = None, size_bytes: int = QUICK_SIZE_BYTES
) -> Pass:
    """The quick collectives pass of ``check --collectives``: all_reduce and sendrecv at one large
    size, one rank per visible GPU (the job's, through CUDA_VISIBLE_DEVICES). The ranks are
    spawned before the probe, so torch's import and NCCL's start overlap it. A pass that cannot
    run (no GPUs, one GPU, no torch, NCCL did not start) is handed to the rules as "not checked"
    (TD005's TD901), and the check ends "could not check" (exit 3) unless it found a fault."""

    def start(deadline: float) -> Any:
        n = nprocs or visible_gpus(None) or driver_gpus()
        try:
            return QuickPass.start(n, deadline, size_bytes, backend)
        except TopodoctorError as exc:
            return str(exc)

    def stop(started: Any) -> None:
        if not isinstance(started, str):
            started.stop()

    def run(snap: HostSnapshot, source: Source, deadline: float, started: Any) -> QuickAnswer:
        if isinstance(started, str):
            return QuickAnswer(error=started)
        if not source.live and backend == "nccl":  # a recording is judged, not the GPUs under us
            started.stop()
            return QuickAnswer(error="collectives run on the live host only, not on a replayed one")
        acts: tuple[Activity, ...] = ()
        nvml = None
        if source.live and backend == "nccl":
            nvml = live_nvml()
            acts = gpu_activity(snap, nvml)
        with watch(nvml, snap) as during:  # NVML on a thread while the ranks run
            answer = started.answer(snap, deadline, acts)
        if "result" in answer:
            return QuickAnswer(during.attach(from_jsonable(CollectivesResult, answer["result"], "collectives result")))
        return QuickAnswer(error=str(answer.get("error", "unknown")))

    def missed(answer: QuickAnswer | None) -> str | None:
        if answer is None or answer.result is not None:
            return None
        return answer.error or "unknown"

    return Pass("collectives", run, QuickAnswer, start, stop, missed)
