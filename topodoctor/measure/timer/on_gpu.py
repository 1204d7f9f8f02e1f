"""The bandwidth pass's part of the one CUDA timer (``plans.BANDWIDTH``): the kernels optional,
the data of every copy checked on the GPU that holds it, buffers made ahead of the tasks.

A pass measures between GPUs the copy engine's copies (``engine.Timer``), the SM kernels' copies
and pointer chase (``kernels.KernelTimer``, nvbandwidth's method: the receiving GPU's kernel reads
across the link, a one-thread walk per SM times the load latency), and checks the data with
``td_same`` (``ptx``) instead of a read-back over PCIe and a compare by the CPU.

The kernels are optional here, unlike for the fitness tests: where the driver cannot compile
PTX, the copy engine's copies still run and are checked by the CPU, and every SM task answers
why it could not run (``unavailable``). A kernel never reads through a pair without peer access:
its load would fault and take the context, and every task after it, down with it.
"""

from __future__ import annotations

import ctypes
import threading
import time
from ctypes import c_uint32, c_uint64, c_void_p

from topodoctor.measure.timer import ptx
from topodoctor.measure.timer.engine import TimerGpu
from topodoctor.measure.timer.kernels import KernelTimer
from topodoctor.measure.timer.protocol import Answer, Clock

SAME_BLOCK = 512
SAME_BLOCKS_PER_SM = 4  # enough loads in flight to read both buffers at the memory's speed


class OnGpu:
    """The bandwidth pass's part, held by its timer ``t`` (``t.checks``): the kernels loaded where
    they can be, nvbandwidth's grid for peer copies, and data checked on the GPU."""

    def __init__(self, t: KernelTimer) -> None:
        self.t = t
        self.same_fn: dict[int, c_void_p] = {}
        self.kernels_missing: str | None = None

    def hello(self, answer: Answer, task: Answer) -> Answer:
        """After CUDA started as the copy timer starts it, load the kernels on every GPU; where
        they cannot load, say why (``kernels_missing``) and go on with the copy engine alone."""
        t = self.t
        clock = Clock()
        if task.get("kernels", True) and t.gpus:
            try:
                t._each(self._load_all)
            except RuntimeError as exc:
                self.kernels_missing = f"SM kernels unavailable: {exc}"
                t.kernels.clear()
                self.same_fn.clear()
        elif not task.get("kernels", True):
            self.kernels_missing = "SM kernels not loaded (not asked)"
        clock.lap("kernels_jit")
        timings = dict(answer.get("timings") or {}, **clock.spent)
        method = "CUDA driver API: cuMemcpyPeerAsync (copy engine)"
        if not self.kernels_missing:
            method += f", PTX kernels (SM copies {t.copy_kernel.name}, pointer chase, data checks)"
        clock_marks = dict(answer.get("clock") or {}, ready=time.monotonic())
        return dict(answer, method=method, timings=timings, kernels_missing=self.kernels_missing, clock=clock_marks)

    def _load_all(self, g: TimerGpu) -> None:
        t = self.t
        t._load(g)
        self.same_fn[g.ordinal] = t._function(t._module(ptx.same_module()), ptx.SAME)
        t._device(g, 16, "same-flag")  # the data check's flag, made before any task needs it

    # --- buffers ahead of the tasks
    def prepare(self, task: Answer) -> Answer:
        """Make now, while the parent still probes, the buffers and streams the pass's tasks will
        use (``modes``, ``size`` between GPUs, ``host_size`` to the host): the tasks then find
        them made. Every GPU at once, one thread each, and the pinned host buffer beside them."""
        t = self.t
        clock = Clock()
        modes = set(task.get("modes") or ())
        size, host_size = int(task["size"]), int(task["host_size"])
        roles = self._roles(modes)
        host = bool(modes & {"h2d", "d2h"}) and host_size > 0
        for n in {size if roles else 0, host_size if host else 0} - {0}:
            t._pattern(n)  # shared by every thread below: made first
        failed: list[str] = []

        def pinned() -> None:
            try:
                t._fill(t._host(host_size, "io"), host_size)  # the first h2d finds it filled
            except Exception as exc:  # raised below, after the GPUs' threads
                failed.append(f"pinned host memory: {exc}")

        beside = threading.Thread(target=pinned) if host else None
        if beside is not None:
            beside.start()

        def one(g: TimerGpu) -> None:
            for role in roles:
                t._device(g, size, role)
            if host:
                t._device(g, host_size, "src")
                t._device(g, host_size, "dst")
            t._stream(g, 0)
            if len(t.gpus) > 1:
                t._stream(g, 1)

        try:
            t._each(one)
        finally:
            if beside is not None:
                beside.join()
        if failed:
            raise RuntimeError(failed[0])
        clock.lap("allocation")
        return {"timings": clock.spent, "clock": {"prepared": time.monotonic()}}

    def _roles(self, modes: set[str]) -> list[str]:
        """The device buffers of ``size`` bytes each GPU holds for ``modes``: a source and a
        destination for copies between GPUs (the copy engine's and the SM kernels'), and a second
        destination for the SM copies both ways at once (``dst2``)."""
        if len(self.t.gpus) < 2:
            return []
        roles = ["src", "dst"] if modes & {"oneway", "bidir", "sm_oneway", "sm_bidir"} else []
        return [*roles, "dst2"] if "sm_bidir" in modes and self.t.kernels else roles

    # --- the data check, on the GPU
    def same(self, g: TimerGpu, dptr: int, size: int) -> bool | None:
        """Whether ``size`` bytes at ``dptr`` on ``g`` hold the pattern: compared on the GPU with
        a buffer of its own that holds it (every source buffer does), where the kernels loaded."""
        t = self.t
        fn = self.same_fn.get(g.ordinal)
        if fn is None or size % 16:
            return None
        reference = t._device(g, size, "src")
        flag = t._device(g, 16, "same-flag")  # zeroed by _device
        grid = max(1, t.sms[g.ordinal] * SAME_BLOCKS_PER_SM)
        args = (c_uint64(dptr), c_uint64(reference), c_uint64(size // 16), c_uint64(flag))
        t._launch(g, fn, grid, SAME_BLOCK, t._stream(g, 0), *args)()
        t.cu("cuCtxSetCurrent", g.ctx)
        t.cu("cuCtxSynchronize")
        differs = c_uint32()
        t.cu("cuMemcpyDtoH_v2", ctypes.addressof(differs), flag, 4)
        return differs.value == 0

    # --- the host copies' buffer, zeroed and checked by the GPU
    def clear(self, g: TimerGpu, pinned: int, size: int, stream: c_void_p) -> bool:
        """Zero the buffer by the GPU, queued before the copies on their stream: over the bus at its
        speed, where the CPU's memset of 64 MiB costs several milliseconds a task. False (the CPU's
        then) where the driver refuses it."""
        self.t.patterned.discard(pinned)
        try:
            self.t.cu("cuMemsetD8Async", self.t._mapped(g, pinned), 0, size, stream)
        except RuntimeError:
            return False
        return True

    def host_same(self, g: TimerGpu, pinned: int, size: int) -> bool | None:
        """Compare the buffer with the GPU's own copy of the pattern by the data check kernel, which
        reads it over the bus, where the kernels loaded; else None (the CPU's)."""
        if self.same_fn.get(g.ordinal) is None or size % 16:
            return None
        return self.same(g, self.t._mapped(g, pinned), size)

    # --- SM tasks, refused where they cannot run
    def refusal(self, readers: list[tuple[int, int]]) -> Answer | None:
        """Why a kernel on each ``(reader, memory owner)`` GPU pair cannot run, or None."""
        if self.kernels_missing or not self.t.kernels:
            return {"unavailable": self.kernels_missing or "SM kernels not loaded"}
        for reader, owner in readers:
            if reader >= 0 and owner >= 0 and reader != owner and not self.t.reach.get((reader, owner), False):
                return {
                    "unavailable": f"no peer access from GPU ordinal {reader} to {owner} "
                    "(cuDeviceCanAccessPeer 0 or not enabled): SM copies need P2P"
                }
        return None
