"""Driving the fitness tests: the kernel timer child (HBM, SM copies, latency) and the GEMM child
(compute stress), each under the command's deadline, with NVML readings around them.

A GPU another process is using is not measured (its numbers would be the other job's, and our
load would slow that job): its figures are ``refused``, which the rules report as "could not
check", never as a pass. A child that hangs is killed; nothing is left on a GPU.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from topodoctor.core.errors import BandwidthUnavailable
from topodoctor.core.stats import median
from topodoctor.core.text import plural
from topodoctor.measure.copies.session import Timings, Worker
from topodoctor.measure.timer import copy_kernels
from topodoctor.model.copies import Activity, GpuIdentity, Stats
from topodoctor.model.fitness_results import (
    FITNESS_SCHEMA_VERSION,
    HOST,
    REASON_NAMES,
    Figure,
    FitnessResult,
    GpuLimits,
    Stress,
)
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.api import NvmlApi
from topodoctor.probe.counters import activity
from topodoctor.probe.during import watch
from topodoctor.probe.processes import foreign_processes
from topodoctor.probe.sampler import Sampler, limits
from topodoctor.probe.sysfs import LiveSysfs, Sysfs
from topodoctor.topology.scope import Scope, cuda_visible, resolve

MiB = 1 << 20


@dataclass(frozen=True)
class FitnessPlan:
    """What a level measures. ``quick``: HBM (copy engine and kernel) and host latency per GPU,
    a few seconds in all. ``long``: adds the GEMM stress on every GPU at once, SM copies (pull
    and push, one way and both ways) for every GPU pair and host-GPU, and latency to every peer."""

    level: str = "quick"
    hbm_size_bytes: int = 512 * MiB
    hbm_iters: int = 4
    samples: int = 5
    hbm_kernel: str = copy_kernels.DEFAULT.name
    copy_size_bytes: int = 256 * MiB
    copy_iters: int = 2
    # reads per latency sample, spread over every SM as nvbandwidth does (it reads 1 000 000);
    # fewer keep a level short and cost 0.2-0.3 % of launch time in the figure
    latency_accesses: int = 100_000
    latency_samples: int = 3
    sm_copies: bool = False
    gemm_seconds: float = 0.0
    gemm_n: int = 8192
    task_timeout_s: float = 20.0
    start_timeout_s: float = 20.0

    @staticmethod
    def for_level(level: str) -> FitnessPlan:
        """The plan of ``check --level quick`` or ``long``."""
        if level == "long":
            return FitnessPlan(
                "long", hbm_iters=8, samples=7, latency_accesses=200_000, sm_copies=True, gemm_seconds=60.0
            )
        return FitnessPlan("quick")


def timer_cmd() -> list[str]:
    """The command line of the fitness timer child."""
    return [sys.executable, "-m", "topodoctor.measure.timer", "fitness"]


def gemm_cmd() -> list[str]:
    """The command line of the GEMM stress child."""
    return [sys.executable, "-m", "topodoctor.measure.fitness.worker_gemm"]


def start_timer(plan: FitnessPlan) -> Worker:
    """The kernel timer, spawned before the probe so that its start-up overlaps it."""
    worker = Worker(timer_cmd(), plan.start_timeout_s)
    worker.spawn()
    return worker


def _tasks(plan: FitnessPlan, ordinals: list[int], cpus: dict[int, list[int]] | None = None) -> list[dict[str, Any]]:
    """The timer's tasks for the GPUs of CUDA ``ordinals``; ``cpus``: each one's CPUs, where its
    host memory is allocated."""
    common = {"samples": plan.samples}
    hbm = {"size": plan.hbm_size_bytes, "iters": plan.hbm_iters, **common}
    chase = {"accesses": plan.latency_accesses, "samples": plan.latency_samples}
    copy = {"size": plan.copy_size_bytes, "iters": plan.copy_iters, **common}
    out: list[dict[str, Any]] = []
    for d in ordinals:
        out += [{"op": "hbm", "dev": d, "engine": "ce", **hbm}]
        out.append({"op": "hbm", "dev": d, "engine": "sm", "kernel": plan.hbm_kernel, **hbm})
        out.append({"op": "chase", "dev": d, "target": HOST, "cpus": (cpus or {}).get(d), **chase})
        if plan.sm_copies:
            for bidir in (False, True):
                out.append({"op": "sm_copy", "src": HOST, "dst": d, "initiator": "pull", "bidir": bidir, **copy})
            out.append({"op": "sm_copy", "src": d, "dst": HOST, "initiator": "push", "bidir": False, **copy})
    if plan.sm_copies:
        for a, b in itertools.permutations(ordinals, 2):
            out.append({"op": "chase", "dev": a, "target": b, **chase})
            for initiator in ("pull", "push"):
                out.append({"op": "sm_copy", "src": a, "dst": b, "initiator": initiator, "bidir": False, **copy})
                if a < b:
                    out.append({"op": "sm_copy", "src": a, "dst": b, "initiator": initiator, "bidir": True, **copy})
    return out


def _figure(task: dict[str, Any], index: dict[int, int], answer: dict[str, Any] | None, timeout_s: float) -> Figure:
    op = task["op"]
    kind: Any
    unit: Any
    if op == "hbm":
        kind, src, dst, initiator, unit = "hbm", task["dev"], task["dev"], task["engine"], "GB/s"
    elif op == "chase":
        kind, src, dst, initiator, unit = "latency", task["dev"], task["target"], "sm", "ns"
    else:
        kind, src, dst, initiator, unit = "sm_copy", task["src"], task["dst"], task["initiator"], "GB/s"
    src, dst = index.get(src, src), index.get(dst, dst)
    base = Figure(
        kind,
        src,
        dst,
        initiator,
        None,
        unit,
        bidir=bool(task.get("bidir")),
        size_bytes=int(task.get("size", 0)),
    )
    if answer is None:
        return _with(base, error=f"timeout: no answer after {timeout_s:g} s (timer killed)")
    if "error" in answer:
        return _with(base, error=str(answer["error"]))
    rev = answer.get("reverse")
    return _with(
        base, value=Stats.of(answer["samples"]), verified=answer.get("verified"), reverse=Stats.of(rev) if rev else None
    )


def _with(f: Figure, **changes: Any) -> Figure:
    from dataclasses import replace

    return replace(f, **changes)


def _refused(plan: FitnessPlan, index: int, why: str, others: list[int]) -> list[Figure]:
    """The figures a plan would have measured on GPU ``index``, each refused with ``why``."""
    kinds: list[tuple[str, int, int, str]] = [
        ("hbm", index, index, "ce"),
        ("hbm", index, index, "sm"),
        ("latency", index, HOST, "sm"),
    ]
    if plan.gemm_seconds > 0:
        kinds.append(("compute", index, index, "bf16"))
    if plan.sm_copies:
        kinds += [("sm_copy", HOST, index, "pull"), ("sm_copy", index, HOST, "push")]
        kinds += [("latency", index, o, "sm") for o in others]
    units = {"hbm": "GB/s", "latency": "ns", "compute": "TFLOP/s", "sm_copy": "GB/s"}
    return [Figure(k, s, d, i, None, units[k], error=why, refused=True) for k, s, d, i in kinds]  # type: ignore[arg-type]


def run(
    snap: HostSnapshot,
    plan: FitnessPlan,
    nvml: NvmlApi | None,
    deadline: float,
    worker: Worker | None = None,
    scope: Scope | None = None,
    procfs: Sysfs | None = None,
) -> FitnessResult:
    """Measure the scope's idle GPUs (the job's, from the environment, by default); ``procfs``: where
    the owners of a GPU's processes are read (the live /proc by default)."""
    t0 = time.monotonic()
    scope = scope or resolve(snap, os.environ)
    live = sorted(g.index for g in snap.gpus if g.lost is None and g.index in scope.gpus)
    figures: list[Figure] = []
    errors: list[str] = []
    acts, lims = _readings(nvml, live)
    busy = foreign_processes(nvml, [a.index for a in acts if (a.processes or 0) > 0], procfs or LiveSysfs())
    for i, n in busy.items():
        why = f"GPU{i} is busy: {plural(n, 'compute process')} of another job; not measured"
        figures += _refused(plan, i, why, live)
    wanted = [i for i in live if i not in busy]
    during = watch(nvml, snap, wanted)
    timings = Timings()
    ids: list[GpuIdentity] = []
    if wanted:
        worker = worker or start_timer(plan)
        during.start()  # NVML on a thread while the kernels run (the GEMM stress samples its own)
        try:
            ids = _kernel_tests(snap, plan, worker, wanted, deadline, figures, timings)
        except BandwidthUnavailable as exc:
            for i in wanted:
                figures += [f for f in _refused(plan, i, str(exc), wanted) if f.kind != "compute"]
        finally:
            during.stop()
            worker.stop()
        if plan.gemm_seconds > 0:
            t_gemm = time.monotonic()
            stress, compute = _gemm(snap, plan, nvml, wanted, deadline)
            figures += compute
            timings.add("compute_stress", time.monotonic() - t_gemm)
        else:
            stress = []
    elif worker is not None:
        worker.stop()
        stress = []
    else:
        stress = []
    if not live:
        errors.append("no GPU to measure in this scope")
    return FitnessResult(
        kind="fitness",
        schema_version=FITNESS_SCHEMA_VERSION,
        host=snap.host.hostname,
        level=plan.level,
        method="CUDA driver API (cuMemcpyDtoDAsync, PTX kernels); torch bf16 GEMM",
        gpus=tuple(ids),
        limits=tuple(lims),
        activity=tuple(acts),
        figures=tuple(figures),
        stress=tuple(stress),
        wall_s=round(time.monotonic() - t0, 3),
        errors=tuple(errors),
        settings={"plan": plan.__dict__, "scope": scope.describe()},
        timings=timings.rounded(),
        during=during.sampling,
    )


def _readings(nvml: NvmlApi | None, live: list[int]) -> tuple[list[Activity], list[GpuLimits]]:
    if nvml is None:
        return [], []

    acts = [Activity(i, *activity(nvml, i)) for i in live]
    lims = []
    for i in live:
        lim = limits(nvml, i)
        lims.append(
            GpuLimits(i, lim.sm_mhz_max, lim.mem_mhz_max, lim.bus_width_bits, lim.power_limit_w, lim.hbm_peak_gbps)
        )
    return acts, lims


def _kernel_tests(
    snap: HostSnapshot,
    plan: FitnessPlan,
    worker: Worker,
    wanted: list[int],
    deadline: float,
    figures: list[Figure],
    timings: Timings,
) -> list[GpuIdentity]:
    worker.visible = cuda_visible(snap, set(wanted))
    worker.peers = plan.sm_copies and len(wanted) > 1
    worker.start()
    timings.start_up(worker)
    by_bus = {g.bus_id: g.index for g in snap.gpus if isinstance(g.bus_id, str)}
    ids = [
        GpuIdentity(by_bus[d["bus_id"]], int(d["ordinal"]), d["bus_id"], str(d["name"]))
        for d in worker.hello.get("devices", [])
        if d["bus_id"] in by_bus
    ]
    if sorted(i.index for i in ids) != wanted:
        raise BandwidthUnavailable(f"the kernel timer does not see the GPUs to measure ({worker.visible})")
    index = {i.cuda_ordinal: i.index for i in ids}
    near = {g.index: list(g.cpu_affinity) for g in snap.gpus if isinstance(g.cpu_affinity, tuple)}
    tasks = _tasks(plan, sorted(index), {o: near[i] for o, i in index.items() if i in near})
    for n, task in enumerate(tasks):
        left = deadline - time.monotonic()
        if left <= 0.1:
            why = f"budget spent after {n} of {len(tasks)} measurements"
            figures += [_with(_figure(t, index, {"error": why}, 0), refused=True) for t in tasks[n:]]
            break
        if worker.proc is None:
            worker.start()
        timeout = min(plan.task_timeout_s, left)
        t_task = time.monotonic()
        answer = worker.ask(task, timeout)
        timings.task(answer, time.monotonic() - t_task)
        figures.append(_with(_figure(task, index, answer, timeout), elapsed_s=round(time.monotonic() - t_task, 3)))
    return ids


def _gemm(
    snap: HostSnapshot, plan: FitnessPlan, nvml: NvmlApi | None, wanted: list[int], deadline: float
) -> tuple[list[Stress], list[Figure]]:
    """The GEMM child on every wanted GPU at once, NVML sampled meanwhile; killed at the deadline."""
    # CUDA numbers the visible GPUs in PCI order (CUDA_DEVICE_ORDER=PCI_BUS_ID), as sorted bus ids
    order = [g.index for g in sorted((g for g in snap.gpus if g.index in wanted), key=lambda g: str(g.bus_id))]
    env = dict(
        os.environ,
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
        PYTHONUNBUFFERED="1",
        CUDA_VISIBLE_DEVICES=cuda_visible(snap, set(wanted)) or "",
    )
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    seconds = min(plan.gemm_seconds, max(0.0, deadline - time.monotonic() - plan.start_timeout_s))

    def failed(why: str) -> tuple[list[Stress], list[Figure]]:
        return [], [Figure("compute", i, i, "bf16", None, "TFLOP/s", error=why) for i in wanted]

    if seconds < 1.0:
        return [], [
            Figure(
                "compute", i, i, "bf16", None, "TFLOP/s", error="budget too short for the compute stress", refused=True
            )
            for i in wanted
        ]
    sampler = Sampler(nvml, wanted).start() if nvml is not None else None
    proc = subprocess.Popen(
        gemm_cmd(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    answers: list[dict[str, Any]] = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"seconds": seconds, "n": plan.gemm_n}) + "\n")
        proc.stdin.flush()
        while not answers or ("gpus" not in answers[-1] and "error" not in answers[-1]):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
            line = proc.stdout.readline() if ready else ""
            if not line:
                err = (proc.stderr.read() if proc.stderr and proc.poll() is not None else "").strip().splitlines()
                return failed("the GEMM worker " + ("timed out" if not ready else f"died: {err[-1] if err else ''}"))
            answers.append(json.loads(line))
    finally:
        proc.kill()
        proc.wait()
        readings = sampler.stop() if sampler is not None else []
    last = answers[-1]
    if "error" in last:  # the worker answers so only when it cannot start: no torch, no CUDA
        why = str(last["error"])
        return [], [Figure("compute", i, i, "bf16", None, "TFLOP/s", error=why, refused=True) for i in wanted]
    t0, t1 = last["window"]
    figures = []
    for g in last["gpus"]:
        i = order[g["ordinal"]]
        figures.append(
            Figure(
                "compute",
                i,
                i,
                "bf16",
                Stats.of(g["samples"] or [g["tflops"]]),
                "TFLOP/s",
                verified=bool(g["verified"]),
                size_bytes=plan.gemm_n,
            )
        )
    return [_stress(i, [r for r in readings if r.index == i and t0 <= r.t <= t1]) for i in wanted], figures


def _stress(index: int, rs: list[Any]) -> Stress:
    sm = [r.sm_mhz for r in rs if r.sm_mhz is not None]
    power = [r.power_w for r in rs if r.power_w is not None]
    temp = [r.temp_c for r in rs if r.temp_c is not None]
    bits = [r.reasons for r in rs if r.reasons is not None]
    seen = 0
    for b in bits:
        seen |= b
    counts = {name: sum(1 for b in bits if b & bit) for bit, name in REASON_NAMES.items() if seen & bit}
    return Stress(
        index,
        len(rs),
        median(sm) if sm else None,
        min(sm) if sm else None,
        max(power) if power else None,
        max(temp) if temp else None,
        seen,
        counts,
    )
