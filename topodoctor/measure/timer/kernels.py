"""The one CUDA timer: the copy engine's timer (``engine.Timer``) with the PTX kernels of ``ptx``
loaded into each context: HBM copies (copy engine and SM kernel), SM-initiated copies between
GPUs and with the host, and pointer-chase latency, on the CUDA driver API through ctypes (no
torch). What a process serves with it is a plan (``plans``: the fitness tests, a bandwidth pass);
a plan that checks data on the GPU adds its ``OnGpu`` part (``on_gpu``), held by the timer.

The kernels need the driver's PTX JIT; where it is missing, loading fails with the driver's own
error name and the answer says what to install (a bandwidth pass goes on without them).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_uint32, c_uint64, c_void_p
from typing import Any

from topodoctor.measure.timer import copy_kernels, engine, ptx
from topodoctor.measure.timer.checks import Checks
from topodoctor.measure.timer.copy_kernels import CopyKernel
from topodoctor.measure.timer.engine import Timer, TimerGpu
from topodoctor.measure.timer.protocol import Answer, Clock

ATTR_SM_COUNT = 16  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
ATTR_UNIFIED_ADDRESSING = 41  # CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
ATTR_CC_MAJOR, ATTR_CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
FUNC_NUM_REGS = 4  # CU_FUNC_ATTRIBUTE_NUM_REGS
HOST_PORTABLE = 0x01  # CU_MEMHOSTALLOC_PORTABLE
# The latency test is nvbandwidth's host_device_latency_sm / device_to_device_latency_sm, so that
# the two measure the same thing: a 2 MiB buffer of 8-byte pointers, each to the one 16 nodes
# (128 bytes, a cache line) on; a one-thread block per SM, one launch per block in turn, each
# walking ACCESSES // SMs steps from the first node; host memory allocated fresh (PORTABLE, used
# through its unified address) with the thread on the GPU's CPUs; no warm-up; ns per access is
# the sweep's time over its steps (nvbandwidth divides by ACCESSES: 0.01 % apart on 132 SMs).
LATENCY_BUFFER = 2 << 20
LATENCY_STRIDE = 16
ACCESSES = 1_000_000
JIT_MISSING = {
    "CUDA_ERROR_JIT_COMPILER_NOT_FOUND": "the driver's PTX JIT (libnvidia-ptxjitcompiler.so) is missing",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the driver is too old for the kernels' PTX",
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
    "cuFuncGetAttribute": [POINTER(c_int), c_int, c_void_p],
    "cuOccupancyMaxActiveBlocksPerMultiprocessor": [POINTER(c_int), c_void_p, c_int, c_size_t],
    "cuMemcpyDtoDAsync_v2": [c_uint64, c_uint64, c_size_t, c_void_p],
    "cuMemFreeHost": [c_void_p],
}

Launch = Callable[[], None]


@contextmanager
def near(cpus: list[int] | None) -> Iterator[None]:
    """Run the block on ``cpus`` (those of them this process may use), as nvbandwidth does before
    it allocates host memory for a GPU: pinned pages come from the NUMA node the thread runs on."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    allowed = os.sched_getaffinity(0)
    wanted = allowed & set(cpus)
    if wanted:
        os.sched_setaffinity(0, wanted)
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


class KernelsUnavailable(RuntimeError):
    """The kernels could not be loaded: the message names what is missing."""


class KernelTimer(Timer):
    """The copy engine's timer plus the SM kernels, per context; ``checks`` the plan's part, if any."""

    def __init__(self, copy_kernel: CopyKernel = copy_kernels.STRIDE) -> None:
        super().__init__()
        self.checks: Checks | None = None
        if isinstance(self.cu.lib, ctypes.CDLL):  # a stand-in library (tests) has no signatures to set
            for name, args in _EXTRA.items():
                fn = getattr(self.cu.lib, name)
                fn.argtypes, fn.restype = args, c_int
        self.kernels: dict[int, tuple[c_void_p, c_void_p]] = {}
        self.sms: dict[int, int] = {}
        self.cc: dict[int, tuple[int, int]] = {}
        self.uva: dict[int, bool] = {}
        self.copy_kernel = copy_kernel
        self.hbm_kernels: dict[tuple[int, str], tuple[c_void_p, CopyKernel, Answer]] = {}

    def hello(self, task: Answer) -> Answer:
        """Start CUDA as the copy timer does, then load the PTX kernels on every GPU (``cuModuleLoadData``);
        ``copy_kernel`` names the SM copies' kernel (``copy_kernels.parse``). A plan's ``checks``
        loads them its own way."""
        answer = super().hello(task)
        if task.get("copy_kernel"):
            self.copy_kernel = copy_kernels.parse(str(task["copy_kernel"]))
        if self.checks is not None:
            return self.checks.hello(answer, task)
        clock = Clock()
        self._each(self._load)
        clock.lap("kernels_jit")
        timings = dict(answer.get("timings") or {}, **clock.spent)
        return dict(answer, method="CUDA driver API: cuMemcpyDtoDAsync and PTX kernels", timings=timings)

    def _attr(self, attr: int, ordinal: int) -> int:
        v = c_int()
        self.cu("cuDeviceGetAttribute", ctypes.byref(v), attr, ordinal)
        return int(v.value)

    def _module(self, image: bytes) -> c_void_p:
        mod = c_void_p()
        rc = self.lib_call("cuModuleLoadData", ctypes.byref(mod), image)
        if rc != 0:
            name = self.cu.error_name(rc)
            why = JIT_MISSING.get(name, "the driver could not load the kernels")
            raise KernelsUnavailable(f"{why} (cuModuleLoadData: {name})")
        return mod

    def _function(self, mod: c_void_p, name: str) -> c_void_p:
        fn = c_void_p()
        self.cu("cuModuleGetFunction", ctypes.byref(fn), mod, name.encode())
        return fn

    def _load(self, g: TimerGpu) -> None:
        self.cu("cuCtxSetCurrent", g.ctx)
        mod = self._module(ptx.module(self.copy_kernel))
        self.kernels[g.ordinal] = (self._function(mod, ptx.COPY), self._function(mod, ptx.CHASE))
        self.sms[g.ordinal] = max(1, self._attr(ATTR_SM_COUNT, g.ordinal))
        self.cc[g.ordinal] = (self._attr(ATTR_CC_MAJOR, g.ordinal), self._attr(ATTR_CC_MINOR, g.ordinal))
        self.uva[g.ordinal] = bool(self._attr(ATTR_UNIFIED_ADDRESSING, g.ordinal))

    def _hbm_kernel(self, g: TimerGpu, name: str) -> tuple[c_void_p, CopyKernel, Answer]:
        """The HBM test's kernel ``name`` on ``g``, loaded at its first use: the portable one where
        this GPU lacks its instructions or the driver cannot load it, the answer then says why."""
        key = (g.ordinal, name)
        if key not in self.hbm_kernels:
            clock = Clock()
            wanted = copy_kernels.parse(name)
            kernel = copy_kernels.for_gpu(wanted, self.cc[g.ordinal])
            info: Answer = {}
            if kernel != wanted:
                major, minor = self.cc[g.ordinal]
                info["fallback"] = f"{wanted.name} needs sm_{wanted.needs[1]}; this GPU is sm_{major}{minor}"
            self.cu("cuCtxSetCurrent", g.ctx)
            try:
                mod = self._module(ptx.hbm_module(kernel))
            except KernelsUnavailable as exc:
                if kernel == copy_kernels.PORTABLE:
                    raise
                info["fallback"] = f"{kernel.name}: {exc}"
                kernel = copy_kernels.PORTABLE
                mod = self._module(ptx.hbm_module(kernel))
            fn = self._function(mod, ptx.HBM)
            regs, resident = c_int(), c_int()
            self.cu("cuFuncGetAttribute", ctypes.byref(regs), FUNC_NUM_REGS, fn)
            block = copy_kernels.geometry(kernel, 1, 1).block
            self.cu("cuOccupancyMaxActiveBlocksPerMultiprocessor", ctypes.byref(resident), fn, block, 0)
            clock.lap("jit")
            info.update(regs=int(regs.value), resident_blocks_per_sm=int(resident.value), jit_s=clock.spent["jit"])
            self.hbm_kernels[key] = (fn, kernel, info)
        return self.hbm_kernels[key]

    # --- launches
    def _launch(
        self, g: TimerGpu, fn: c_void_p, grid: int, block: int, stream: c_void_p, *args: Any, times: int = 1
    ) -> Launch:
        params = (c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), c_void_p) for a in args])

        def launch() -> None:
            for _ in range(times):
                self.cu("cuLaunchKernel", fn, grid, 1, 1, block, 1, 1, 0, stream, params, None)

        launch.keep = args  # type: ignore[attr-defined]  # the argument values live as long as the launch
        return launch

    def _copy(
        self,
        g: TimerGpu,
        dst: int,
        src: int,
        size: int,
        loops: int,
        stream: c_void_p,
        share: int = 1,
        kernel: tuple[c_void_p, CopyKernel] | None = None,
    ) -> Launch:
        """A copy kernel on ``g`` (the SM copies' unless ``kernel`` names another): ``size`` bytes (a
        multiple of 16), ``loops`` times; ``share`` splits the GPU's SMs between kernels that run
        at once (both directions of a pair)."""
        fn, shape = kernel or (self.kernels[g.ordinal][0], self.copy_kernel)
        geo = copy_kernels.geometry(shape, size // 16, self.sms[g.ordinal], share)
        inside, times = (loops, 1) if geo.loops_inside else (1, loops)
        args = (c_uint64(dst), c_uint64(src), c_uint64(size // 16), c_uint32(inside))
        return self._launch(g, fn, geo.grid, geo.block, stream, *args, times=times)

    def _mapped(self, g: TimerGpu, host_ptr: int) -> int:
        d = c_uint64()
        self.cu("cuCtxSetCurrent", g.ctx)
        self.cu("cuMemHostGetDevicePointer_v2", ctypes.byref(d), c_void_p(host_ptr), 0)
        return int(d.value)

    # --- the data checks: the plan's on the GPU where it has them, else the copy engine timer's
    def _same(self, g: TimerGpu, dptr: int, size: int) -> bool:
        done = self.checks.same(g, dptr, size) if self.checks is not None else None
        return super()._same(g, dptr, size) if done is None else done

    def _clear(self, g: TimerGpu, pinned: int, size: int, stream: c_void_p) -> None:
        if self.checks is None or not self.checks.clear(g, pinned, size, stream):
            super()._clear(g, pinned, size, stream)

    def _host_same(self, g: TimerGpu, pinned: int, size: int) -> bool:
        done = self.checks.host_same(g, pinned, size) if self.checks is not None else None
        return super()._host_same(g, pinned, size) if done is None else done

    def _refused(self, readers: list[tuple[int, int]]) -> Answer | None:
        return self.checks.refusal(readers) if self.checks is not None else None

    def _buffer(self, where: int, size: int, role: str, by: TimerGpu) -> tuple[int, Callable[[], bool]]:
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
        self, jobs: list[tuple[TimerGpu, c_void_p, Launch]], samples: int, nbytes: int
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
        """Device-local copy on GPU ``dev``: the copy engine (cuMemcpyDtoDAsync) or a copy kernel
        (``kernel``: a ``copy_kernels`` name, the HBM default if none). GB/s count the bytes copied
        once, as nvbandwidth's device_local_copy does (the memory moves twice as much: a read and a
        write)."""
        clock = Clock()
        g = self.gpus[task["dev"]]
        size, iters, samples, engine = int(task["size"]), int(task["iters"]), int(task["samples"]), task["engine"]
        info: Answer = {}
        skew = 0
        if engine == "ce":
            size -= size % 16
        else:
            fn, kernel, info = self._hbm_kernel(g, str(task.get("kernel") or copy_kernels.DEFAULT.name))
            size -= size % kernel.granule_bytes
            skew = kernel.skew
        src = self._device(g, size, "src")
        dst = self._device(g, size + skew, "dst") + skew
        stream = self._stream(g, 0)
        clock.lap("allocation")
        if engine == "ce":

            def launch() -> None:
                for _ in range(iters):
                    self.cu("cuMemcpyDtoDAsync_v2", dst, src, size, stream)
        else:
            launch = self._copy(g, dst, src, size, iters, stream, kernel=(fn, kernel))
            geo = copy_kernels.geometry(kernel, size // 16, self.sms[g.ordinal])
            info = dict(info, kernel=kernel.name, grid=geo.grid, block=geo.block)
        rates, held = self._timed([(g, stream, launch)], samples, size * iters)
        clock.lap("measurement")
        same = self._same(g, dst, size)
        clock.lap("verification")
        return {"samples": rates[0], "verified": same, "held": held, "size": size, **info, "timings": clock.spent}

    def sm_copy(self, task: Answer) -> Answer:
        """The copy kernel moving ``size`` bytes from ``src`` to ``dst`` (GPU ordinals, -1 the
        host). ``initiator`` "pull": the kernel runs on the receiving GPU and reads; "push": on
        the sending GPU and writes (the host runs no kernel: its side is always the GPU's).
        ``bidir`` runs the reverse direction at the same time; each GPU's SMs are then split
        between its two kernels when one GPU runs both (host copies)."""
        a, b, pull, bidir = int(task["src"]), int(task["dst"]), task["initiator"] == "pull", bool(task.get("bidir"))
        routes = [(a, b)] + ([(b, a)] if bidir else [])
        refused = self._refused([(d, s) if pull else (s, d) for s, d in routes])
        if refused is not None:
            return refused
        clock = Clock()
        size, iters, samples = int(task["size"]) // 16 * 16, int(task["iters"]), int(task["samples"])
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
        memory, allocated near ``cpus``), nvbandwidth's method (LATENCY_BUFFER above): each sample
        is one sweep of ``accesses`` reads over every SM, ns per read. Verified when every SM's walk
        ended on the node the chain's arithmetic says."""
        refused = self._refused([(int(task["dev"]), int(task["target"]))])
        if refused is not None:
            return refused
        clock = Clock()
        g = self.gpus[int(task["dev"])]
        target, samples = int(task["target"]), int(task["samples"])
        sms = self.sms[g.ordinal]
        steps = max(1, int(task.get("accesses", ACCESSES)) // sms)
        nodes = LATENCY_BUFFER // 8
        host = c_void_p()
        if target >= 0:
            base = self._device(self.gpus[target], LATENCY_BUFFER, "chain")
            chain_at = self._host(LATENCY_BUFFER, "chain")
        else:
            self.cu("cuCtxSetCurrent", g.ctx)
            flags = HOST_PORTABLE if self.uva[g.ordinal] else engine.HOST_PORTABLE_DEVICEMAP
            with near(task.get("cpus")):
                self.cu("cuMemHostAlloc", ctypes.byref(host), LATENCY_BUFFER, flags)
            chain_at = self._addr(host)
            base = chain_at if self.uva[g.ordinal] else self._mapped(g, chain_at)
        chain = (c_uint64 * nodes).from_address(chain_at)
        for i in range(nodes):
            chain[i] = base + ((i + LATENCY_STRIDE) % nodes) * 8
        if target >= 0:
            self.cu("cuCtxSetCurrent", self.gpus[target].ctx)
            self.cu("cuMemcpyHtoD_v2", base, chain_at, LATENCY_BUFFER)
        out = self._device(g, 8 * sms, "chase-out")
        stream = self._stream(g, 0)
        kernel = self.kernels[g.ordinal][1]
        walks = [
            [self._launch(g, kernel, sms, 1, stream, c_uint64(base), c_uint32(steps), c_uint64(out), c_uint32(b))]
            for b in range(sms)
        ]
        clock.lap("allocation")
        ns: list[float] = []
        held = True
        for _ in range(samples):
            ms, ok = self._sample([(g, stream, walks)])
            held &= ok
            ns.append(sum(ms[0]) * 1e6 / (steps * sms))
        clock.lap("measurement")
        ends = (c_uint64 * sms)()
        self.cu("cuCtxSetCurrent", g.ctx)
        self.cu("cuMemcpyDtoH_v2", ctypes.addressof(ends), out, 8 * sms)
        same = all(int(e) == base + (steps * LATENCY_STRIDE % nodes) * 8 for e in ends)
        if host.value:
            self.cu("cuMemFreeHost", host)
        clock.lap("verification")
        return {"samples": ns, "verified": same, "held": held, "steps_per_sm": steps, "sms": sms,
                "timings": clock.spent}  # fmt: skip
