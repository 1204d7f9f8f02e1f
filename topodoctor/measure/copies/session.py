"""Driving the copy timer: one child process, one task at a time, each under its own timeout.

The child (``bandwidth/runner.py``) pays torch's start-up once, and is spawned before the
probe so that the import overlaps it. If a task outlives its timeout the child is killed,
the task is reported as hung, and a fresh child carries on with the rest, so a wedged copy
costs one timeout, never the node. The result carries ``timings``: where the wall time went,
from process start to teardown.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from topodoctor.core.errors import BandwidthUnavailable, BudgetExceeded
from topodoctor.core.text import noun
from topodoctor.measure.copies.tasks import MiB, Settings, Task, plan_tasks
from topodoctor.model.copies import (
    BANDWIDTH_SCHEMA_VERSION,
    Activity,
    BandwidthResult,
    GpuIdentity,
    Measurement,
    Stats,
)
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.api import NvmlApi
from topodoctor.probe.counters import activity, nvlink_tx_bytes
from topodoctor.topology.scope import Scope, cuda_visible, resolve

__all__ = ["MiB", "Settings", "Task", "Worker", "default_worker_cmd", "plan_tasks", "run", "torch_worker_cmd"]


@dataclass
class Worker:
    """The copy timer's process. ``spawn`` starts it (it imports torch and waits);
    ``start`` tells it which GPUs it may see and waits until their contexts are open."""

    cmd: list[str]
    start_timeout_s: float
    proc: subprocess.Popen[str] | None = None
    hello: dict[str, Any] = field(default_factory=dict)
    visible: str | None = None  # CUDA_VISIBLE_DEVICES for the child; None = every GPU
    peers: bool = True
    spawned_at: float = 0.0
    hello_sent_at: float = 0.0
    restarts: int = 0

    def spawn(self) -> None:
        """Start the child without waiting: torch's start-up overlaps the probe."""
        if self.proc is not None:
            return
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", PYTHONUNBUFFERED="1")
        # The child sets its own CUDA_VISIBLE_DEVICES once told its GPUs; until then it
        # must not inherit one that could mean other GPUs.
        env.pop("CUDA_VISIBLE_DEVICES", None)
        # NVLink multicast stays off in anything we start (it can take shared GPUs down).
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        self.spawned_at = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
        except OSError as exc:
            raise BandwidthUnavailable(f"cannot start the copy timer: {exc}") from None

    fallback: list[str] | None = None  # a second timer to try when this one cannot start

    def __post_init__(self) -> None:
        if self.fallback is None and self.cmd == default_worker_cmd():
            self.fallback = torch_worker_cmd()

    def start(self) -> None:
        """Start the process (again, after a hang) and wait for its hello; where the driver-API timer
        cannot start, try the torch timer before giving up."""
        if self.hello:
            self.restarts += 1
        self.spawn()
        self.hello_sent_at = time.monotonic()
        try:
            answer = self._hello()
        except BandwidthUnavailable as first:
            if not self.fallback:
                raise
            # The driver-API timer needs libcuda's stream memory operations; torch's timer
            # needs only the runtime. Try it before giving up, and report the first reason.
            self.stop()
            self.cmd, self.fallback = self.fallback, None
            self.spawn()
            self.hello_sent_at = time.monotonic()
            try:
                answer = self._hello()
            except BandwidthUnavailable as second:
                raise BandwidthUnavailable(f"{first} (torch timer: {second})") from None
        self.hello = answer

    def _hello(self) -> dict[str, Any]:
        answer = self.ask({"op": "hello", "visible": self.visible, "peers": self.peers}, self.start_timeout_s)
        if answer is None:
            raise BandwidthUnavailable(f"the copy timer did not start within {self.start_timeout_s:.0f} s")
        if "error" in answer:
            self.stop()
            raise BandwidthUnavailable(str(answer["error"]))
        return answer

    def ask(self, task: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send one task; the answer, or None when the child hung (it is then killed)."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(task) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died()
        ready, _, _ = select.select([proc.stdout], [], [], max(timeout_s, 0.0))
        if not ready:
            self.stop()
            return None
        line = proc.stdout.readline()
        if not line:
            return self._died()
        try:
            answer: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            return {"error": f"copy timer answered garbage: {line[:80]!r}"}
        return answer

    def _died(self) -> dict[str, Any]:
        err = ""
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.wait(timeout=5)
            lines = self.proc.stderr.read().strip().splitlines()
            err = next((ln for ln in reversed(lines) if ln.strip()), "")
        code = self.proc.returncode if self.proc is not None else None
        self.proc = None
        if "No module named 'torch'" in err:
            raise BandwidthUnavailable("torch is not installed: pip install 'topodoctor[bandwidth]'")
        return {"error": f"copy timer died (exit {code}): {err[:160]}"}

    def stop(self) -> None:
        """Kill the process and reap it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def default_worker_cmd() -> list[str]:
    """The copy timer on the CUDA driver API (no torch: starts in tens of milliseconds)."""
    return [sys.executable, "-m", "topodoctor.measure.copies.cuda_timer"]


def torch_worker_cmd() -> list[str]:
    """The copy timer on torch, for drivers without stream memory operations."""
    return [sys.executable, "-m", "topodoctor.measure.copies.runner"]


def _measurements(
    task: Task, answer: dict[str, Any] | None, timeout_s: float, nvlink_bytes: int | None
) -> list[Measurement]:
    size = int(task.payload["size"])

    def failed(dst: int, why: str) -> Measurement:
        return Measurement(task.mode, task.src, dst, size, None, "unknown", None, None, why)

    if answer is None:
        why = f"timeout: no answer after {timeout_s:g} s (copy timer killed)"
        return [failed(d, why) for d in task.dsts]
    if "error" in answer:
        return [failed(d, str(answer["error"])) for d in task.dsts]
    results = answer.get("results") or [dict(answer, dst=task.payload.get("dst"))]
    by_ordinal = dict(zip(task.payload.get("dsts", [task.payload.get("dst")]), task.dsts))
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
                value=Stats.of(res["samples"]),
                path=res.get("path", "unknown"),
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
        for phase, seconds in inner.items():
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
    settings: Settings,
    nvml: NvmlApi | None = None,
    worker_cmd: list[str] | None = None,
    worker: Worker | None = None,
    deadline: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    scope: Scope | None = None,
) -> BandwidthResult:
    """Measure the scope's GPUs (by default the job's, from the environment; see
    topodoctor.topology.scope), or ``settings.devices``. The child process sees only those GPUs.
    ``nvml`` (live) adds the idle check and NVLink byte counters."""
    t0 = time.monotonic()
    scope = scope or resolve(snap, os.environ)
    live = {g.index for g in snap.gpus if g.lost is None}
    wanted = set(settings.devices) if settings.devices is not None else set(scope.gpus) & live
    unknown = wanted - {g.index for g in snap.gpus}
    if unknown:
        if worker is not None:
            worker.stop()
        raise BandwidthUnavailable(f"no GPU {sorted(unknown)} on this host")
    worker = worker or Worker(worker_cmd or default_worker_cmd(), settings.start_timeout_s)
    worker.visible = cuda_visible(snap, wanted)
    worker.peers = any(m in ("oneway", "bidir", "latency") for m in settings.modes) and len(wanted) > 1
    if not worker.spawned_at:
        worker.spawn()
    timings = Timings()
    worker.start()
    timings.start_up(worker)
    by_bus = {g.bus_id: g for g in snap.gpus if isinstance(g.bus_id, str)}
    ids: list[GpuIdentity] = []
    for d in worker.hello.get("devices", []):
        gpu = by_bus.get(d["bus_id"])
        if gpu is not None:
            ids.append(GpuIdentity(gpu.index, int(d["ordinal"]), d["bus_id"], str(d["name"])))
    seen = {i.index for i in ids}
    if seen != wanted:
        worker.stop()
        shown = f"{noun(len(seen), 'GPU')} {sorted(seen)}"
        detail = f"CUDA shows {shown}, asked for {sorted(wanted)} (CUDA_VISIBLE_DEVICES={worker.visible})"
        raise BandwidthUnavailable(f"the copy timer does not see the GPUs to measure: {detail}")
    ids.sort(key=lambda i: i.index)
    ordinal = {i.index: i.cuda_ordinal for i in ids}
    links = {g.index: len(g.nvlinks) for g in snap.gpus}
    acts = tuple(Activity(i.index, *activity(nvml, i.index)) for i in ids) if nvml else ()
    tasks = plan_tasks(settings, ordinal)
    out: list[Measurement] = []
    try:
        for n, task in enumerate(tasks):
            if deadline is not None and time.monotonic() > deadline:
                raise BudgetExceeded(f"bandwidth pass ran out of time after {n} of {len(tasks)} measurements")
            if progress:
                progress(n, len(tasks), f"{task.mode} {task.src}->{','.join(map(str, task.dsts))}")
            if worker.proc is None:
                worker.start()
            before = nvlink_tx_bytes(nvml, task.src, links.get(task.src, 0)) if nvml and task.src >= 0 else None
            timeout = settings.pair_timeout_s * len(task.dsts)
            if deadline is not None:
                timeout = min(timeout, max(0.1, deadline - time.monotonic()))
            t_task = time.monotonic()
            answer = worker.ask(task.payload, timeout)
            elapsed = time.monotonic() - t_task
            timings.task(answer, elapsed)
            after = nvlink_tx_bytes(nvml, task.src, links.get(task.src, 0)) if nvml and before is not None else None
            moved = after - before if (before is not None and after is not None) else None
            share = round(elapsed / len(task.dsts), 3)
            out += [replace(m, elapsed_s=share) for m in _measurements(task, answer, timeout, moved)]
        if progress:
            progress(len(tasks), len(tasks), "done")
    finally:
        t_stop = time.monotonic()
        worker.stop()
        timings.add("teardown", time.monotonic() - t_stop)
    timings.add("total_since_spawn", time.monotonic() - (worker.spawned_at or t0))
    if worker.restarts:
        timings.add("restarts", worker.restarts)
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
            "scope": scope.describe() if settings.devices is None else f"devices {sorted(wanted)}",
        },
        snapshot=snap,
        timings=timings.rounded(),
    )
