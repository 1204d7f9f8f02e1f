"""The fitness timer's own logic on a stand-in libcuda (tests/measure/test_cuda_timer.py's, plus modules
and launches): device memory is host memory, and a launch does what the kernel's PTX says (the
copy kernel copies ``n16`` 16-byte units ``loops`` times; the chase follows ``steps`` pointers).
What the GPU host run adds is the driver's JIT and real memory; what this checks is everything
above it: buffers, which GPU runs which kernel, the chain's layout, the data checks, the answers.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.measure.test_cuda_timer import FakeDriver, FakeLib, _v
from topodoctor.measure.copies import cuda_timer
from topodoctor.measure.fitness import ptx, sm_timer

JIT_COMPILER_NOT_FOUND = 221


class KernelLib(FakeLib):
    def __init__(self, gpus: int) -> None:
        super().__init__(gpus)
        self.functions: dict[int, str] = {}
        self.launches: list[tuple[str, int]] = []  # kernel, grid
        self.module_rc = 0
        self.corrupt_kernel_copies = False
        self.short_walk = False  # a chase that loses a step, as a load answered wrong would

    def __getattr__(self, name: str) -> Any:
        extra = {
            "cuModuleLoadData": self._load,
            "cuModuleGetFunction": self._function,
            "cuLaunchKernel": self._launch,
            "cuDeviceGetAttribute": lambda r, attr, d: setattr(r._obj, "value", 4) or 0,
            "cuMemcpyDtoDAsync_v2": lambda d, s, n, st: ctypes.memmove(_v(d), _v(s), n) and 0,
            "cuGetErrorName": self._error_name,
        }
        return extra[name] if name in extra else super().__getattr__(name)

    def _error_name(self, rc: int, ref: Any) -> int:
        names = {JIT_COMPILER_NOT_FOUND: b"CUDA_ERROR_JIT_COMPILER_NOT_FOUND"}
        ref._obj.value = names.get(int(rc), b"CUDA_ERROR_UNKNOWN")
        return 0

    def _load(self, ref: Any, image: bytes) -> int:
        assert image.endswith(b"\0") and b".entry td_copy" in image and b".entry td_chase" in image
        ref._obj.value = self._id()
        return self.module_rc

    def _function(self, ref: Any, module: Any, name: bytes) -> int:
        ref._obj.value = self._id()
        self.functions[ref._obj.value] = name.decode()
        return 0

    def _launch(self, fn: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shm: int, *rest: Any) -> int:
        params = rest[1]
        kernel = self.functions[_v(fn)]
        self.launches.append((kernel, gx))
        arg = [int(params[i]) for i in range(len(params))]
        if kernel == ptx.COPY:
            dst, src, n16 = (ctypes.c_uint64.from_address(a).value for a in arg[:3])
            for _ in range(ctypes.c_uint32.from_address(arg[3]).value):
                ctypes.memmove(dst, src, n16 * 16)
            if self.corrupt_kernel_copies:
                ctypes.memset(dst, 0xA5 ^ ctypes.c_ubyte.from_address(src).value, 1)
        else:
            p = ctypes.c_uint64.from_address(arg[0]).value
            for _ in range(ctypes.c_uint32.from_address(arg[1]).value - self.short_walk):
                p = ctypes.c_uint64.from_address(p).value
            ctypes.c_uint64.from_address(ctypes.c_uint64.from_address(arg[2]).value).value = p
        return 0


class KernelDriver(FakeDriver):
    def __init__(self) -> None:
        super().__init__()
        self.lib = KernelLib(2)


@pytest.fixture
def timer(monkeypatch: pytest.MonkeyPatch) -> sm_timer.FitnessTimer:
    monkeypatch.setattr(cuda_timer, "Driver", KernelDriver)
    monkeypatch.setattr(cuda_timer, "CHUNK", 1 << 16)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    t = sm_timer.FitnessTimer()
    hello = t.hello({"op": "hello", "visible": None, "peers": True})
    assert "kernels_jit" in hello["timings"] and "PTX" in hello["method"]
    return t


def lib(t: sm_timer.FitnessTimer) -> KernelLib:
    assert isinstance(t.cu.lib, KernelLib)
    return t.cu.lib


SIZE = 300_000 // 16 * 16


@pytest.mark.parametrize("engine", ["ce", "sm"])
def test_hbm_copies_are_verified(timer: sm_timer.FitnessTimer, engine: str) -> None:
    a = timer.hbm({"op": "hbm", "dev": 1, "engine": engine, "size": SIZE, "iters": 3, "samples": 4})
    assert a["verified"] is True and a["held"] is True and len(a["samples"]) == 4 and min(a["samples"]) > 0
    kernels = [k for k, _ in lib(timer).launches]
    assert (ptx.COPY in kernels) is (engine == "sm")


def test_a_wrong_kernel_copy_is_caught(timer: sm_timer.FitnessTimer) -> None:
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
    timer: sm_timer.FitnessTimer, src: int, dst: int, initiator: str, bidir: bool, runs_on: list[int]
) -> None:
    task = {"src": src, "dst": dst, "initiator": initiator, "bidir": bidir, "size": SIZE, "iters": 2, "samples": 3}
    before = len(lib(timer).launches)
    a = timer.sm_copy({"op": "sm_copy", **task})
    assert a["verified"] is True and a["runs_on"] == runs_on and len(a["samples"]) == 3
    assert (a["reverse"] is not None) is bidir
    grids = {g for _, g in lib(timer).launches[before:]}
    # one GPU running both directions splits its SMs between them
    assert grids == ({2} if len(set(runs_on)) < len(runs_on) else {4})


@pytest.mark.parametrize("target", [-1, 0, 1])
def test_pointer_chase_walks_the_chain(timer: sm_timer.FitnessTimer, target: int) -> None:
    a = timer.chase({"op": "chase", "dev": 0, "target": target, "steps": 5000, "samples": 2})
    assert a["verified"] is True and len(a["samples"]) == 2 and min(a["samples"]) > 0


def test_a_walk_that_ends_elsewhere_is_caught(timer: sm_timer.FitnessTimer) -> None:
    lib(timer).short_walk = True
    a = timer.chase({"op": "chase", "dev": 0, "target": 1, "steps": 300, "samples": 1})
    assert a["verified"] is False


def test_missing_jit_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_timer, "Driver", KernelDriver)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    t = sm_timer.FitnessTimer()
    lib(t).module_rc = JIT_COMPILER_NOT_FOUND
    with pytest.raises(RuntimeError, match="libnvidia-ptxjitcompiler"):
        t.hello({"op": "hello", "visible": None, "peers": False})


def test_the_module_is_ptx_the_assembler_accepts(tmp_path: Path) -> None:
    text = ptx.module(12)
    assert text.endswith(b"\0") and text.count(b"ld.global.v4.u32") == 12 + 1
    with pytest.raises(ValueError):
        ptx.module(0)
    assembler = shutil.which("ptxas")
    if assembler is None:
        pytest.skip("no ptxas here: the GPU host's JIT compiles it (docs/benchmarks.md)")
    (tmp_path / "k.ptx").write_bytes(text[:-1])
    done = subprocess.run([assembler, "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")])
    assert done.returncode == 0
