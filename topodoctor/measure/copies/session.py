"""Driving the copy timer: one child process (measure/copies/worker.py), one task at a time, each
under its own timeout.

The child is spawned before the probe so that its start overlaps it (and told its GPUs at once
where nothing narrows them). If a task outlives its timeout the child is killed, the task is
reported as hung, and a fresh child carries on with the rest, so a wedged copy costs one
timeout, never the node. The result carries ``timings`` (where the wall time went, from process
start to teardown) and ``timeline`` (when each step was reached, from the command's exec).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from topodoctor.core.budget import command_start, forked_at
from topodoctor.core.errors import BandwidthUnavailable, BudgetExceeded
from topodoctor.core.text import noun
from topodoctor.measure.copies.tasks import CopySettings, MiB, Task, plan_tasks
from topodoctor.measure.copies.worker import Worker, default_worker_cmd, hello_extra, torch_worker_cmd
from topodoctor.model.copies import (
    BANDWIDTH_SCHEMA_VERSION,
    PAIR_MODES,
    Activity,
    BandwidthResult,
    GpuIdentity,
    Measurement,
    Stats,
)
from topodoctor.model.during import RunSampling
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.api import NvmlApi
from topodoctor.probe.counters import activity, nvlink_tx_bytes
from topodoctor.probe.during import watch
from topodoctor.topology.scope import Scope, cuda_visible, resolve

__all__ = ["CopySettings", "MiB", "Task", "Worker", "default_worker_cmd", "plan_tasks", "run", "torch_worker_cmd"]


def _measurements(
    task: Task, answer: dict[str, Any] | None, timeout_s: float, nvlink_bytes: int | None
) -> list[Measurement]:
    size = int(task.payload["size"])

    def failed(dst: int, why: str, skipped: str | None = None) -> Measurement:
        return Measurement(task.mode, task.src, dst, size, None, "unknown", None, None, why, skipped=skipped)

    if answer is None:
        why = f"timeout: no answer after {timeout_s:g} s (copy timer killed)"
        return [failed(d, why) for d in task.dsts]
    if "unavailable" in answer:  # the pass could not run this kind of copy here: not a fault of the pair
        return [failed(d, None, str(answer["unavailable"])) for d in task.dsts]  # type: ignore[arg-type]
    if "error" in answer:
        return [failed(d, str(answer["error"])) for d in task.dsts]
    results = answer.get("results") or [dict(answer, dst=task.payload.get("dst"))]
    by_ordinal = dict(zip(task.payload.get("dsts", [task.payload.get("dst")]), task.dsts))
    # the pointer chase answers nanoseconds a load; latencies are kept in microseconds
    scale = 1e-3 if task.mode == "sm_latency" else 1.0
    out = []
    for res in results:
        rev = res.get("reverse")
        dst = by_ordinal.get(res.get("dst"), task.dsts[0])
        out.append(
            Measurement(
                mode=task.mode,
                src=task.src,
                dst=dst,
                size_bytes=size,
                value=Stats.of([v * scale for v in res["samples"]]),
                path=res.get("path", "p2p" if task.mode.startswith("sm_") else "unknown"),
                nvlink_bytes=nvlink_bytes if len(task.dsts) == 1 else None,
                verified=res.get("verified"),
                error=None,
                reverse=Stats.of(rev) if rev else None,
            )
        )
    return out


class Timings:
    """Where a run's wall time went, phase by phase (seconds)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        """Add ``seconds`` (never negative) to ``phase``."""
        self.spent[phase] = self.spent.get(phase, 0.0) + max(0.0, seconds)

    def start_up(self, worker: Worker) -> None:
        """From the child's own clock readings (CLOCK_MONOTONIC is shared by processes)."""
        clock = worker.hello.get("clock") or {}
        inner = worker.hello.get("timings") or {}
        if {"module", "imports"} <= set(clock) and worker.spawned_at:
            self.add("python_start", clock["module"] - worker.spawned_at)
            self.add("worker_imports", clock["imports"] - clock["module"])  # torch, for the torch timer
            # the part of the child's start-up the probe did not hide
            self.add("waiting_for_imports", clock["imports"] - worker.hello_sent_at)
        for phase, seconds in [*inner.items(), *(worker.prepared.get("timings") or {}).items()]:
            if isinstance(seconds, (int, float)):
                self.add(phase, float(seconds))

    def task(self, answer: dict[str, Any] | None, elapsed_s: float) -> None:
        """Account one task's time: its own allocation, measurement and verification phases, the rest as
        overhead (all of it as failed where the task answered no timings)."""
        inner = (answer or {}).get("timings") or {}
        known = 0.0
        for phase in ("allocation", "measurement", "verification"):
            if isinstance(inner.get(phase), (int, float)):
                self.add(phase, float(inner[phase]))
                known += float(inner[phase])
        self.add("task_overhead", elapsed_s - known if inner else 0.0)
        if not inner:
            self.add("failed_tasks", elapsed_s)

    def rounded(self) -> dict[str, float]:
        """The phases, to the millisecond."""
        return {k: round(v, 3) for k, v in self.spent.items()}


def run(
    snap: HostSnapshot,
    settings: CopySettings,
    nvml: NvmlApi | None = None,
    worker_cmd: list[str] | None = None,
    worker: Worker | None = None,
    deadline: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    scope: Scope | None = None,
    interim: Callable[[BandwidthResult], None] | None = None,
) -> BandwidthResult:
    """Measure the scope's GPUs (by default the job's, from the environment; see
    topodoctor.topology.scope), or ``settings.devices``. The child process sees only those GPUs.
    ``nvml`` (live) adds the idle check and NVLink byte counters. ``interim`` is handed the result
    once every copy is done, before the watch's closing read of the link counters (which took the
    process down on the GPU hosts): a caller that sends it on keeps the copies if that happens."""
    t0 = time.monotonic()
    scope = scope or resolve(snap, os.environ)
    live = {g.index for g in snap.gpus if g.lost is None}
    wanted = set(settings.devices) if settings.devices is not None else set(scope.gpus) & live
    unknown = wanted - {g.index for g in snap.gpus}
    if unknown:
        if worker is not None:
            worker.stop()
        raise BandwidthUnavailable(f"no {noun(len(unknown), 'GPU')} {_ids(unknown)} on this host")
    worker = worker or Worker(worker_cmd or default_worker_cmd(), settings.start_timeout_s)
    worker.extra = hello_extra(settings.sm_kernel)
    early = worker.sent
    if early is not None and early.get("visible") is None and wanted == {g.index for g in snap.gpus}:
        # told every GPU before the probe, and every GPU is what the pass measures: keep that start
        worker.visible, worker.peers = None, bool(early.get("peers"))
    else:
        worker.visible = cuda_visible(snap, wanted)
        worker.peers = any(m in PAIR_MODES for m in settings.modes) and len(wanted) > 1
    if not worker.spawned_at:
        worker.spawn()
    timings = Timings()
    # The GPUs' load and the watch's first readings (every link's error counters, the limits: tens
    # of milliseconds of NVML) are taken while the timer still starts CUDA, not after it.
    acts = tuple(Activity(i, *activity(nvml, i)) for i in sorted(wanted)) if nvml else ()
    during = watch(nvml, snap, sorted(wanted)).start()  # NVML on a thread while the copies run
    try:
        worker.start()
    except BaseException:
        during.stop()
        raise
    timings.start_up(worker)
    by_bus = {g.bus_id: g for g in snap.gpus if isinstance(g.bus_id, str)}
    ids: list[GpuIdentity] = []
    for d in worker.hello.get("devices", []):
        gpu = by_bus.get(d["bus_id"])
        if gpu is not None:
            ids.append(GpuIdentity(gpu.index, int(d["ordinal"]), d["bus_id"], str(d["name"])))
    seen = {i.index for i in ids}
    if seen != wanted:
        during.stop()
        worker.stop()
        shown = f"{noun(len(seen), 'GPU')} {_ids(seen)}"
        detail = f"CUDA shows {shown}, asked for {_ids(wanted)} (CUDA_VISIBLE_DEVICES={worker.visible})"
        raise BandwidthUnavailable(f"the copy timer does not see the GPUs to measure: {detail}")
    ids.sort(key=lambda i: i.index)
    ordinal = {i.index: i.cuda_ordinal for i in ids}
    links = {g.index: len(g.nvlinks) for g in snap.gpus}
    tasks = plan_tasks(settings, ordinal)
    out: list[Measurement] = []
    marks = {"copies_started": time.monotonic()}
    where = scope.describe() if settings.devices is None else f"{noun(len(wanted), 'device')} {_ids(wanted)}"

    def result() -> BandwidthResult:  # what is measured so far, ``during`` not attached
        timeline = _timeline(worker, t0, time.monotonic(), marks)
        return _result(snap, settings, worker, ids, acts, out, t0, timings, timeline, where)

    def handed(sampling: RunSampling) -> None:  # every copy done: the result, before the closing read
        if interim is not None:
            interim(replace(result(), during=sampling))

    try:
        for n, task in enumerate(tasks):
            if deadline is not None and time.monotonic() > deadline:
                raise BudgetExceeded(f"bandwidth pass ran out of time after {n} of {len(tasks)} measurements")
            if progress:
                progress(n, len(tasks), f"{task.mode} {task.src}->{','.join(map(str, task.dsts))}")
            if worker.proc is None:
                worker.start()
            counted = nvml is not None and task.src >= 0 and task.mode in ("oneway", "sm_oneway")
            before = nvlink_tx_bytes(nvml, task.src, links.get(task.src, 0)) if nvml and counted else None
            timeout = settings.pair_timeout_s * len(task.dsts)
            if deadline is not None:
                timeout = min(timeout, max(0.1, deadline - time.monotonic()))
            t_task = time.monotonic()
            no_sm = _no_sm_kernels(worker.hello) if task.mode.startswith("sm_") else None
            answer = {"unavailable": no_sm} if no_sm else worker.ask(task.payload, timeout)
            elapsed = time.monotonic() - t_task
            if answer is None or "unavailable" not in answer:
                timings.task(answer, elapsed)
            after = nvlink_tx_bytes(nvml, task.src, links.get(task.src, 0)) if nvml and before is not None else None
            moved = after - before if (before is not None and after is not None) else None
            share = round(elapsed / len(task.dsts), 3)
            out += [replace(m, elapsed_s=share) for m in _measurements(task, answer, timeout, moved)]
        if progress:
            progress(len(tasks), len(tasks), "done")
        marks["tasks_done"] = time.monotonic()
    finally:
        during.stop(handed if "tasks_done" in marks else None)
        t_stop = time.monotonic()
        worker.release()
        timings.add("teardown", time.monotonic() - t_stop)

    timings.add("total_since_spawn", time.monotonic() - (worker.spawned_at or t0))
    if worker.restarts:
        timings.add("restarts", worker.restarts)
    return replace(result(), during=during.sampling)


def _result(
    snap: HostSnapshot,
    settings: CopySettings,
    worker: Worker,
    ids: list[GpuIdentity],
    acts: tuple[Activity, ...],
    out: list[Measurement],
    t0: float,
    timings: Timings,
    timeline: dict[str, float],
    scope: str,
) -> BandwidthResult:
    """The pass's result from what it measured (``during`` not yet attached)."""
    return BandwidthResult(
        kind="bandwidth",
        schema_version=BANDWIDTH_SCHEMA_VERSION,
        host=snap.host.hostname,
        torch_version=str(worker.hello.get("torch", "")),
        cuda_version=str(worker.hello.get("cuda", "")),
        method=str(worker.hello.get("method", "")),
        gpus=tuple(ids),
        activity=acts,
        measurements=tuple(out),
        wall_s=round(time.monotonic() - t0, 3),
        settings={
            "modes": list(settings.modes),
            "size_bytes": settings.size_bytes,
            "host_size_bytes": settings.host_size_bytes,
            "iters": settings.iters,
            "samples": settings.samples,
            "pair_timeout_s": settings.pair_timeout_s,
            "scope": scope,
        },
        snapshot=snap,
        timings=timings.rounded(),
        timeline=timeline,
        during=None,
    )


def _no_sm_kernels(hello: dict[str, Any]) -> str | None:
    """Why this timer runs no SM kernels (the driver could not compile them, or it is the torch
    timer), or None when it does."""
    if "kernels_missing" not in hello:
        return "SM copies need the driver-API copy timer's PTX kernels; the torch timer ran this pass"
    missing = hello["kernels_missing"]
    return str(missing) if missing else None


def _timeline(worker: Worker, probed: float, done: float, more: dict[str, float]) -> dict[str, float]:
    """When each step was reached, seconds since the command's exec; empty where the command's
    start is unknown (the console entry point marks it). The timer's own clock readings are on
    the same monotonic clock as ours; ``more``: the pass's own steps (the first copy, the last)."""
    start = command_start()
    if start is None:
        return {}
    clock = {**(worker.hello.get("clock") or {}), **(worker.prepared.get("clock") or {})}
    marks = {
        "timer_spawned": worker.spawned_at,
        "timer_hello_sent": worker.hello_sent_at,
        "timer_driver_started": clock.get("driver_start"),  # a forked timer's cuInit, begun before its imports
        "timer_imports_done": clock.get("imports"),
        "timer_driver_ready": clock.get("driver_ready"),
        "timer_cuda_ready": clock.get("ready"),
        "timer_prepared": clock.get("prepared"),
        "probe_forked": forked_at(),
        "probe_done": probed,
        "timer_answered_hello": worker.ready_at,
        **more,
        "copies_done": done,
    }
    return {k: round(v - start, 4) for k, v in marks.items() if isinstance(v, (int, float)) and v > 0}


def _ids(ids: Iterable[int]) -> str:
    """``0, 2``: indices as every message writes them, never a Python list."""
    return ", ".join(map(str, sorted(ids)))
