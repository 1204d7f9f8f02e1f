"""What a timer process serves: the one CUDA timer (``kernels.KernelTimer``) under a plan.

- ``FITNESS``, the fitness tests (measure/fitness/session.py): HBM copies, SM copies to and from
  the host, pointer chase, host copies; the kernels are required (a hello that cannot load them
  fails, saying what to install);
- ``BANDWIDTH``, a bandwidth pass (measure/copies/worker.py, forked beside the probe by
  measure/copies/forked.py): copies between GPUs, latency, host copies, SM copies and pointer
  chase, buffers made ahead; the kernels optional, the data checked on the GPU (``on_gpu``).

``python -m topodoctor.measure.timer PLAN`` runs one (``__main__``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from topodoctor.core.signals import die_with_parent
from topodoctor.measure.timer import copy_kernels, engine
from topodoctor.measure.timer.copy_kernels import CopyKernel
from topodoctor.measure.timer.kernels import KernelTimer
from topodoctor.measure.timer.on_gpu import OnGpu
from topodoctor.measure.timer.protocol import PARENT_ENV, Answer, Op, serve_timer


@dataclass(frozen=True)
class TimerPlan:
    """A timer process's tasks, the SM copies' kernel it starts with, and whether the bandwidth
    pass's part (``on_gpu.OnGpu``) checks the data on the GPU."""

    name: str
    ops: tuple[str, ...]
    copy_kernel: CopyKernel
    on_gpu: bool


FITNESS = TimerPlan("fitness", ("hbm", "sm_copy", "chase", "host"), copy_kernels.STRIDE, on_gpu=False)
BANDWIDTH = TimerPlan(
    "bandwidth", ("p2p", "latency", "host", "sm_copy", "chase", "prepare"), copy_kernels.PEER, on_gpu=True
)
PLANS = {p.name: p for p in (FITNESS, BANDWIDTH)}


def timer(plan: TimerPlan) -> KernelTimer:
    """A new timer for ``plan``, with its part where the plan has one."""
    t = KernelTimer(plan.copy_kernel)
    if plan.on_gpu:
        t.checks = OnGpu(t)
    return t


def tasks(plan: TimerPlan) -> Mapping[str, Op]:
    """A new timer's tasks by name: the hello and each of the plan's ops (``prepare`` is the part's)."""
    t = timer(plan)
    owners = {"prepare": t.checks} if t.checks is not None else {}
    return {name: getattr(owners.get(name, t), name) for name in ("hello", *plan.ops)}


def serve(plan: TimerPlan, first: Answer | None = None) -> None:
    """Serve ``plan``'s tasks on stdin (``first`` before them), a new timer at each hello."""
    serve_timer(lambda: tasks(plan), plan.ops, engine.error_text, first)


def serve_forked(first: Answer | None, began: float) -> None:
    """A forked bandwidth timer's work (measure/copies/forked.py, which has set the process up and
    began to load the timer at ``began``): ``first``, then the tasks on stdin."""
    engine.STARTED.update(module=began, imports=time.monotonic())
    serve(BANDWIDTH, first)


def main(plan: TimerPlan) -> None:
    """A spawned timer's entry point: die with whoever spawned it, then serve ``plan``'s tasks."""
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))
    serve(plan)
