"""The fitness timer's own logic on a stand-in libcuda (tests/measure/test_cuda_timer.py's, plus modules
and launches): device memory is host memory, and a launch runs the kernel's own PTX in the test
simulator (tests/support/ptxsim.py), or, for the large buffers of most tests, does what the copy
kernels do (copy ``n16`` 16-byte units ``loops`` times). What the GPU host run adds is the driver's
JIT and real memory; what this checks is everything above it: buffers, which GPU runs which kernel,
the launch shapes, the chain's layout, the data checks, the answers.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.measure.test_cuda_timer import FakeDriver, FakeLib, _v
from tests.support import ptxsim
from topodoctor.measure.timer import copy_kernels, kernels, plans, ptx
from topodoctor.measure.timer import engine as copy_engine

JIT_COMPILER_NOT_FOUND = 221
UNSUPPORTED_PTX_VERSION = 222
ATTRIBUTES = {kernels.ATTR_SM_COUNT: 4, kernels.ATTR_CC_MAJOR: 9, kernels.ATTR_CC_MINOR: 0,
              kernels.ATTR_UNIFIED_ADDRESSING: 1}  # fmt: skip


class KernelLib(FakeLib):
    def __init__(self, gpus: int) -> None:
        super().__init__(gpus)
        self.modules: dict[int, str] = {}
        self.functions: dict[int, tuple[str, str]] = {}  # id -> entry, module text
        self.launches: list[tuple[str, int, int]] = []  # kernel, grid, block
        self.module_rc = 0
        self.refuse: bytes = b""  # a module holding this text fails to load
        self.attributes = dict(ATTRIBUTES)
        self.simulate = False  # copy kernels run their PTX (small buffers only: it is slow)
        self.corrupt_kernel_copies = False
        self.short_walk = False  # a chase that loses a step, as a load answered wrong would
        self.freed: list[int] = []
        self.host_allocs: list[tuple[int, int, set[int]]] = []  # size, flags, the CPUs of the allocating thread

    def __getattr__(self, name: str) -> Any:
        extra = {
            "cuModuleLoadData": self._load,
            "cuModuleGetFunction": self._function,
            "cuLaunchKernel": self._launch,
            "cuDeviceGetAttribute": lambda r, attr, d: setattr(r._obj, "value", self.attributes[int(attr)]) or 0,
            "cuFuncGetAttribute": lambda r, attr, fn: setattr(r._obj, "value", 40) or 0,
            "cuOccupancyMaxActiveBlocksPerMultiprocessor": lambda r, fn, block, shm: setattr(r._obj, "value", 3) or 0,
            "cuMemcpyDtoDAsync_v2": lambda d, s, n, st: ctypes.memmove(_v(d), _v(s), n) and 0,
            "cuMemFreeHost": lambda p: self.freed.append(_v(p)) or 0,
            "cuMemHostAlloc": self._host_alloc,
            "cuGetErrorName": self._error_name,
        }
        return extra[name] if name in extra else super().__getattr__(name)

    def _error_name(self, rc: int, ref: Any) -> int:
        names = {JIT_COMPILER_NOT_FOUND: b"CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
                 UNSUPPORTED_PTX_VERSION: b"CUDA_ERROR_UNSUPPORTED_PTX_VERSION"}  # fmt: skip
        ref._obj.value = names.get(int(rc), b"CUDA_ERROR_UNKNOWN")
        return 0

    def _load(self, ref: Any, image: bytes) -> int:
        assert image.endswith(b"\0") and image.count(b"\0") == 1
        if self.module_rc or (self.refuse and self.refuse in image):
            return self.module_rc or UNSUPPORTED_PTX_VERSION
        ref._obj.value = self._id()
        self.modules[ref._obj.value] = image[:-1].decode()
        return 0

    def _function(self, ref: Any, module: Any, name: bytes) -> int:
        text = self.modules[_v(module)]
        assert f".entry {name.decode()}(" in text
        ref._obj.value = self._id()
        self.functions[ref._obj.value] = (name.decode(), text)
        return 0

    def _host_alloc(self, ref: Any, size: int, flags: int) -> int:
        self.host_allocs.append((int(size), int(flags), os.sched_getaffinity(0)))
        return self._alloc(ref, size)

    def memory(self) -> ptxsim.HostMemory:
        return ptxsim.HostMemory([(ctypes.addressof(b), ctypes.sizeof(b)) for b in self.keep])

    def _launch(self, fn: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shm: int, *rest: Any) -> int:
        params = rest[1]
        kernel, text = self.functions[_v(fn)]
        self.launches.append((kernel, gx, bx))
        arg = [int(params[i]) for i in range(len(params))]
        if kernel in (ptx.COPY, ptx.HBM):
            dst, src, n16 = (ctypes.c_uint64.from_address(a).value for a in arg[:3])
            loops = ctypes.c_uint32.from_address(arg[3]).value
            if self.simulate:
                ptxsim.run(text, kernel, gx, bx, [dst, src, n16, loops], self.memory())
            else:
                for _ in range(loops):
                    ctypes.memmove(dst, src, n16 * 16)
            if self.corrupt_kernel_copies:
                ctypes.memset(dst, 0xA5 ^ ctypes.c_ubyte.from_address(src).value, 1)
        else:
            start, out = ctypes.c_uint64.from_address(arg[0]).value, ctypes.c_uint64.from_address(arg[2]).value
            steps = ctypes.c_uint32.from_address(arg[1]).value - self.short_walk
            target = ctypes.c_uint32.from_address(arg[3]).value
            ptxsim.run(text, kernel, gx, bx, [start, steps, out, target], self.memory())
        return 0


class KernelDriver(FakeDriver):
    def __init__(self) -> None:
        super().__init__()
        self.lib = KernelLib(2)


def start(monkeypatch: pytest.MonkeyPatch, **attributes: int) -> kernels.KernelTimer:
    monkeypatch.setattr(copy_engine, "Driver", KernelDriver)
    monkeypatch.setattr(copy_engine, "CHUNK", 1 << 16)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    t = plans.timer(plans.FITNESS)
    lib(t).attributes.update({getattr(kernels, k): v for k, v in attributes.items()})
    hello = t.hello({"op": "hello", "visible": None, "peers": True})
    assert "kernels_jit" in hello["timings"] and "PTX" in hello["method"]
    return t


@pytest.fixture
def timer(monkeypatch: pytest.MonkeyPatch) -> kernels.KernelTimer:
    return start(monkeypatch)


def lib(t: kernels.KernelTimer) -> KernelLib:
    assert isinstance(t.cu.lib, KernelLib)
    return t.cu.lib


SIZE = 300_000 // 16 * 16


@pytest.mark.parametrize("engine", ["ce", "sm"])
def test_hbm_copies_are_verified(timer: kernels.KernelTimer, engine: str) -> None:
    a = timer.hbm({"op": "hbm", "dev": 1, "engine": engine, "size": SIZE, "iters": 3, "samples": 4})
    assert a["verified"] is True and a["held"] is True and len(a["samples"]) == 4 and min(a["samples"]) > 0
    kernels = [k for k, _, _ in lib(timer).launches]
    assert (ptx.HBM in kernels) is (engine == "sm")
    if engine == "sm":
        assert a["kernel"] == copy_kernels.DEFAULT.name and a["regs"] == 40 and a["resident_blocks_per_sm"] == 3


@pytest.mark.parametrize(
    "name",
    [
        copy_kernels.DEFAULT.name,
        "stride-u3-t64-b2-v4u32x2-ld:ncna-st:cs",
        "oneshot-u2-t128-v2u64-l2:256B",
        "oneshot-u1-t32-v4u32-st:wt-o4096",
        "stride-u2-t32-u64-o256",
        "bulk-s3-c2k-b1",
        "bulk-s2-c1k-b2-o512",
    ],
)
def test_hbm_kernels_copy_what_their_ptx_says(timer: kernels.KernelTimer, name: str) -> None:
    """Each shape's own PTX, run by the simulator on a buffer that leaves a tail, ``iters`` times."""
    lib(timer).simulate = True
    before = len(lib(timer).launches)
    a = timer.hbm({"op": "hbm", "dev": 0, "engine": "sm", "kernel": name, "size": 9000, "iters": 2, "samples": 1})
    kernel = copy_kernels.parse(name)
    assert a["verified"] is True and a["kernel"] == kernel.name and "fallback" not in a
    assert a["size"] == 9000 // kernel.granule_bytes * kernel.granule_bytes
    launches = lib(timer).launches[before:]
    geo = copy_kernels.geometry(kernel, a["size"] // 16, 4)
    assert {(g, b) for _, g, b in launches} == {(geo.grid, geo.block)} == {(a["grid"], a["block"])}
    # warm-up and one sample; a oneshot grid is launched once per copy, a persistent one loops inside
    assert len(launches) == (2 if geo.loops_inside else 4)


def test_a_kernel_the_gpu_lacks_falls_back_to_the_portable_one(monkeypatch: pytest.MonkeyPatch) -> None:
    timer = start(monkeypatch, ATTR_CC_MAJOR=8)
    a = timer.hbm({"op": "hbm", "dev": 1, "engine": "sm", "kernel": "bulk", "size": SIZE, "iters": 1, "samples": 1})
    assert a["verified"] is True and a["kernel"] == copy_kernels.PORTABLE.name and "sm_90" in a["fallback"]


def test_a_kernel_the_driver_cannot_load_falls_back_to_the_portable_one(timer: kernels.KernelTimer) -> None:
    lib(timer).refuse = b"cp.async.bulk"
    a = timer.hbm({"op": "hbm", "dev": 0, "engine": "sm", "kernel": "bulk", "size": SIZE, "iters": 1, "samples": 1})
    assert a["kernel"] == copy_kernels.PORTABLE.name and "UNSUPPORTED_PTX_VERSION" in a["fallback"]


def test_a_wrong_kernel_copy_is_caught(timer: kernels.KernelTimer) -> None:
    lib(timer).corrupt_kernel_copies = True
    a = timer.hbm({"op": "hbm", "dev": 0, "engine": "sm", "size": SIZE, "iters": 1, "samples": 1})
    assert a["verified"] is False


@pytest.mark.parametrize(
    ("src", "dst", "initiator", "bidir", "runs_on"),
    [
        (0, 1, "pull", False, [1]),  # the receiver reads
        (0, 1, "push", False, [0]),  # the sender writes
        (0, 1, "pull", True, [1, 0]),
        (-1, 1, "pull", False, [1]),  # host memory: always the GPU's kernel
        (1, -1, "push", False, [1]),
        (-1, 0, "pull", True, [0, 0]),
    ],
)
def test_sm_copies_run_where_they_should_and_are_verified(
    timer: kernels.KernelTimer, src: int, dst: int, initiator: str, bidir: bool, runs_on: list[int]
) -> None:
    task = {"src": src, "dst": dst, "initiator": initiator, "bidir": bidir, "size": SIZE, "iters": 2, "samples": 3}
    before = len(lib(timer).launches)
    a = timer.sm_copy({"op": "sm_copy", **task})
    assert a["verified"] is True and a["runs_on"] == runs_on and len(a["samples"]) == 3
    assert (a["reverse"] is not None) is bidir
    grids = {g for k, g, _ in lib(timer).launches[before:]}
    assert {k for k, _, _ in lib(timer).launches[before:]} == {ptx.COPY}
    # one GPU running both directions splits its SMs between them
    assert grids == ({2} if len(set(runs_on)) < len(runs_on) else {4})


@pytest.mark.parametrize("target", [-1, 0, 1])
def test_pointer_chase_sweeps_every_sm_as_nvbandwidth(timer: kernels.KernelTimer, target: int) -> None:
    before = len(lib(timer).launches)
    a = timer.chase({"op": "chase", "dev": 0, "target": target, "accesses": 5000, "samples": 2})
    assert a["verified"] is True and len(a["samples"]) == 2 and min(a["samples"]) > 0
    assert a["sms"] == 4 and a["steps_per_sm"] == 5000 // 4
    # one launch per SM per sample, every launch a one-thread block on each SM; no warm-up
    assert lib(timer).launches[before:] == [(ptx.CHASE, 4, 1)] * 4 * 2
    assert bool(lib(timer).freed) is (target == -1)  # host memory is allocated for the test and freed


def test_host_chain_memory_is_allocated_near_the_gpu(timer: kernels.KernelTimer) -> None:
    """As nvbandwidth: PORTABLE pinned memory (used through its unified address), allocated by a
    thread on the GPU's CPUs; the thread gets its CPUs back afterwards."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    allowed = os.sched_getaffinity(0)
    one = min(allowed)
    before = len(lib(timer).host_allocs)
    timer.chase({"op": "chase", "dev": 0, "target": -1, "accesses": 400, "samples": 1, "cpus": [one, 10**6]})
    assert lib(timer).host_allocs[before:] == [(kernels.LATENCY_BUFFER, kernels.HOST_PORTABLE, {one})]
    assert os.sched_getaffinity(0) == allowed


def test_a_walk_that_ends_elsewhere_is_caught(timer: kernels.KernelTimer) -> None:
    lib(timer).short_walk = True
    a = timer.chase({"op": "chase", "dev": 0, "target": 1, "accesses": 1200, "samples": 1})
    assert a["verified"] is False


def test_missing_jit_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_engine, "Driver", KernelDriver)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    t = plans.timer(plans.FITNESS)
    lib(t).module_rc = JIT_COMPILER_NOT_FOUND
    with pytest.raises(RuntimeError, match="libnvidia-ptxjitcompiler"):
        t.hello({"op": "hello", "visible": None, "peers": False})


def test_the_base_module_is_ptx_the_assembler_accepts(tmp_path: Path) -> None:
    text = ptx.module(copy_kernels.parse("stride-u12"))
    assert text.endswith(b"\0") and text.count(b"ld.global.v4.u32") == 12 + 1
    with pytest.raises(ValueError, match="newer GPU"):
        ptx.module(copy_kernels.parse("bulk"))
    assembler = shutil.which("ptxas")
    if assembler is None:
        pytest.skip("no ptxas here: the GPU host's JIT compiles it (docs/benchmarks.md)")
    (tmp_path / "k.ptx").write_bytes(text[:-1])
    done = subprocess.run([assembler, "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")])
    assert done.returncode == 0
