"""The copy timer: the only module that imports torch. It runs as a child process
(``python -m topodoctor.bandwidth.runner``) that reads one JSON task per line on stdin and
answers one JSON line on stdout, so the parent can kill it when a copy hangs.

How a sample is timed: a spin kernel (``torch.cuda._sleep``) holds the stream while every
timed copy is queued behind it; CUDA events bracket the copies. Launch cost and host
synchronisation stay outside the timed region, so the number is the link's, not Python's.
Peer copies go through cudaMemcpyPeerAsync (copy engines), the call nvbandwidth and the CUDA
samples time; torch's own cross-device copy adds two event waits per copy.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

import torch  # this module is the child process: importing torch is its job

MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: direction inferred through unified addressing


class Cudart:
    """cudaMemcpyPeerAsync / cudaMemcpyAsync from the libcudart torch itself loaded."""

    def __init__(self) -> None:
        self.lib: Any = None
        path = None
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                if "libcudart.so" in line:
                    path = line.split()[-1]
                    break
        if path:
            lib = ctypes.CDLL(path)
            lib.cudaMemcpyPeerAsync.argtypes = [
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.c_size_t,
                ctypes.c_void_p,
            ]
            lib.cudaMemcpyPeerAsync.restype = ctypes.c_int
            self.lib = lib

    @property
    def method(self) -> str:
        return "cudaMemcpyPeerAsync (copy engine)" if self.lib else "torch copy_ (copy engine)"

    def peer_copy(self, dst: torch.Tensor, src: torch.Tensor, stream: torch.cuda.Stream) -> None:
        if self.lib is None:
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)
            return
        err = self.lib.cudaMemcpyPeerAsync(
            dst.data_ptr(),
            dst.device.index,
            src.data_ptr(),
            src.device.index,
            src.numel() * src.element_size(),
            stream.cuda_stream,
        )
        if err != 0:
            raise RuntimeError(f"cudaMemcpyPeerAsync returned CUDA error {err}")


_cycles_per_ms: dict[int, float] = {}


def hold_cycles(device: int, ms: float) -> int:
    """Spin-kernel cycles that last about ``ms`` on this GPU (calibrated once)."""
    if device not in _cycles_per_ms:
        s = torch.cuda.Stream(device=device)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(device), torch.cuda.stream(s):
            torch.cuda._sleep(1000)
            a.record(s)
            torch.cuda._sleep(10_000_000)
            b.record(s)
        b.synchronize()
        _cycles_per_ms[device] = 10_000_000 / max(a.elapsed_time(b), 1e-3)
    return int(_cycles_per_ms[device] * ms)


_pool: dict[tuple[int, int, str], torch.Tensor] = {}


def _buffer(device: int, size: int, role: str) -> torch.Tensor:
    """Device buffers kept across tasks: a matrix reuses the same few, so each task pays no
    cudaMalloc. Sources hold random bytes; destinations are zeroed before every use."""
    key = (device, size, role)
    buf = _pool.get(key)
    if buf is None:
        if role.startswith("src"):
            buf = torch.randint(0, 256, (size,), dtype=torch.uint8, device=device)
        else:
            buf = torch.empty(size, dtype=torch.uint8, device=device)
        _pool[key] = buf
    if not role.startswith("src"):
        buf.zero_()
    return buf


def _release() -> None:
    _pool.clear()
    torch.cuda.empty_cache()


def _timed(
    cudart: Cudart, jobs: list[tuple[torch.Tensor, torch.Tensor, torch.cuda.Stream]], iters: int, hold_ms: float
) -> list[float]:
    """Queue ``iters`` copies per job behind a spin kernel on each job's stream; ms per job."""
    events = []
    for _, _, stream in jobs:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(stream.device), torch.cuda.stream(stream):
            torch.cuda._sleep(hold_cycles(stream.device.index, hold_ms))
            start.record(stream)
        events.append((start, end))
    for _ in range(iters):
        for dst, src, stream in jobs:
            cudart.peer_copy(dst, src, stream)
    for (_, _, stream), (_, end) in zip(jobs, events):
        end.record(stream)
    out = []
    for start, end in events:
        end.synchronize()
        out.append(start.elapsed_time(end))
    return out


def _peer(src: int, dst: int) -> str:
    return "p2p" if torch.cuda.can_device_access_peer(src, dst) else "staged"


def _enable_peer(src: int, dst: int) -> None:
    """torch enables peer access on its first copy between two devices; do one."""
    torch.empty(1, device=dst).copy_(torch.empty(1, device=src))


def p2p(cudart: Cudart, task: dict[str, Any]) -> dict[str, Any]:
    src, dst, size, iters, samples = task["src"], task["dst"], task["size"], task["iters"], task["samples"]
    mode = task["mode"]
    _enable_peer(src, dst)
    _enable_peer(dst, src)
    a_src, b_dst = _buffer(src, size, "src"), _buffer(dst, size, "dst")
    s_a = torch.cuda.Stream(device=src)
    jobs = [(b_dst, a_src, s_a)]
    if mode == "bidir":
        b_src, a_dst = _buffer(dst, size, "src"), _buffer(src, size, "dst")
        jobs.append((a_dst, b_src, torch.cuda.Stream(device=dst)))
    hold = task.get("hold_ms", 5.0)
    _timed(cudart, jobs, 1, hold)  # warm-up: first-touch, peer mappings, clocks
    fwd, rev = [], []
    for _ in range(samples):
        ms = _timed(cudart, jobs, iters, hold)
        if mode == "latency":
            fwd.append(ms[0] * 1000.0 / iters)  # microseconds per copy
        else:
            fwd.append(size * iters / (ms[0] / 1e3) / 1e9)
            if mode == "bidir":
                rev.append(size * iters / (ms[1] / 1e3) / 1e9)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    ok = all(bool(torch.equal(d, s.to(d.device))) for d, s, _ in jobs)  # compared on the GPU
    return {"samples": fwd, "reverse": rev or None, "path": _peer(src, dst), "verified": ok}


_pinned: dict[int, torch.Tensor] = {}


def host(task: dict[str, Any]) -> dict[str, Any]:
    """Pinned host memory to and from one GPU (cudaMemcpyAsync through torch)."""
    dev, size, iters, samples, direction = task["dev"], task["size"], task["iters"], task["samples"], task["dir"]
    pinned = _pinned.get(size)
    if pinned is None:
        pinned = _pinned[size] = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    pattern = _buffer(dev, size, "src")
    if direction == "h2d":
        pinned.copy_(pattern)  # the host side holds the pattern; the GPU side is zeroed
        gpu = _buffer(dev, size, "dst")
    else:
        pinned.zero_()
        gpu = pattern
    s = torch.cuda.Stream(device=dev)
    hold = task.get("hold_ms", 5.0)
    vals = []
    for i in range(samples + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(dev), torch.cuda.stream(s):
            torch.cuda._sleep(hold_cycles(dev, hold))
            start.record(s)
            for _ in range(iters):
                if direction == "h2d":
                    gpu.copy_(pinned, non_blocking=True)
                else:
                    pinned.copy_(gpu, non_blocking=True)
            end.record(s)
        end.synchronize()
        if i:  # the first round is the warm-up
            vals.append(size * iters / (start.elapsed_time(end) / 1e3) / 1e9)
    check = _buffer(dev, size, "check")
    check.copy_(pinned)
    ok = bool(torch.equal(check, pattern if direction == "d2h" else gpu)) and bool(torch.equal(gpu, pattern))
    return {"samples": vals, "reverse": None, "path": "host", "verified": ok}


def hello(cudart: Cudart) -> dict[str, Any]:
    devices = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        bus = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
        devices.append({"ordinal": i, "bus_id": bus, "name": p.name})
    return {"torch": torch.__version__, "cuda": str(torch.version.cuda), "method": cudart.method, "devices": devices}


def serve() -> None:
    if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        print(json.dumps({"error": "worker must run with CUDA_DEVICE_ORDER=PCI_BUS_ID"}), flush=True)
        return
    try:
        torch.cuda.init()
        cudart = Cudart()
    except Exception as exc:  # no CUDA, no driver: one answer, then stop
        print(json.dumps({"error": f"CUDA unavailable: {type(exc).__name__}: {exc}"}), flush=True)
        return
    for line in sys.stdin:
        task = json.loads(line)
        try:
            if task["op"] == "hello":
                answer = hello(cudart)
            elif task["op"] == "p2p":
                answer = p2p(cudart, task)
            elif task["op"] == "host":
                answer = host(task)
            else:
                answer = {"error": f"unknown op {task['op']!r}"}
        except torch.cuda.OutOfMemoryError:
            _release()
            answer = {"error": "CUDA out of memory"}
        except Exception as exc:
            _release()
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    serve()
