"""The copy timer of ``topodoctor bandwidth`` (``python -m topodoctor.measure.copies.pair_timer``),
speaking the copy timer's protocol (measure/copies/protocol.py).

One process holds everything a pass measures between GPUs: the copy engine's copies
(cuda_timer.Timer), the SM kernels' copies and pointer chase of the fitness timer
(fitness/sm_timer.py, nvbandwidth's method: the receiving GPU's kernel reads across the link, a
one-thread walk per SM times the load latency), and a data check of every copy on the GPU that
holds it (``td_same``, fitness/ptx.py) instead of a read-back over PCIe and a compare by the CPU.

The kernels are optional here, unlike for the fitness tests: where the driver cannot compile
PTX, the copy engine's copies still run and are checked by the CPU, and every SM task answers
why it could not run (``unavailable``). A kernel never reads through a pair without peer access:
its load would fault and take the context, and every task after it, down with it.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from ctypes import c_uint32, c_uint64, c_void_p

from topodoctor.core.signals import die_with_parent
from topodoctor.measure.copies import cuda_timer
from topodoctor.measure.copies.cuda_timer import Gpu, Timer
from topodoctor.measure.copies.protocol import PARENT_ENV, Answer, Clock, serve_timer
from topodoctor.measure.fitness import copy_kernels, ptx
from topodoctor.measure.fitness.sm_timer import FitnessTimer

SAME_BLOCK = 512
SAME_BLOCKS_PER_SM = 4  # enough loads in flight to read both buffers at the memory's speed


class PairTimer(FitnessTimer):
    """The fitness timer with nvbandwidth's grid for peer copies, optional kernels, and data
    checked on the GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.copy_kernel = copy_kernels.PEER
        self.same: dict[int, c_void_p] = {}
        self.kernels_missing: str | None = None

    def hello(self, task: Answer) -> Answer:
        """Start CUDA as the copy timer does, then load the kernels on every GPU; where they cannot
        load, say why (``kernels_missing``) and go on with the copy engine alone."""
        answer = Timer.hello(self, task)
        if task.get("copy_kernel"):
            self.copy_kernel = copy_kernels.parse(str(task["copy_kernel"]))
        clock = Clock()
        if task.get("kernels", True) and self.gpus:
            try:
                self._each(self._load_all)
            except RuntimeError as exc:
                self.kernels_missing = f"SM kernels unavailable: {exc}"
                self.kernels.clear()
                self.same.clear()
        elif not task.get("kernels", True):
            self.kernels_missing = "SM kernels not loaded (not asked)"
        clock.lap("kernels_jit")
        timings = dict(answer.get("timings") or {}, **clock.spent)
        method = "CUDA driver API: cuMemcpyPeerAsync (copy engine)"
        if not self.kernels_missing:
            method += f", PTX kernels (SM copies {self.copy_kernel.name}, pointer chase, data checks)"
        clock_marks = dict(answer.get("clock") or {}, ready=time.monotonic())
        return dict(answer, method=method, timings=timings, kernels_missing=self.kernels_missing, clock=clock_marks)

    def _load_all(self, g: Gpu) -> None:
        self._load(g)
        self.same[g.ordinal] = self._function(self._module(ptx.same_module()), ptx.SAME)
        self._device(g, 16, "same-flag")  # the data check's flag, made before any task needs it

    # --- buffers ahead of the tasks
    def prepare(self, task: Answer) -> Answer:
        """Make now, while the parent still probes, the buffers and streams the pass's tasks will
        use (``modes``, ``size`` between GPUs, ``host_size`` to the host): the tasks then find
        them made. Every GPU at once, one thread each, and the pinned host buffer beside them."""
        clock = Clock()
        modes = set(task.get("modes") or ())
        size, host_size = int(task["size"]), int(task["host_size"])
        roles = self._roles(modes)
        host = bool(modes & {"h2d", "d2h"}) and host_size > 0
        for n in {size if roles else 0, host_size if host else 0} - {0}:
            self._pattern(n)  # shared by every thread below: made first
        failed: list[str] = []

        def pinned() -> None:
            try:
                self._fill(self._host(host_size, "io"), host_size)  # the first h2d finds it filled
            except Exception as exc:  # raised below, after the GPUs' threads
                failed.append(f"pinned host memory: {exc}")

        beside = threading.Thread(target=pinned) if host else None
        if beside is not None:
            beside.start()

        def one(g: Gpu) -> None:
            for role in roles:
                self._device(g, size, role)
            if host:
                self._device(g, host_size, "src")
                self._device(g, host_size, "dst")
            self._stream(g, 0)
            if len(self.gpus) > 1:
                self._stream(g, 1)

        try:
            self._each(one)
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
        if len(self.gpus) < 2:
            return []
        roles = ["src", "dst"] if modes & {"oneway", "bidir", "sm_oneway", "sm_bidir"} else []
        return [*roles, "dst2"] if "sm_bidir" in modes and self.kernels else roles

    # --- the data check, on the GPU
    def _same(self, g: Gpu, dptr: int, size: int) -> bool:
        """Whether ``size`` bytes at ``dptr`` on ``g`` hold the pattern: compared on the GPU with
        a buffer of its own that holds it (every source buffer does), where the kernels loaded."""
        fn = self.same.get(g.ordinal)
        if fn is None or size % 16:
            return super()._same(g, dptr, size)
        reference = self._device(g, size, "src")
        flag = self._device(g, 16, "same-flag")  # zeroed by _device
        grid = max(1, self.sms[g.ordinal] * SAME_BLOCKS_PER_SM)
        args = (c_uint64(dptr), c_uint64(reference), c_uint64(size // 16), c_uint64(flag))
        self._launch(g, fn, grid, SAME_BLOCK, self._stream(g, 0), *args)()
        self.cu("cuCtxSetCurrent", g.ctx)
        self.cu("cuCtxSynchronize")
        differs = c_uint32()
        self.cu("cuMemcpyDtoH_v2", ctypes.addressof(differs), flag, 4)
        return differs.value == 0

    # --- the host copies' buffer, zeroed and checked by the GPU
    def _mapped(self, g: Gpu, pinned: int) -> int:
        """The address ``g``'s kernels and copies use for a pinned buffer (mapped at its allocation)."""
        self.cu("cuCtxSetCurrent", g.ctx)
        d = c_uint64()
        self.cu("cuMemHostGetDevicePointer_v2", ctypes.byref(d), c_void_p(pinned), 0)
        return int(d.value)

    def _clear(self, g: Gpu, pinned: int, size: int, stream: c_void_p) -> None:
        """Zero the buffer by the GPU, queued before the copies on their stream: over the bus at its
        speed, where the CPU's memset of 64 MiB costs several milliseconds a task. The CPU's where
        the driver refuses it."""
        self.patterned.discard(pinned)
        try:
            self.cu("cuMemsetD8Async", self._mapped(g, pinned), 0, size, stream)
        except RuntimeError:
            super()._clear(g, pinned, size, stream)

    def _host_same(self, g: Gpu, pinned: int, size: int) -> bool:
        """Compare the buffer with the GPU's own copy of the pattern by the data check kernel, which
        reads it over the bus, where the kernels loaded; else by the CPU."""
        if self.same.get(g.ordinal) is None or size % 16:
            return super()._host_same(g, pinned, size)
        return self._same(g, self._mapped(g, pinned), size)

    # --- SM tasks, refused where they cannot run
    def _refusal(self, readers: list[tuple[int, int]]) -> Answer | None:
        """Why a kernel on each ``(reader, memory owner)`` GPU pair cannot run, or None."""
        if self.kernels_missing or not self.kernels:
            return {"unavailable": self.kernels_missing or "SM kernels not loaded"}
        for reader, owner in readers:
            if reader >= 0 and owner >= 0 and reader != owner and not self.reach.get((reader, owner), False):
                return {
                    "unavailable": f"no peer access from GPU ordinal {reader} to {owner} "
                    "(cuDeviceCanAccessPeer 0 or not enabled): SM copies need P2P"
                }
        return None

    def sm_copy(self, task: Answer) -> Answer:
        """The fitness timer's SM copy (``src`` -> ``dst``, the ``initiator`` reading or writing), where
        its kernels can reach the other GPU's memory."""
        a, b, pull = int(task["src"]), int(task["dst"]), task["initiator"] == "pull"
        routes = [(a, b)] + ([(b, a)] if task.get("bidir") else [])
        refused = self._refusal([(d, s) if pull else (s, d) for s, d in routes])
        return refused or super().sm_copy(task)

    def chase(self, task: Answer) -> Answer:
        """The fitness timer's pointer chase from ``dev`` into ``target``'s memory, where it can reach it."""
        refused = self._refusal([(int(task["dev"]), int(task["target"]))])
        return refused or super().chase(task)


OPS = ("p2p", "latency", "host", "sm_copy", "chase", "prepare")


def serve_forked(first: Answer | None, began: float) -> None:
    """A forked timer's work (measure/copies/forked.py, which has set the process up and began to
    load the timer at ``began``): ``first``, then the tasks on stdin."""
    cuda_timer.STARTED.update(module=began, imports=time.monotonic())
    serve_timer(PairTimer, OPS, cuda_timer._error, first)


def main() -> None:
    """The spawned child's entry point: die with whoever spawned it, then serve the tasks on stdin."""
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))
    serve_timer(PairTimer, OPS, cuda_timer._error)


if __name__ == "__main__":
    main()
