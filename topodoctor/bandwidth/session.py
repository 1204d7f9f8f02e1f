"""Driving the copy timer: one child process, one task at a time, each under its own timeout.

The child (``bandwidth/runner.py``) pays torch's start-up once. If a task outlives its
timeout the child is killed, the task is reported as hung, and a fresh child carries on
with the rest, so a wedged copy costs one timeout, never the node.
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

from topodoctor.bandwidth.result import (
    BANDWIDTH_SCHEMA_VERSION,
    Activity,
    BandwidthResult,
    GpuIdentity,
    Measurement,
    Mode,
    Stats,
)
from topodoctor.errors import BandwidthUnavailable, BudgetExceeded
from topodoctor.model import HostSnapshot
from topodoctor.probe.api import NvmlApi

MiB = 1 << 20


@dataclass(frozen=True)
class Settings:
    modes: tuple[Mode, ...] = ("oneway", "bidir", "latency", "h2d", "d2h")
    size_bytes: int = 256 * MiB
    iters: int = 4
    samples: int = 5
    latency_bytes: int = 4
    latency_iters: int = 500
    pair_timeout_s: float = 20.0
    start_timeout_s: float = 90.0
    devices: tuple[int, ...] | None = None  # NVML indices; None = all

    @staticmethod
    def quick(devices: tuple[int, ...] | None = None) -> Settings:
        """Sized for a prolog: one-way pairs and host links, small buffers, three samples."""
        return Settings(modes=("oneway", "h2d", "d2h"), size_bytes=64 * MiB, iters=4, samples=3, devices=devices)


@dataclass
class Worker:
    cmd: list[str]
    start_timeout_s: float
    proc: subprocess.Popen[str] | None = None
    hello: dict[str, Any] = field(default_factory=dict)

    def spawn(self) -> None:
        """Start the child without waiting: torch's ~6 s start-up overlaps the probe."""
        if self.proc is not None:
            return
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", PYTHONUNBUFFERED="1")
        # NVLink multicast stays off in anything we start (it can take shared GPUs down).
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        try:
            self.proc = subprocess.Popen(
                self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
        except OSError as exc:
            raise BandwidthUnavailable(f"cannot start the copy timer: {exc}") from None

    def start(self) -> None:
        self.spawn()
        answer = self.ask({"op": "hello"}, self.start_timeout_s)
        if answer is None:
            raise BandwidthUnavailable(f"the copy timer did not start within {self.start_timeout_s:.0f} s")
        if "error" in answer:
            raise BandwidthUnavailable(str(answer["error"]))
        self.hello = answer

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
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def default_worker_cmd() -> list[str]:
    return [sys.executable, "-m", "topodoctor.bandwidth.runner"]


@dataclass(frozen=True)
class Task:
    mode: Mode
    src: int  # NVML index, -1 = host
    dst: int
    payload: dict[str, Any]


def plan_tasks(settings: Settings, ordinal: dict[int, int]) -> list[Task]:
    """Every ordered pair for one-way and latency, every unordered pair for both-ways."""
    idx = sorted(ordinal)
    s = settings
    tasks: list[Task] = []
    base = {"op": "p2p", "size": s.size_bytes, "iters": s.iters, "samples": s.samples}
    for mode in s.modes:
        if mode in ("oneway", "latency"):
            for a in idx:
                for b in idx:
                    if a == b:
                        continue
                    payload = dict(base, src=ordinal[a], dst=ordinal[b], mode=mode)
                    if mode == "latency":
                        # The hold must outlast queueing every copy (a few us each from Python):
                        # a copy queued after the hold ends would add a launch gap to the latency.
                        hold = max(5.0, s.latency_iters * 0.05)
                        payload.update(size=s.latency_bytes, iters=s.latency_iters, hold_ms=hold)
                    tasks.append(Task(mode, a, b, payload))
        elif mode == "bidir":
            for i, a in enumerate(idx):
                for b in idx[i + 1 :]:
                    tasks.append(Task(mode, a, b, dict(base, src=ordinal[a], dst=ordinal[b], mode="bidir")))
        else:
            for a in idx:
                payload = {
                    "op": "host",
                    "dev": ordinal[a],
                    "dir": mode,
                    "size": s.size_bytes,
                    "iters": s.iters,
                    "samples": s.samples,
                }
                tasks.append(Task(mode, -1 if mode == "h2d" else a, a if mode == "h2d" else -1, payload))
    return tasks


def _measurement(task: Task, answer: dict[str, Any] | None, timeout_s: float, nvlink_bytes: int | None) -> Measurement:
    size = int(task.payload["size"])
    if answer is None:
        return Measurement(
            task.mode,
            task.src,
            task.dst,
            size,
            None,
            "unknown",
            None,
            None,
            f"timeout: no answer after {timeout_s:g} s (copy timer killed)",
        )
    if "error" in answer:
        return Measurement(task.mode, task.src, task.dst, size, None, "unknown", None, None, str(answer["error"]))
    rev = answer.get("reverse")
    return Measurement(
        mode=task.mode,
        src=task.src,
        dst=task.dst,
        size_bytes=size,
        value=Stats.of(answer["samples"]),
        path=answer.get("path", "unknown"),
        nvlink_bytes=nvlink_bytes,
        verified=answer.get("verified"),
        error=None,
        reverse=Stats.of(rev) if rev else None,
    )


def run(
    snap: HostSnapshot,
    settings: Settings,
    nvml: NvmlApi | None = None,
    worker_cmd: list[str] | None = None,
    worker: Worker | None = None,
    deadline: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> BandwidthResult:
    """Measure. ``nvml`` (live) adds the idle check and NVLink byte counters."""
    from topodoctor.probe.counters import activity, nvlink_tx_bytes

    t0 = time.monotonic()
    worker = worker or Worker(worker_cmd or default_worker_cmd(), settings.start_timeout_s)
    worker.start()
    by_bus = {g.bus_id: g for g in snap.gpus if isinstance(g.bus_id, str)}
    ids: list[GpuIdentity] = []
    for d in worker.hello.get("devices", []):
        gpu = by_bus.get(d["bus_id"])
        if gpu is not None:
            ids.append(GpuIdentity(gpu.index, int(d["ordinal"]), d["bus_id"], str(d["name"])))
    wanted = set(settings.devices) if settings.devices is not None else {i.index for i in ids}
    missing = wanted - {i.index for i in ids}
    if missing:
        worker.stop()
        raise BandwidthUnavailable(f"GPU(s) {sorted(missing)} not visible to CUDA here (CUDA_VISIBLE_DEVICES?)")
    ids = [i for i in ids if i.index in wanted]
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
                progress(n, len(tasks), f"{task.mode} {task.src}->{task.dst}")
            if worker.proc is None:
                worker.start()
            before = nvlink_tx_bytes(nvml, task.src, links.get(task.src, 0)) if nvml and task.src >= 0 else None
            timeout = settings.pair_timeout_s
            if deadline is not None:
                timeout = min(timeout, max(0.1, deadline - time.monotonic()))
            t_task = time.monotonic()
            answer = worker.ask(task.payload, timeout)
            elapsed = time.monotonic() - t_task
            after = nvlink_tx_bytes(nvml, task.src, links.get(task.src, 0)) if nvml and before is not None else None
            moved = after - before if (before is not None and after is not None) else None
            out.append(replace(_measurement(task, answer, timeout, moved), elapsed_s=round(elapsed, 3)))
        if progress:
            progress(len(tasks), len(tasks), "done")
    finally:
        worker.stop()
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
            "iters": settings.iters,
            "samples": settings.samples,
            "pair_timeout_s": settings.pair_timeout_s,
        },
        snapshot=snap,
    )
