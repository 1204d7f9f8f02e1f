"""The driver-API copy timer's own logic on a stand-in libcuda: device memory is host memory,
copies happen when queued, events read the host clock. What the GPU host run adds is the real
driver; what this checks is everything above it (contexts, buffers, the flag protocol, the
byte-for-byte check, the answers' shape)."""

from __future__ import annotations

import ctypes
import time
from typing import Any

import pytest

from topodoctor.measure.timer import engine as copy_engine


def _v(x: Any) -> Any:
    return x.value if hasattr(x, "value") else x


class FakeLib:
    def __init__(self, gpus: int) -> None:
        self.gpus = gpus
        self.keep: list[Any] = []
        self.times: dict[int, float] = {}
        self.next_id = 1
        self.waits: list[int] = []
        self.corrupt_peer_copies = False
        self.memsets: list[int] = []  # addresses zeroed by cuMemsetD8Async

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _alloc(self, ref: Any, size: int) -> int:
        buf = ctypes.create_string_buffer(max(int(size), 1))
        self.keep.append(buf)
        ref._obj.value = ctypes.addressof(buf)
        return 0

    def __getattr__(self, name: str) -> Any:
        ok = lambda *a: 0  # noqa: E731
        table = {
            "cuInit": ok,
            "cuDeviceGetCount": lambda r: setattr(r._obj, "value", self.gpus) or 0,
            "cuDriverGetVersion": lambda r: setattr(r._obj, "value", 13000) or 0,
            "cuDeviceGet": lambda r, i: setattr(r._obj, "value", int(i)) or 0,
            "cuDevicePrimaryCtxRetain": lambda r, d: setattr(r._obj, "value", 1000 + _v(d)) or 0,
            "cuCtxSetCurrent": ok,
            "cuCtxSynchronize": ok,
            "cuDeviceCanAccessPeer": lambda r, a, b: setattr(r._obj, "value", 1) or 0,
            "cuCtxEnablePeerAccess": ok,
            "cuMemAlloc_v2": self._alloc,
            "cuMemHostAlloc": lambda r, n, f: self._alloc(r, n),
            "cuMemHostGetDevicePointer_v2": lambda r, p, f: setattr(r._obj, "value", _v(p)) or 0,
            "cuMemsetD8_v2": lambda d, c, n: ctypes.memset(_v(d), _v(c), n) and 0,
            "cuMemsetD8Async": lambda d, c, n, s: self._memset(_v(d), _v(c), n),
            "cuMemcpyHtoD_v2": lambda d, h, n: ctypes.memmove(_v(d), _v(h), n) and 0,
            "cuMemcpyDtoH_v2": lambda h, d, n: ctypes.memmove(_v(h), _v(d), n) and 0,
            "cuMemcpyPeerAsync": self._peer,
            "cuMemcpyHtoDAsync_v2": lambda d, h, n, s: ctypes.memmove(_v(d), _v(h), n) and 0,
            "cuMemcpyDtoHAsync_v2": lambda h, d, n, s: ctypes.memmove(_v(h), _v(d), n) and 0,
            "cuStreamCreate": lambda r, f: setattr(r._obj, "value", self._id()) or 0,
            "cuStreamWaitValue32_v2": lambda s, a, v, f: self.waits.append(int(v)) or 0,
            "cuEventCreate": lambda r, f: setattr(r._obj, "value", self._id()) or 0,
            "cuEventRecord": lambda e, s: self.times.__setitem__(_v(e), time.perf_counter()) or 0,
            "cuEventSynchronize": ok,
            "cuEventElapsedTime": lambda r, a, b: (
                setattr(r._obj, "value", (self.times[_v(b)] - self.times[_v(a)]) * 1e3 + 1e-4) or 0
            ),
            "cuEventDestroy_v2": ok,
            "cuDeviceGetName": lambda b, n, d: setattr(b, "value", b"Fake H200") or 0,
            "cuDeviceGetPCIBusId": lambda b, n, d: setattr(b, "value", f"0000:00:{6 + int(d):02X}.0".encode()) or 0,
        }
        return table[name]

    def _memset(self, d: int, c: int, n: int) -> int:
        self.memsets.append(d)
        ctypes.memset(d, c, n)
        return 0

    def _peer(self, d: int, dctx: Any, s: int, sctx: Any, n: int, stream: Any) -> int:
        ctypes.memmove(_v(d), _v(s), n)
        if self.corrupt_peer_copies:
            ctypes.memset(_v(d) + n - 1, 0x5A ^ ctypes.c_ubyte.from_address(_v(s) + n - 1).value, 1)
        return 0


class FakeDriver(copy_engine.Driver):
    def __init__(self) -> None:
        self.lib = FakeLib(2)
        self.libc = ctypes.CDLL(None)
        self.libc.memcmp.argtypes, self.libc.memcmp.restype = [ctypes.c_void_p] * 2 + [ctypes.c_size_t], ctypes.c_int


@pytest.fixture
def timer(monkeypatch: pytest.MonkeyPatch) -> copy_engine.Timer:
    monkeypatch.setattr(copy_engine, "Driver", FakeDriver)
    monkeypatch.setattr(copy_engine, "CHUNK", 1 << 16)  # several chunks per buffer
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hello sets it in this process: undone after the test
    t = copy_engine.Timer()
    hello = t.hello({"op": "hello", "visible": "GPU-a,GPU-b", "peers": True})
    assert [d["bus_id"] for d in hello["devices"]] == ["0000:00:06.0", "0000:00:07.0"]
    assert hello["cuda"] == "13.0" and set(hello["timings"]) == {"cuda_init", "contexts_and_peers", "allocation"}
    return t


SIZE = 300_000  # not a multiple of the chunk: the last chunk is partial


def test_oneway_and_bidir_answers(timer: copy_engine.Timer) -> None:
    for mode in ("oneway", "bidir"):
        a = timer.p2p({"op": "p2p", "src": 0, "dst": 1, "size": SIZE, "iters": 3, "samples": 4, "mode": mode})
        assert len(a["samples"]) == 4 and min(a["samples"]) > 0
        assert a["verified"] is True and a["held"] is True and a["path"] == "p2p"
        assert (a["reverse"] is not None) is (mode == "bidir")
        assert {"allocation", "measurement", "verification"} <= set(a["timings"])


def test_every_sample_waits_on_a_new_flag_value(timer: copy_engine.Timer) -> None:
    lib = timer.cu.lib
    assert isinstance(lib, FakeLib)
    before = len(lib.waits)
    timer.p2p({"op": "p2p", "src": 1, "dst": 0, "size": 64, "iters": 2, "samples": 3, "mode": "bidir"})
    waits = lib.waits[before:]
    assert len(waits) == 2 * 4  # two streams, warm-up + 3 samples
    assert waits == sorted(waits) and len(set(waits)) == 4
    flag = ctypes.c_uint32.from_address(timer._addr(timer.flag_host)).value
    assert flag == waits[-1]  # released


def test_a_corrupted_copy_is_caught(timer: copy_engine.Timer) -> None:
    lib = timer.cu.lib
    assert isinstance(lib, FakeLib)
    lib.corrupt_peer_copies = True
    a = timer.p2p({"op": "p2p", "src": 0, "dst": 1, "size": SIZE, "iters": 1, "samples": 1, "mode": "oneway"})
    assert a["verified"] is False


def test_latency_per_destination(timer: copy_engine.Timer) -> None:
    a = timer.latency({"op": "latency", "src": 1, "dsts": [0], "size": 4, "iters": 10, "samples": 3})
    (r,) = a["results"]
    assert r["dst"] == 0 and len(r["samples"]) == 3 and r["verified"] is None and r["held"] is True


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_host_copies_both_ways(timer: copy_engine.Timer, direction: str) -> None:
    a = timer.host({"op": "host", "dev": 0, "dir": direction, "size": SIZE, "iters": 2, "samples": 3})
    assert a["verified"] is True and a["path"] == "host" and len(a["samples"]) == 3


def test_host_copies_fill_the_pattern_once_and_zero_before_each_read_back(
    timer: copy_engine.Timer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """h2d after h2d finds the pattern in place (no refill); d2h zeroes the buffer first, so a
    copy back that wrote nothing fails its check even though the buffer held the pattern."""
    task = {"op": "host", "dev": 0, "size": SIZE, "iters": 1, "samples": 1}
    fills: list[int] = []
    real_fill = copy_engine.Timer._fill

    def counted(self: copy_engine.Timer, pinned: int, size: int) -> None:
        fills.append(pinned in self.patterned)
        real_fill(self, pinned, size)

    monkeypatch.setattr(copy_engine.Timer, "_fill", counted)
    assert timer.host(dict(task, dir="h2d"))["verified"] is True
    assert timer.host(dict(task, dev=1, dir="h2d"))["verified"] is True
    assert fills == [False, True]  # the second found it filled
    assert timer.host(dict(task, dir="d2h"))["verified"] is True  # and it holds the pattern again
    lib = timer.cu.lib
    assert isinstance(lib, FakeLib)
    table = FakeLib.__getattr__

    def lost_copies(self: FakeLib, name: str) -> Any:
        return (lambda *a: 0) if name == "cuMemcpyDtoHAsync_v2" else table(self, name)

    monkeypatch.setattr(FakeLib, "__getattr__", lost_copies)
    assert timer.host(dict(task, dir="d2h"))["verified"] is False  # nothing came back: zeroes, not the pattern
    assert timer.host(dict(task, dir="h2d"))["verified"] is True  # refilled after that
    assert fills[-1] is False
