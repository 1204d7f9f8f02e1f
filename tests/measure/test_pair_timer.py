"""The copy timer of `bandwidth` without a GPU: the data check kernel's PTX run by the simulator,
the timer on the stand-in libcuda of tests/measure/test_fitness_timer.py (SM copies and chase
between GPUs, kernels that cannot load, pairs without peer access, data checked on the GPU), and
the plan of the SM modes."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from tests.measure.test_cuda_timer import _v
from tests.measure.test_fitness_timer import JIT_COMPILER_NOT_FOUND, KernelDriver, KernelLib
from tests.support import ptxsim
from topodoctor.measure.copies.tasks import CopySettings, plan_tasks
from topodoctor.measure.timer import copy_kernels, kernels, on_gpu, plans, ptx
from topodoctor.measure.timer import engine as copy_engine


# ---- td_same, as the simulator runs its PTX
def _same(a: bytes, b: bytes, grid: int = 3, block: int = 32) -> int:
    mem = ptxsim.Memory()
    pa, pb, flag = mem.alloc(len(a), a), mem.alloc(len(b), b), mem.alloc(16)
    ptxsim.run(ptx.same_module().decode().rstrip("\0"), ptx.SAME, grid, block, [pa, pb, len(a) // 16, flag], mem)
    return int.from_bytes(mem.read(flag, 4), "little")


PATTERN = bytes(range(256)) * 20  # 5120 bytes: 320 units, more than the 96 threads: every thread loops


def test_equal_buffers_leave_the_flag_down() -> None:
    assert _same(PATTERN, PATTERN) == 0


@pytest.mark.parametrize("at", [0, 7, 8, 12, 15, 16 * 96, len(PATTERN) - 1])
def test_one_differing_byte_anywhere_raises_the_flag(at: int) -> None:
    """First unit, each of the four 32-bit lanes, the first unit of a thread's second pass, the last byte."""
    other = bytearray(PATTERN)
    other[at] ^= 0x40
    assert _same(PATTERN, bytes(other)) == 1


def test_the_check_reads_nothing_past_its_units() -> None:
    """The compare stops at ``n16`` units: bytes after them (another buffer's) are never read."""
    mem = ptxsim.Memory()
    pa, pb, flag = mem.alloc(160, PATTERN[:160]), mem.alloc(160, PATTERN[:160]), mem.alloc(16)
    text = ptx.same_module().decode().rstrip("\0")
    ptxsim.run(text, ptx.SAME, 4, 64, [pa, pb, 10, flag], mem)  # 256 threads for 10 units
    assert mem.read(flag, 4) == b"\0\0\0\0"
    with pytest.raises(ptxsim.SimError, match="outside every allocation"):
        ptxsim.run(text, ptx.SAME, 1, 32, [pa, pb, 11, flag], mem)


def test_the_modules_assemble_where_ptxas_is(tmp_path: Any) -> None:
    import shutil
    import subprocess

    assembler = shutil.which("ptxas")
    if assembler is None:
        pytest.skip("no ptxas here: the GPU host's JIT compiles them")
    for name, text in (("same", ptx.same_module()), ("peer", ptx.module(copy_kernels.PEER))):
        (tmp_path / f"{name}.ptx").write_bytes(text[:-1])
        done = subprocess.run([assembler, "-arch=sm_90", str(tmp_path / f"{name}.ptx"), "-o", str(tmp_path / "k")])
        assert done.returncode == 0, name


def test_peer_copies_use_nvbandwidth_s_grid_with_four_loads_in_flight() -> None:
    k = copy_kernels.PEER
    assert (k.style, k.unroll, k.threads, k.blocks_per_sm, k.element_bytes) == ("stride", 4, 512, 1, 16)
    assert copy_kernels.geometry(k, 1 << 24, 132) == copy_kernels.Geometry(132, 512, True)


# ---- the timer on the stand-in driver
class PairLib(KernelLib):
    """KernelLib, plus td_same: simulated where asked, else compared natively."""

    def _launch(self, fn: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shm: int, *rest: Any) -> int:
        kernel, text = self.functions[_v(fn)]
        if kernel != ptx.SAME:
            return super()._launch(fn, gx, gy, gz, bx, by, bz, shm, *rest)
        params = rest[1]
        a, b, n16, flag = (ctypes.c_uint64.from_address(int(params[i])).value for i in range(4))
        self.launches.append((kernel, gx, bx))
        if self.simulate:
            ptxsim.run(text, kernel, gx, bx, [a, b, n16, flag], self.memory())
        elif ctypes.string_at(a, n16 * 16) != ctypes.string_at(b, n16 * 16):
            ctypes.c_uint32.from_address(flag).value = 1
        return 0


class PairDriver(KernelDriver):
    def __init__(self) -> None:
        super().__init__()
        self.lib = PairLib(2)


def _start(monkeypatch: pytest.MonkeyPatch, module_rc: int = 0, **hello: Any) -> kernels.KernelTimer:
    monkeypatch.setattr(copy_engine, "Driver", PairDriver)
    monkeypatch.setattr(copy_engine, "CHUNK", 1 << 16)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    t = plans.timer(plans.BANDWIDTH)
    lib(t).module_rc = module_rc
    t.answer = t.hello({"op": "hello", "visible": None, "peers": True, "kernels": True, **hello})  # type: ignore[attr-defined]
    return t


def lib(t: kernels.KernelTimer) -> PairLib:
    assert isinstance(t.cu.lib, PairLib)
    return t.cu.lib


SIZE = 300_000 // 16 * 16


def test_hello_loads_the_kernels_and_says_when_cuda_was_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch)
    answer = t.answer  # type: ignore[attr-defined]
    assert answer["kernels_missing"] is None and "stride-u4-t512-b1" in answer["method"]
    assert answer["clock"]["ready"] > 0 and "kernels_jit" in answer["timings"]
    assert t.checks is not None and set(t.checks.same_fn) == {0, 1}


def test_copies_are_checked_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch)
    before = len(lib(t).launches)
    a = t.p2p({"op": "p2p", "src": 0, "dst": 1, "size": SIZE, "iters": 2, "samples": 2, "mode": "bidir"})
    assert a["verified"] is True
    checks = [(k, g, b) for k, g, b in lib(t).launches[before:] if k == ptx.SAME]
    assert checks == [(ptx.SAME, 4 * on_gpu.SAME_BLOCKS_PER_SM, on_gpu.SAME_BLOCK)] * 2  # each destination
    lib(t).corrupt_peer_copies = True
    a = t.p2p({"op": "p2p", "src": 1, "dst": 0, "size": SIZE, "iters": 1, "samples": 1, "mode": "oneway"})
    assert a["verified"] is False


def test_host_copies_back_are_zeroed_and_checked_by_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned buffer is zeroed by cuMemsetD8Async before the copies into it and compared by
    td_same through its mapping; a copy that wrote nothing is caught; where the driver refuses the
    memset, the CPU zeroes it."""
    t = _start(monkeypatch)
    t.checks.prepare({"op": "prepare", "modes": ["h2d", "d2h"], "size": SIZE, "host_size": SIZE})
    pinned = t.host_buffers[(SIZE, "io")]
    assert pinned in t.patterned  # filled while the probe ran
    before = len(lib(t).launches)
    a = t.host({"op": "host", "dev": 1, "dir": "d2h", "size": SIZE, "iters": 1, "samples": 1})
    assert a["verified"] is True and lib(t).memsets == [pinned]
    assert [k for k, _, _ in lib(t).launches[before:]] == [ptx.SAME]
    real = PairLib.__getattr__

    def lost_copies(self: PairLib, name: str) -> Any:
        return (lambda *a: 0) if name == "cuMemcpyDtoHAsync_v2" else real(self, name)

    monkeypatch.setattr(PairLib, "__getattr__", lost_copies)
    assert t.host({"op": "host", "dev": 0, "dir": "d2h", "size": SIZE, "iters": 1, "samples": 1})["verified"] is False

    def no_async_memset(self: PairLib, name: str) -> Any:
        return (lambda *a: 1) if name == "cuMemsetD8Async" else lost_copies(self, name)  # CUDA_ERROR_INVALID_VALUE

    monkeypatch.setattr(PairLib, "__getattr__", no_async_memset)
    ctypes.memset(pinned, 0x11, SIZE)
    t.patterned.add(pinned)  # as if it held the pattern: only the CPU's zeroing can spoil that
    assert t.host({"op": "host", "dev": 0, "dir": "d2h", "size": SIZE, "iters": 1, "samples": 1})["verified"] is False
    assert ctypes.string_at(pinned, 16) == bytes(16)


@pytest.mark.slow  # subprocesses (or the PTX simulator) for 0.3 s or more
def test_the_check_kernel_itself_runs_on_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch)
    lib(t).simulate = True
    a = t.host({"op": "host", "dev": 1, "dir": "h2d", "size": 4096, "iters": 1, "samples": 1})
    assert a["verified"] is True and ptx.SAME in [k for k, _, _ in lib(t).launches]


def test_sm_copies_and_chase_between_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch)
    one = t.sm_copy({"op": "sm_copy", "src": 0, "dst": 1, "initiator": "pull", "bidir": False, "size": SIZE,
                     "iters": 2, "samples": 3})  # fmt: skip
    assert one["verified"] is True and one["runs_on"] == [1] and len(one["samples"]) == 3
    both = t.sm_copy({"op": "sm_copy", "src": 0, "dst": 1, "initiator": "pull", "bidir": True, "size": SIZE,
                      "iters": 2, "samples": 3})  # fmt: skip
    assert both["verified"] is True and both["runs_on"] == [1, 0] and len(both["reverse"]) == 3
    chase = t.chase({"op": "chase", "dev": 1, "target": 0, "accesses": 800, "samples": 2})
    assert chase["verified"] is True and len(chase["samples"]) == 2


def test_a_pair_without_peer_access_runs_no_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch)
    t.reach[(1, 0)] = False  # GPU1 cannot map GPU0's memory
    before = len(lib(t).launches)
    a = t.sm_copy({"op": "sm_copy", "src": 0, "dst": 1, "initiator": "pull", "bidir": False, "size": SIZE,
                   "iters": 1, "samples": 1})  # fmt: skip
    assert "no peer access from GPU ordinal 1 to 0" in a["unavailable"]
    assert "unavailable" in t.chase({"op": "chase", "dev": 1, "target": 0, "accesses": 400, "samples": 1})
    assert "unavailable" not in t.chase({"op": "chase", "dev": 0, "target": 1, "accesses": 400, "samples": 1})
    assert [k for k, _, _ in lib(t).launches[before:]] == [ptx.CHASE] * 4  # only GPU0's walk, one per SM


def test_without_the_jit_the_copy_engine_still_measures(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch, module_rc=JIT_COMPILER_NOT_FOUND)
    answer = t.answer  # type: ignore[attr-defined]
    assert "libnvidia-ptxjitcompiler" in answer["kernels_missing"] and "PTX" not in answer["method"]
    a = t.p2p({"op": "p2p", "src": 0, "dst": 1, "size": SIZE, "iters": 1, "samples": 1, "mode": "oneway"})
    assert a["verified"] is True and not lib(t).launches  # checked by the CPU
    sm = t.sm_copy({"op": "sm_copy", "src": 0, "dst": 1, "initiator": "pull", "bidir": False, "size": SIZE,
                    "iters": 1, "samples": 1})  # fmt: skip
    assert "libnvidia-ptxjitcompiler" in sm["unavailable"]


def test_another_kernel_can_be_named(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch, copy_kernel="stride-u12")
    assert t.copy_kernel.unroll == 12 and "stride-u12-t512-b1" in t.answer["method"]  # type: ignore[attr-defined]


# ---- the plan
def test_the_sm_modes_plan_a_task_per_pair() -> None:
    s = CopySettings(modes=("sm_oneway", "sm_bidir", "sm_latency"), latency_accesses=5000, latency_samples=2)
    tasks = plan_tasks(s, {0: 1, 1: 0, 2: 2})  # NVML index -> CUDA ordinal
    by = {m: [t for t in tasks if t.mode == m] for m in s.modes}
    assert len(by["sm_oneway"]) == 6 and len(by["sm_bidir"]) == 3 and len(by["sm_latency"]) == 6
    one = next(t for t in by["sm_oneway"] if (t.src, t.dsts) == (0, (1,)))
    assert one.payload == {"op": "sm_copy", "initiator": "pull", "size": s.size_bytes, "iters": s.iters,
                           "samples": s.samples, "src": 1, "dst": 0, "bidir": False}  # fmt: skip
    chase = next(t for t in by["sm_latency"] if (t.src, t.dsts) == (2, (0,)))
    assert chase.payload == {"op": "chase", "accesses": 5000, "samples": 2, "size": 0, "dev": 2, "target": 1}
    assert all(t.payload["bidir"] and t.src < t.dsts[0] for t in by["sm_bidir"])
