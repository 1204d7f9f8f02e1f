"""The copy engine's timer on the CUDA driver API: libcuda.so.1 (installed with the driver) through
ctypes, no torch. The base of the one CUDA timer (``kernels.KernelTimer`` adds the PTX kernels;
``plans`` says what a bandwidth pass and the fitness tests run on it), in a child process
speaking topodoctor.measure.timer.protocol.

Why not torch: importing it takes 1.2-3 s on the test hosts, longer than the whole
measurement a prolog needs; copies, events and pinned memory are a few driver calls.

How a sample is timed, as p2pBandwidthLatencyTest and nvbandwidth do it: each stream first
waits on a host flag (``cuStreamWaitValue32``, the stream-side form of their spin kernel),
then a start event, the copies, an end event; the flag is set once everything is queued, so
the events time the copies back to back and nothing of Python. A watchdog sets the flag
after a second should queueing ever block (a full command queue), and the sample says so.
Data is checked after the copies: the destination is read back and compared byte for byte
with the pattern the source was filled with.
"""

from __future__ import annotations

import time

T_MODULE = time.monotonic()

import ctypes  # noqa: E402
import itertools  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable  # noqa: E402
from ctypes import c_float, c_int, c_uint64, c_void_p  # noqa: E402
from typing import Any  # noqa: E402

from topodoctor.measure.timer import driver  # noqa: E402
from topodoctor.measure.timer.driver import Driver  # noqa: E402
from topodoctor.measure.timer.protocol import Answer, Clock, see_only  # noqa: E402

T_IMPORTS = time.monotonic()
# When this process's timer began to load and had loaded (CLOCK_MONOTONIC); a forked timer, whose
# parent may have loaded this module before the fork, sets its own (plans.serve_forked).
STARTED = {"module": T_MODULE, "imports": T_IMPORTS}

PEER_ALREADY_ENABLED = 704  # CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
WAIT_GEQ = 0  # CU_STREAM_WAIT_VALUE_GEQ
STREAM_NON_BLOCKING = 1
HOST_PORTABLE_DEVICEMAP = 0x01 | 0x02  # CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
CHUNK = 16 << 20  # pattern and read-back buffers (pinned)
WATCHDOG_S = 1.0


class TimerGpu:
    """One GPU as the timer holds it: its ordinal, its context, and the host flag as it addresses it."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self.ctx = c_void_p()
        self.flag = c_uint64()  # the host flag, as this context addresses it


class Timer:
    """The child's state: driver, contexts, buffers, the flag; one instance per process."""

    def __init__(self) -> None:
        self.cu = Driver()
        self.gpus: list[TimerGpu] = []
        self.reach: dict[tuple[int, int], bool] = {}
        self.epoch = 0
        self.flag_host = c_void_p()
        self.buffers: dict[tuple[int, int, str], int] = {}
        self.host_buffers: dict[tuple[int, str], int] = {}
        self.streams: dict[int, list[c_void_p]] = {}
        self.patterned: set[int] = set()  # pinned buffers known to hold the pattern (host copies' own)

    # --- start-up
    def hello(self, task: Answer) -> Answer:
        """Start CUDA: a context on every GPU it may see, peer access between them unless the task says
        not, the host flag; the answer names the CUDA version, the method and every device."""
        see_only(task)
        t0 = time.monotonic()
        cu = self.cu
        cu("cuInit", 0)
        count, version = c_int(), c_int()
        cu("cuDeviceGetCount", ctypes.byref(count))
        cu("cuDriverGetVersion", ctypes.byref(version))
        self.gpus = [TimerGpu(i) for i in range(count.value)]
        t1 = time.monotonic()
        self._each(self._open)  # contexts: one thread per GPU
        if task.get("peers", True):
            self._each(self._peers)
        t2 = time.monotonic()
        v = version.value
        answer: Answer = {
            "torch": "",
            "cuda": f"{v // 1000}.{(v % 1000) // 10}",
            "method": "cuMemcpyPeerAsync (copy engine, CUDA driver API)",
            "devices": [],
            "clock": {**STARTED, **driver.warm_clock},
        }
        if not self.gpus:
            return answer
        cu("cuCtxSetCurrent", self.gpus[0].ctx)
        cu("cuMemHostAlloc", ctypes.byref(self.flag_host), 4, HOST_PORTABLE_DEVICEMAP)
        ctypes.c_uint32.from_address(self._addr(self.flag_host)).value = 0
        devices = []
        for g in self.gpus:
            cu("cuCtxSetCurrent", g.ctx)
            cu("cuMemHostGetDevicePointer_v2", ctypes.byref(g.flag), self.flag_host, 0)
            name, bus = ctypes.create_string_buffer(256), ctypes.create_string_buffer(64)
            cu("cuDeviceGetName", name, 256, g.ordinal)
            cu("cuDeviceGetPCIBusId", bus, 64, g.ordinal)
            domain, _, rest = bus.value.decode().lower().partition(":")  # as sysfs writes it: 0000:3b:00.0
            devices.append({"ordinal": g.ordinal, "bus_id": f"{domain[-4:]:0>4}:{rest}", "name": name.value.decode()})
        # one empty sample per GPU proves the stream wait works before anything is measured
        self._sample([(g, self._stream(g, 0), [[]]) for g in self.gpus])
        t3 = time.monotonic()
        phases = {"cuda_init": t1 - t0, "contexts_and_peers": t2 - t1, "allocation": t3 - t2}
        return dict(answer, devices=devices, timings={k: round(v, 6) for k, v in phases.items()})

    def _each(self, work: Callable[[TimerGpu], None]) -> None:
        errors: list[str] = []

        def run(g: TimerGpu) -> None:
            try:
                work(g)
            except Exception as exc:  # gathered and raised below as one error
                errors.append(f"GPU ordinal {g.ordinal}: {exc}")

        threads = [threading.Thread(target=run, args=(g,)) for g in self.gpus]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("; ".join(errors))

    def _open(self, g: TimerGpu) -> None:
        dev = c_int()
        self.cu("cuDeviceGet", ctypes.byref(dev), g.ordinal)
        self.cu("cuDevicePrimaryCtxRetain", ctypes.byref(g.ctx), dev)  # creates the context

    def _peers(self, g: TimerGpu) -> None:
        self.cu("cuCtxSetCurrent", g.ctx)
        for q in self.gpus:
            if q is g:
                continue
            can = c_int()
            self.cu("cuDeviceCanAccessPeer", ctypes.byref(can), g.ordinal, q.ordinal)
            self.reach[(g.ordinal, q.ordinal)] = bool(can.value)
            if can.value:
                rc = int(self.lib_call("cuCtxEnablePeerAccess", q.ctx, 0))
                if rc not in (0, PEER_ALREADY_ENABLED):
                    raise RuntimeError(f"cuCtxEnablePeerAccess: {self.cu.error_name(rc)}")

    def lib_call(self, name: str, *args: Any) -> int:
        """Call a libcuda function and return its raw CUresult, for calls whose failure is an answer."""
        return int(getattr(self.cu.lib, name)(*args))

    # --- memory
    @staticmethod
    def _addr(p: c_void_p) -> int:
        return int(p.value or 0)

    def _host(self, size: int, role: str) -> int:
        key = (size, role)
        if key not in self.host_buffers:
            p = c_void_p()
            self.cu("cuCtxSetCurrent", self.gpus[0].ctx)
            self.cu("cuMemHostAlloc", ctypes.byref(p), size, HOST_PORTABLE_DEVICEMAP)
            self.host_buffers[key] = self._addr(p)
            if role == "pattern":
                seed = os.urandom(min(size, 1 << 16))
                ctypes.memmove(self.host_buffers[key], seed, len(seed))
                filled = len(seed)
                while filled < size:  # double the random block up to the chunk size
                    n = min(filled, size - filled)
                    ctypes.memmove(self.host_buffers[key] + filled, self.host_buffers[key], n)
                    filled += n
        return self.host_buffers[key]

    def _fill(self, pinned: int, size: int) -> None:
        """Give a pinned buffer the pattern, unless it holds it already."""
        if pinned in self.patterned:
            return
        pattern, chunk = self._pattern(size)
        for off in range(0, size, chunk):
            ctypes.memmove(pinned + off, pattern, min(chunk, size - off))
        self.patterned.add(pinned)

    def _clear(self, g: TimerGpu, pinned: int, size: int, stream: c_void_p) -> None:
        """Zero a pinned buffer before copies into it, so that only they can have written the
        pattern there (here by the CPU; queued on ``stream`` where a GPU can do it)."""
        self.patterned.discard(pinned)
        ctypes.memset(pinned, 0, size)

    def _host_same(self, g: TimerGpu, pinned: int, size: int) -> bool:
        """Whether a pinned buffer holds the pattern (compared by the CPU here)."""
        pattern, chunk = self._pattern(size)
        return all(
            self.cu.libc.memcmp(pinned + off, pattern, min(chunk, size - off)) == 0 for off in range(0, size, chunk)
        )

    def _pattern(self, size: int) -> tuple[int, int]:
        chunk = min(size, CHUNK)
        return self._host(chunk, "pattern"), chunk

    def _device(self, g: TimerGpu, size: int, role: str) -> int:
        """Device buffers kept across tasks. Sources hold the pattern; others are zeroed before
        each use."""
        key = (g.ordinal, size, role)
        self.cu("cuCtxSetCurrent", g.ctx)
        if key not in self.buffers:
            d = c_uint64()
            self.cu("cuMemAlloc_v2", ctypes.byref(d), size)
            self.buffers[key] = int(d.value)
            if role == "src":
                pattern, chunk = self._pattern(size)
                for off in range(0, size, chunk):
                    self.cu("cuMemcpyHtoD_v2", self.buffers[key] + off, pattern, min(chunk, size - off))
        if role != "src":
            self.cu("cuMemsetD8_v2", self.buffers[key], 0, size)
        self.cu("cuCtxSynchronize")
        return self.buffers[key]

    def _same(self, g: TimerGpu, dptr: int, size: int) -> bool:
        """Read a device buffer back and compare it with the pattern, chunk by chunk."""
        pattern, chunk = self._pattern(size)
        scratch = self._host(chunk, "scratch")
        self.cu("cuCtxSetCurrent", g.ctx)
        for off in range(0, size, chunk):
            n = min(chunk, size - off)
            self.cu("cuMemcpyDtoH_v2", scratch, dptr + off, n)
            if self.cu.libc.memcmp(scratch, pattern, n) != 0:
                return False
        return True

    def _stream(self, g: TimerGpu, k: int) -> c_void_p:
        pool = self.streams.setdefault(g.ordinal, [])
        while len(pool) <= k:
            s = c_void_p()
            self.cu("cuCtxSetCurrent", g.ctx)
            self.cu("cuStreamCreate", ctypes.byref(s), STREAM_NON_BLOCKING)
            pool.append(s)
        return pool[k]

    # --- timing
    def _sample(
        self, jobs: list[tuple[TimerGpu, c_void_p, list[list[Callable[[], None]]]]]
    ) -> tuple[list[list[float]], bool]:
        """Every stream waits on the flag, then its batches of copies, an event after each;
        the flag is set when all is queued. ms per batch per stream, and whether the
        copies ran back to back (the watchdog did not have to set the flag)."""
        cu = self.cu
        self.epoch += 1
        epoch = self.epoch
        flag = ctypes.c_uint32.from_address(self._addr(self.flag_host))
        marks: list[list[c_void_p]] = []
        for g, stream, batches in jobs:
            cu("cuCtxSetCurrent", g.ctx)
            events = [c_void_p() for _ in range(len(batches) + 1)]
            for ev in events:
                cu("cuEventCreate", ctypes.byref(ev), 0)
            cu("cuStreamWaitValue32_v2", stream, g.flag, epoch, WAIT_GEQ)
            cu("cuEventRecord", events[0], stream)
            marks.append(events)
        watchdog = threading.Timer(WATCHDOG_S, lambda: setattr(flag, "value", epoch))
        watchdog.start()
        for (g, stream, batches), events in zip(jobs, marks):
            cu("cuCtxSetCurrent", g.ctx)
            for batch, ev in zip(batches, events[1:]):
                for copy in batch:
                    copy()
                cu("cuEventRecord", ev, stream)
        held = flag.value < epoch
        flag.value = epoch
        watchdog.cancel()
        out = []
        for (g, _, _), events in zip(jobs, marks):
            cu("cuCtxSetCurrent", g.ctx)
            cu("cuEventSynchronize", events[-1])
            ms = []
            for a, b in itertools.pairwise(events):
                t = c_float()
                cu("cuEventElapsedTime", ctypes.byref(t), a, b)
                ms.append(float(t.value))
            for ev in events:
                cu("cuEventDestroy_v2", ev)
            out.append(ms)
        return out, held

    def _peer_copy(self, dst: TimerGpu, d: int, src: TimerGpu, s: int, n: int, stream: c_void_p) -> Callable[[], None]:
        return lambda: self.cu("cuMemcpyPeerAsync", d, dst.ctx, s, src.ctx, n, stream)

    # --- tasks
    def p2p(self, task: Answer) -> Answer:
        """A ``p2p`` task: copies from ``src`` to ``dst`` (both ways for ``bidir``) timed and verified."""
        clock = Clock()
        a, b = self.gpus[task["src"]], self.gpus[task["dst"]]
        size, iters, samples, bidir = task["size"], task["iters"], task["samples"], task["mode"] == "bidir"
        a_src, b_dst = self._device(a, size, "src"), self._device(b, size, "dst")
        copies = [(b, b_dst, a, a_src, self._stream(a, 0))]
        if bidir:
            copies.append((a, self._device(a, size, "dst"), b, self._device(b, size, "src"), self._stream(b, 1)))
        clock.lap("allocation")

        def jobs(n: int) -> list[tuple[TimerGpu, c_void_p, list[list[Callable[[], None]]]]]:
            return [(sg, st, [[self._peer_copy(dg, d, sg, s, size, st)] * n]) for dg, d, sg, s, st in copies]

        self._sample(jobs(1))  # warm-up: first touch, peer mappings, clocks
        fwd, rev, held = [], [], True
        for _ in range(samples):
            ms, ok = self._sample(jobs(iters))
            held &= ok
            fwd.append(size * iters / (ms[0][0] / 1e3) / 1e9)
            if bidir:
                rev.append(size * iters / (ms[1][0] / 1e3) / 1e9)
        clock.lap("measurement")
        same = all(self._same(dg, d, size) for dg, d, _, _, _ in copies)
        clock.lap("verification")
        path = "p2p" if self.reach.get((a.ordinal, b.ordinal), False) else "staged"
        return {"samples": fwd, "reverse": rev or None, "path": path, "verified": same, "held": held,
                "timings": clock.spent}  # fmt: skip

    def latency(self, task: Answer) -> Answer:
        """One small copy at a time to each destination, ``iters`` back to back per sample."""
        clock = Clock()
        a = self.gpus[task["src"]]
        size, iters, samples = task["size"], task["iters"], task["samples"]
        stream = self._stream(a, 0)
        src = self._device(a, size, "src")
        targets = [(self.gpus[d], self._device(self.gpus[d], size, "dst")) for d in task["dsts"]]
        clock.lap("allocation")
        results = []
        for g, d in targets:
            copy = self._peer_copy(g, d, a, src, size, stream)
            self._sample([(a, stream, [[copy]])])
            vals, held = [], True
            for _ in range(samples):
                ms, ok = self._sample([(a, stream, [[copy] * iters])])
                held &= ok
                vals.append(ms[0][0] * 1000.0 / iters)  # microseconds per copy
            path = "p2p" if self.reach.get((a.ordinal, g.ordinal), False) else "staged"
            results.append({"dst": g.ordinal, "samples": vals, "reverse": None, "path": path, "verified": None,
                            "held": held})  # fmt: skip
        clock.lap("measurement")
        return {"results": results, "timings": clock.spent}

    def host(self, task: Answer) -> Answer:
        """Pinned host memory to and from one GPU (cuMemcpyHtoDAsync / cuMemcpyDtoHAsync)."""
        clock = Clock()
        g = self.gpus[task["dev"]]
        size, iters, samples, h2d = task["size"], task["iters"], task["samples"], task["dir"] == "h2d"
        pinned = self._host(size, "io")
        stream = self._stream(g, 0)
        if h2d:
            self._fill(pinned, size)
            dev = self._device(g, size, "dst")
        else:
            dev = self._device(g, size, "src")
            self._clear(g, pinned, size, stream)
        clock.lap("allocation")
        if h2d:
            copy: Callable[[], None] = lambda: self.cu("cuMemcpyHtoDAsync_v2", dev, pinned, size, stream)  # noqa: E731
        else:
            copy = lambda: self.cu("cuMemcpyDtoHAsync_v2", pinned, dev, size, stream)  # noqa: E731
        self._sample([(g, stream, [[copy]])])
        vals, held = [], True
        for _ in range(samples):
            ms, ok = self._sample([(g, stream, [[copy] * iters])])
            held &= ok
            vals.append(size * iters / (ms[0][0] / 1e3) / 1e9)
        clock.lap("measurement")
        if h2d:
            same = self._same(g, dev, size)
        else:
            same = self._host_same(g, pinned, size)
            if same:
                self.patterned.add(pinned)  # what the GPU wrote back is the pattern: the next h2d needs no fill
        clock.lap("verification")
        return {"samples": vals, "reverse": None, "path": "host", "verified": same, "held": held,
                "timings": clock.spent}  # fmt: skip


def error_text(exc: BaseException) -> str:
    """A task's failure as the parent reads it (out of memory named as such)."""
    text = str(exc)
    return "CUDA out of memory" if "OUT_OF_MEMORY" in text else f"{type(exc).__name__}: {text}"
