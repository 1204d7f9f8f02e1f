"""The copy timer: the only module that imports torch. It runs as a child process
(``python -m topodoctor.measure.copies.runner``) that reads one JSON task per line on stdin and
answers one JSON line on stdout, so the parent can kill it when a copy hangs.

Start-up is split so the parent can overlap it with the probe: the child imports torch as
soon as it starts, and touches CUDA only when the first task ("hello") names the GPUs it may
see. It then sets CUDA_VISIBLE_DEVICES for itself (CUDA reads it at initialisation, which
``import torch`` does not do), so a job-scoped run never opens a context on another job's
GPU. Contexts and peer access are made on one thread per GPU: the driver does most of that
work outside the GIL, and ctypes calls release it.

How a sample is timed: a spin kernel (``torch.cuda._sleep``) holds the stream while every
timed copy is queued behind it; CUDA events bracket the copies, so launch cost and host
synchronisation stay outside the timed region. A sample whose spin ended before the last copy
was queued is taken again with a longer hold: holds stay short and no launch gap is timed.
Peer copies go through cudaMemcpyPeerAsync (copy engines), the call nvbandwidth and the CUDA
samples time; torch's own cross-device copy adds two event waits per copy.
"""

from __future__ import annotations

import time

T_MODULE = time.monotonic()  # CLOCK_MONOTONIC: comparable with the parent's clock

import ctypes  # noqa: E402
import itertools  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402  (this module is the child process: importing torch is its job)

from topodoctor.measure.spin import hold_cycles  # noqa: E402
from topodoctor.measure.timer.protocol import Answer, Clock, Op, see_only, serve  # noqa: E402

T_TORCH = time.monotonic()

# torch leaves these unannotated; the signatures below are the ones this module relies on.
_new_stream: Callable[..., torch.cuda.Stream] = torch.cuda.Stream
_new_event: Callable[..., torch.cuda.Event] = torch.cuda.Event
_spin: Callable[[int], None] = torch.cuda._sleep
_cuda_init: Callable[[], None] = torch.cuda.init
_event_done: Callable[[torch.cuda.Event], bool] = torch.cuda.Event.query

PEER_ALREADY_ENABLED = 704  # cudaErrorPeerAccessAlreadyEnabled
MAX_HOLD_MS = 2000.0


def _timer() -> torch.cuda.Event:
    return _new_event(enable_timing=True)


class Cudart:
    """The runtime calls torch does not expose, from the libcudart torch itself loaded."""

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
            i, p, sz = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
            signatures: dict[str, list[Any]] = {
                "cudaMemcpyPeerAsync": [p, i, p, i, sz, p],
                "cudaSetDevice": [i],
                "cudaFree": [p],
                "cudaDeviceCanAccessPeer": [ctypes.POINTER(i), i, i],
                "cudaDeviceEnablePeerAccess": [i, ctypes.c_uint],
            }
            for name, args in signatures.items():
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = args, ctypes.c_int
            self.lib = lib

    @property
    def method(self) -> str:
        """The copy mechanism this timer uses, as results name it."""
        return "cudaMemcpyPeerAsync (copy engine)" if self.lib else "torch copy_ (copy engine)"

    def peer_copy(self, dst: torch.Tensor, src: torch.Tensor, stream: torch.cuda.Stream) -> None:
        """Queue one copy of ``src`` into ``dst`` on ``stream`` (``cudaMemcpyPeerAsync``, else torch's copy_)."""
        if self.lib is None:
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)
            return
        args = (dst.data_ptr(), dst.device.index, src.data_ptr(), src.device.index, src.nbytes, stream.cuda_stream)
        self._check(self.lib.cudaMemcpyPeerAsync(*args), "cudaMemcpyPeerAsync")

    def open_device(self, device: int, peers: list[int]) -> dict[int, bool]:
        """Create the device's primary context and enable peer access to ``peers``; which
        peers it can reach directly. Runs on its own thread (the runtime's current device
        is per thread)."""
        if self.lib is None:
            torch.empty(1, device=device)
            return {q: torch.cuda.can_device_access_peer(device, q) for q in peers}
        self._check(self.lib.cudaSetDevice(device), "cudaSetDevice")
        self._check(self.lib.cudaFree(None), "cudaFree")  # the idiom that creates the context
        reach: dict[int, bool] = {}
        for q in peers:
            flag = ctypes.c_int(0)
            self._check(self.lib.cudaDeviceCanAccessPeer(ctypes.byref(flag), device, q), "cudaDeviceCanAccessPeer")
            reach[q] = bool(flag.value)
            if reach[q]:
                err = self.lib.cudaDeviceEnablePeerAccess(q, 0)
                if err not in (0, PEER_ALREADY_ENABLED):
                    self._check(err, "cudaDeviceEnablePeerAccess")
        return reach

    @staticmethod
    def _check(err: int, call: str) -> None:
        if err != 0:
            raise RuntimeError(f"{call} returned CUDA error {err}")


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


Copy = Callable[[], None]


def _sample(jobs: list[tuple[torch.cuda.Stream, list[list[Copy]]]], hold_ms: float) -> tuple[list[list[float]], float]:
    """One sample on every stream at once (both directions of a pair run together): a spin
    kernel on each stream, then each stream's batches of copies with an event after each
    batch; ms per batch per stream. Taken again with a doubled hold until every spin
    outlasted the queueing of all copies, so no launch gap is ever timed."""
    while True:
        marks = [[_timer() for _ in range(len(batches) + 1)] for _, batches in jobs]
        for (stream, _), m in zip(jobs, marks):
            with torch.cuda.device(stream.device), torch.cuda.stream(stream):
                _spin(hold_cycles(stream.device.index, hold_ms))
                m[0].record(stream)
        for (stream, batches), m in zip(jobs, marks):
            for batch, mark in zip(batches, m[1:]):
                for copy in batch:
                    copy()
                mark.record(stream)
        held = not any(_event_done(m[0]) for m in marks)
        for m in marks:
            m[-1].synchronize()
        if held or hold_ms >= MAX_HOLD_MS:
            return [[a.elapsed_time(b) for a, b in itertools.pairwise(m)] for m in marks], hold_ms
        hold_ms *= 2


def p2p(cudart: Cudart, reach: dict[tuple[int, int], bool], task: dict[str, Any]) -> dict[str, Any]:
    """One-way or both-ways bandwidth between two GPUs."""
    clock = Clock()
    src, dst, size, iters, samples = task["src"], task["dst"], task["size"], task["iters"], task["samples"]
    bidir = task["mode"] == "bidir"
    a_src, b_dst = _buffer(src, size, "src"), _buffer(dst, size, "dst")
    pairs = [(b_dst, a_src, _new_stream(device=src))]
    if bidir:
        b_src, a_dst = _buffer(dst, size, "src"), _buffer(src, size, "dst")
        pairs.append((a_dst, b_src, _new_stream(device=dst)))
    for device in (src, dst):  # zeroing runs on each device's own stream: finish it first
        torch.cuda.synchronize(device)
    clock.lap("allocation")

    def jobs(n: int) -> list[tuple[torch.cuda.Stream, list[list[Copy]]]]:
        return [(s, [[partial(cudart.peer_copy, d, x, s)] * n]) for d, x, s in pairs]

    hold = float(task.get("hold_ms", 1.0))
    _, hold = _sample(jobs(1), hold)  # warm-up: first touch, peer mappings, clocks
    fwd, rev = [], []
    for _ in range(samples):
        ms, hold = _sample(jobs(iters), hold)
        fwd.append(size * iters / (ms[0][0] / 1e3) / 1e9)
        if bidir:
            rev.append(size * iters / (ms[1][0] / 1e3) / 1e9)
    clock.lap("measurement")
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    ok = all(bool(torch.equal(d, x.to(d.device))) for d, x, _ in pairs)  # compared on the GPU
    clock.lap("verification")
    path = "p2p" if reach.get((src, dst), False) else "staged"
    return {
        "samples": fwd,
        "reverse": rev or None,
        "path": path,
        "verified": ok,
        "hold_ms": hold,
        "timings": clock.spent,
    }


def latency(cudart: Cudart, reach: dict[tuple[int, int], bool], task: dict[str, Any]) -> dict[str, Any]:
    """Latency from one GPU to each of ``dsts``: every sample queues all destinations'
    copies behind one hold, an event between destinations, so one hold serves them all."""
    clock = Clock()
    src, dsts, size, iters, samples = task["src"], task["dsts"], task["size"], task["iters"], task["samples"]
    stream = _new_stream(device=src)
    a_src = _buffer(src, size, "src")
    targets = [_buffer(d, size, "dst") for d in dsts]
    for device in (src, *dsts):
        torch.cuda.synchronize(device)
    clock.lap("allocation")

    def jobs(n: int) -> list[tuple[torch.cuda.Stream, list[list[Copy]]]]:
        return [(stream, [[partial(cudart.peer_copy, t, a_src, stream)] * n for t in targets])]

    # A first guess at how long queueing takes (a few us per copy from Python); _sample
    # doubles it if the spin ran out first.
    hold = float(task.get("hold_ms", 1.0 + 0.005 * iters * len(dsts)))
    _, hold = _sample(jobs(1), hold)
    per_dst: list[list[float]] = [[] for _ in dsts]
    for _ in range(samples):
        ms, hold = _sample(jobs(iters), hold)
        for k, v in enumerate(ms[0]):
            per_dst[k].append(v * 1000.0 / iters)  # microseconds per copy
    clock.lap("measurement")
    torch.cuda.synchronize(src)
    results = [
        {
            "dst": d,
            "samples": per_dst[k],
            "reverse": None,
            "path": "p2p" if reach.get((src, d), False) else "staged",
            "verified": None,
        }
        for k, d in enumerate(dsts)
    ]
    return {"results": results, "hold_ms": hold, "timings": clock.spent}


_pinned: dict[int, torch.Tensor] = {}


def host(cudart: Cudart, reach: dict[tuple[int, int], bool], task: dict[str, Any]) -> dict[str, Any]:
    """Pinned host memory to and from one GPU (cudaMemcpyAsync through torch)."""
    clock = Clock()
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
    s = _new_stream(device=dev)
    clock.lap("allocation")

    dst, src = (gpu, pinned) if direction == "h2d" else (pinned, gpu)

    def queued() -> None:
        with torch.cuda.device(dev), torch.cuda.stream(s):
            dst.copy_(src, non_blocking=True)

    def jobs(n: int) -> list[tuple[torch.cuda.Stream, list[list[Copy]]]]:
        return [(s, [[queued] * n])]

    hold = float(task.get("hold_ms", 1.0))
    _, hold = _sample(jobs(1), hold)
    vals = []
    for _ in range(samples):
        ms, hold = _sample(jobs(iters), hold)
        vals.append(size * iters / (ms[0][0] / 1e3) / 1e9)
    clock.lap("measurement")
    check = _buffer(dev, size, "check")
    check.copy_(pinned)
    ok = bool(torch.equal(check, pattern if direction == "d2h" else gpu)) and bool(torch.equal(gpu, pattern))
    clock.lap("verification")
    return {"samples": vals, "reverse": None, "path": "host", "verified": ok, "hold_ms": hold, "timings": clock.spent}


def hello(cudart_box: list[Cudart], reach: dict[tuple[int, int], bool], task: dict[str, Any]) -> dict[str, Any]:
    """Start CUDA on the GPUs the parent names (a CUDA_VISIBLE_DEVICES value, or null for
    all), open every context and, when asked, every peer mapping, one thread per GPU."""
    see_only(task)
    t0 = time.monotonic()
    _cuda_init()
    cudart = Cudart()
    cudart_box.append(cudart)
    n = torch.cuda.device_count()
    t1 = time.monotonic()
    errors: list[str] = []

    def open_one(d: int) -> None:
        try:
            peers = [q for q in range(n) if q != d] if task.get("peers", True) else []
            for q, ok in cudart.open_device(d, peers).items():
                reach[(d, q)] = ok
        except Exception as exc:  # reported in the answer; the parent turns it into one line
            errors.append(f"GPU ordinal {d}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=open_one, args=(d,)) for d in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t2 = time.monotonic()
    if errors:
        return {"error": "; ".join(errors)}
    devices = []
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        # pci_* are present at run time but missing from torch's type stubs
        dom, bus, dev = (int(getattr(p, f"pci_{k}_id")) for k in ("domain", "bus", "device"))
        devices.append({"ordinal": i, "bus_id": f"{dom:04x}:{bus:02x}:{dev:02x}.0", "name": p.name})
    return {
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "method": cudart.method,
        "devices": devices,
        "clock": {"module": T_MODULE, "imports": T_TORCH},
        "timings": {"cuda_init": round(t1 - t0, 6), "contexts_and_peers": round(t2 - t1, 6)},
    }


def main() -> None:
    """The child's entry point: serve the copy tasks on stdin with torch."""
    box: list[Cudart] = []
    reach: dict[tuple[int, int], bool] = {}

    def run(op: Callable[[Cudart, dict[tuple[int, int], bool], Answer], Answer]) -> Op:
        return lambda task: op(box[0], reach, task)

    def failed(exc: BaseException) -> str:
        _pool.clear()  # a later task starts from fresh buffers
        torch.cuda.empty_cache()
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return "CUDA out of memory"
        return f"{type(exc).__name__}: {exc}"

    serve(lambda task: hello(box, reach, task), {"p2p": run(p2p), "latency": run(latency), "host": run(host)}, failed)


if __name__ == "__main__":
    main()
