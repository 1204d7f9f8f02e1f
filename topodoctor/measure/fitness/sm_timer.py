"""The fitness timer: HBM copies (copy engine and SM kernel), SM-initiated copies between GPUs
and with the host, and pointer-chase latency, on the CUDA driver API through ctypes (no torch).
Run as a child process (``python -m topodoctor.measure.fitness.sm_timer``) speaking the copy
timer's protocol (topodoctor.measure.copies.protocol).

It is the copy timer (contexts, the host flag that holds every stream until all is queued,
pinned pattern buffers, the byte-for-byte check) with the kernels of ``ptx.py`` loaded into
each context. The kernels need the driver's PTX JIT; where it is missing, loading fails with
the driver's own error name and the answer says what to install.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_uint32, c_uint64, c_void_p
from typing import Any

from topodoctor.measure.copies import cuda_timer
from topodoctor.measure.copies.cuda_timer import Gpu, Timer
from topodoctor.measure.copies.protocol import Answer, Clock, serve_timer
from topodoctor.measure.fitness import ptx

ATTR_SM_COUNT = 16  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
THREADS = 512  # per block, as nvbandwidth's copy kernel
BLOCKS_PER_SM = 1
LATENCY_BUFFER = 2 << 20  # nvbandwidth's latency buffer: 2 MiB of 8-byte nodes
LATENCY_STRIDE = 16  # nodes between two reads: one 128-byte line each
JIT_MISSING = {
    "CUDA_ERROR_JIT_COMPILER_NOT_FOUND": "the driver's PTX JIT (libnvidia-ptxjitcompiler.so) is missing",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the driver is too old for the kernels' PTX (7.0)",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the driver cannot compile PTX for this GPU",
}

_EXTRA: dict[str, list[Any]] = {
    "cuModuleLoadData": [POINTER(c_void_p), c_char_p],
    "cuModuleGetFunction": [POINTER(c_void_p), c_void_p, c_char_p],
    "cuLaunchKernel": [
        c_void_p,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_void_p,
        POINTER(c_void_p),
        POINTER(c_void_p),
    ],
    "cuDeviceGetAttribute": [POINTER(c_int), c_int, c_int],
    "cuMemcpyDtoDAsync_v2": [c_uint64, c_uint64, c_size_t, c_void_p],
}

Launch = Callable[[], None]


class KernelsUnavailable(RuntimeError):
    """The kernels could not be loaded: the message names what is missing."""


class FitnessTimer(Timer):
    """The copy timer plus the SM kernels, per context."""

    def __init__(self) -> None:
        super().__init__()
        if isinstance(self.cu.lib, ctypes.CDLL):  # a stand-in library (tests) has no signatures to set
            for name, args in _EXTRA.items():
                fn = getattr(self.cu.lib, name)
                fn.argtypes, fn.restype = args, c_int
        self.kernels: dict[int, tuple[c_void_p, c_void_p]] = {}
        self.sms: dict[int, int] = {}
        self.unroll = ptx.UNROLL
        self.blocks_per_sm = BLOCKS_PER_SM

    def hello(self, task: Answer) -> Answer:
        """Start CUDA as the copy timer does, then load the PTX kernels on every GPU (``cuModuleLoadData``)."""
        answer = super().hello(task)
        self.unroll = int(task.get("unroll", ptx.UNROLL))
        self.blocks_per_sm = int(task.get("blocks_per_sm", BLOCKS_PER_SM))
        clock = Clock()
        self._each(self._load)
        clock.lap("kernels_jit")
        timings = dict(answer.get("timings") or {}, **clock.spent)
        return dict(answer, method="CUDA driver API: cuMemcpyDtoDAsync and PTX kernels", timings=timings)

    def _load(self, g: Gpu) -> None:
        cu = self.cu
        cu("cuCtxSetCurrent", g.ctx)
        mod, copy, chase, sms = c_void_p(), c_void_p(), c_void_p(), c_int()
        rc = self.lib_call("cuModuleLoadData", ctypes.byref(mod), ptx.module(self.unroll))
        if rc != 0:
            name = cu.error_name(rc)
            why = JIT_MISSING.get(name, "the driver could not load the kernels")
            raise KernelsUnavailable(f"{why} (cuModuleLoadData: {name})")
        cu("cuModuleGetFunction", ctypes.byref(copy), mod, ptx.COPY.encode())
        cu("cuModuleGetFunction", ctypes.byref(chase), mod, ptx.CHASE.encode())
        cu("cuDeviceGetAttribute", ctypes.byref(sms), ATTR_SM_COUNT, g.ordinal)
        self.kernels[g.ordinal] = (copy, chase)
        self.sms[g.ordinal] = max(1, int(sms.value))

    # --- launches
    def _launch(self, g: Gpu, fn: c_void_p, grid: int, block: int, stream: c_void_p, *args: Any) -> Launch:
        params = (c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), c_void_p) for a in args])

        def launch() -> None:
            self.cu("cuLaunchKernel", fn, grid, 1, 1, block, 1, 1, 0, stream, params, None)

        launch.keep = args  # type: ignore[attr-defined]  # the argument values live as long as the launch
        return launch

    def _copy(self, g: Gpu, dst: int, src: int, size: int, loops: int, stream: c_void_p, share: int = 1) -> Launch:
        """The copy kernel on ``g``: ``size`` bytes (a multiple of 16), ``loops`` times; ``share``
        splits the GPU's SMs between kernels that run at once (both directions of a pair)."""
        grid = max(1, self.sms[g.ordinal] * self.blocks_per_sm // share)
        args = (c_uint64(dst), c_uint64(src), c_uint64(size // 16), c_uint32(loops))
        return self._launch(g, self.kernels[g.ordinal][0], grid, THREADS, stream, *args)

    def _mapped(self, g: Gpu, host_ptr: int) -> int:
        d = c_uint64()
        self.cu("cuCtxSetCurrent", g.ctx)
        self.cu("cuMemHostGetDevicePointer_v2", ctypes.byref(d), c_void_p(host_ptr), 0)
        return int(d.value)

    def _buffer(self, where: int, size: int, role: str, by: Gpu) -> tuple[int, Callable[[], bool]]:
        """A buffer on GPU ``where`` (or pinned host memory for -1) as ``by`` addresses it, and
        how to check it holds the pattern."""
        if where >= 0:
            g = self.gpus[where]
            d = self._device(g, size, role)
            return d, lambda: self._same(g, d, size)
        h = self._host(size, f"sm-{role}")
        pattern, chunk = self._pattern(size)
        if role == "src":
            for off in range(0, size, chunk):
                ctypes.memmove(h + off, pattern, min(chunk, size - off))
        else:
            ctypes.memset(h, 0, size)

        def same() -> bool:
            return all(self.cu.libc.memcmp(h + o, pattern, min(chunk, size - o)) == 0 for o in range(0, size, chunk))

        return self._mapped(by, h), same

    def _timed(
        self, jobs: list[tuple[Gpu, c_void_p, Launch]], samples: int, nbytes: int
    ) -> tuple[list[list[float]], bool]:
        """GB/s per job per sample, all jobs at once behind the host flag; whether they ran held."""
        self._sample([(g, s, [[launch]]) for g, s, launch in jobs])  # warm-up: JIT'd code, first touch, clocks
        rates: list[list[float]] = [[] for _ in jobs]
        held = True
        for _ in range(samples):
            ms, ok = self._sample([(g, s, [[launch]]) for g, s, launch in jobs])
            held &= ok
            for k, m in enumerate(ms):
                rates[k].append(nbytes / (m[0] / 1e3) / 1e9)
        return rates, held

    # --- tasks
    def hbm(self, task: Answer) -> Answer:
        """Device-local copy on GPU ``dev``: the copy engine (cuMemcpyDtoDAsync) or the copy kernel.
        GB/s count the bytes copied once, as nvbandwidth's device_local_copy does (the memory
        moves twice as much: a read and a write)."""
        clock = Clock()
        g = self.gpus[task["dev"]]
        size, iters, samples, engine = int(task["size"]), int(task["iters"]), int(task["samples"]), task["engine"]
        size -= size % 16
        src, dst = self._device(g, size, "src"), self._device(g, size, "dst")
        stream = self._stream(g, 0)
        clock.lap("allocation")
        if engine == "ce":

            def launch() -> None:
                for _ in range(iters):
                    self.cu("cuMemcpyDtoDAsync_v2", dst, src, size, stream)
        else:
            launch = self._copy(g, dst, src, size, iters, stream)
        rates, held = self._timed([(g, stream, launch)], samples, size * iters)
        clock.lap("measurement")
        same = self._same(g, dst, size)
        clock.lap("verification")
        return {"samples": rates[0], "verified": same, "held": held, "timings": clock.spent}

    def sm_copy(self, task: Answer) -> Answer:
        """The copy kernel moving ``size`` bytes from ``src`` to ``dst`` (GPU ordinals, -1 the
        host). ``initiator`` "pull": the kernel runs on the receiving GPU and reads; "push": on
        the sending GPU and writes (the host runs no kernel: its side is always the GPU's).
        ``bidir`` runs the reverse direction at the same time; each GPU's SMs are then split
        between its two kernels when one GPU runs both (host copies)."""
        clock = Clock()
        a, b = int(task["src"]), int(task["dst"])
        size, iters, samples = int(task["size"]) // 16 * 16, int(task["iters"]), int(task["samples"])
        pull, bidir = task["initiator"] == "pull", bool(task.get("bidir"))
        routes = [(a, b)] + ([(b, a)] if bidir else [])
        runners = [self.gpus[(d if (pull and d >= 0) or s < 0 else s)] for s, d in routes]
        share = 2 if len(runners) == 2 and runners[0] is runners[1] else 1
        jobs, checks = [], []
        for k, ((s, d), g) in enumerate(zip(routes, runners)):
            sp, _ = self._buffer(s, size, "src", g)
            dp, check = self._buffer(d, size, "dst" if k == 0 else "dst2", g)
            stream = self._stream(g, k)
            jobs.append((g, stream, self._copy(g, dp, sp, size, iters, stream, share)))
            checks.append(check)
        clock.lap("allocation")
        rates, held = self._timed(jobs, samples, size * iters)
        clock.lap("measurement")
        same = all(c() for c in checks)
        clock.lap("verification")
        return {
            "samples": rates[0],
            "reverse": rates[1] if bidir else None,
            "verified": same,
            "held": held,
            "runs_on": [g.ordinal for g in runners],
            "timings": clock.spent,
        }

    def chase(self, task: Answer) -> Answer:
        """Pointer-chase latency from GPU ``dev`` into memory of GPU ``target`` (-1: pinned host
        memory), nvbandwidth's layout: 2 MiB of pointers, each to the one 128 bytes on. ns per
        read; verified when the walk ends on the node the chain's arithmetic says."""
        clock = Clock()
        g = self.gpus[int(task["dev"])]
        target, steps, samples = int(task["target"]), int(task["steps"]), int(task["samples"])
        nodes = LATENCY_BUFFER // 8
        staging = self._host(LATENCY_BUFFER, "chain")
        if target >= 0:
            t = self.gpus[target]
            self.cu("cuCtxSetCurrent", t.ctx)
            base = self._device(t, LATENCY_BUFFER, "chain")
        else:
            base = self._mapped(g, self._host(LATENCY_BUFFER, "host-chain"))
        chain = (c_uint64 * nodes).from_address(staging if target >= 0 else self._host(LATENCY_BUFFER, "host-chain"))
        for i in range(nodes):
            chain[i] = base + ((i + LATENCY_STRIDE) % nodes) * 8
        if target >= 0:
            self.cu("cuCtxSetCurrent", t.ctx)
            self.cu("cuMemcpyHtoD_v2", base, staging, LATENCY_BUFFER)
        out = self._device(g, 16, "chase-out")
        stream = self._stream(g, 0)
        kernel = self.kernels[g.ordinal][1]
        launch = self._launch(g, kernel, 1, 1, stream, c_uint64(base), c_uint32(steps), c_uint64(out))
        clock.lap("allocation")
        ns: list[float] = []
        held = True
        self._sample([(g, stream, [[launch]])])
        for _ in range(samples):
            ms, ok = self._sample([(g, stream, [[launch]])])
            held &= ok
            ns.append(ms[0][0] * 1e6 / steps)
        clock.lap("measurement")
        end = c_uint64()
        self.cu("cuCtxSetCurrent", g.ctx)
        self.cu("cuMemcpyDtoH_v2", ctypes.addressof(end), out, 8)
        same = int(end.value) == base + (steps * LATENCY_STRIDE % nodes) * 8
        clock.lap("verification")
        return {"samples": ns, "verified": same, "held": held, "timings": clock.spent}


def main() -> None:
    """The child's entry point: serve the fitness tasks on stdin."""
    serve_timer(FitnessTimer, ("hbm", "sm_copy", "chase", "host"), cuda_timer._error)


if __name__ == "__main__":
    main()
