"""Whether NVML readings slow CUDA's start on this host: ``cuInit``, a context on every GPU and peer
access between them, timed in a fresh process alone and while a ``topodoctor scan`` (its probe: a
few hundred NVML calls) or a ``topodoctor check`` runs beside it, alternating, ROUNDS rounds each.

    python3 tests/gpu/cuinit_contention.py [ROUNDS]

The copy timer of ``bandwidth`` starts CUDA while the command's probe reads NVML; if the driver
serialises the two, the probe belongs after the timer's contexts."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

CHILD = r"""
import ctypes, threading, time
t0 = time.monotonic()
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
t1 = time.monotonic()
n = ctypes.c_int(); cu.cuDeviceGetCount(ctypes.byref(n))
ctx = [ctypes.c_void_p() for _ in range(n.value)]
def open_(i):
    cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx[i]), i)
threads = [threading.Thread(target=open_, args=(i,)) for i in range(n.value)]
[t.start() for t in threads]; [t.join() for t in threads]
def peers(i):
    cu.cuCtxSetCurrent(ctx[i])
    for j in range(n.value):
        if j != i:
            cu.cuCtxEnablePeerAccess(ctx[j], 0)
threads = [threading.Thread(target=peers, args=(i,)) for i in range(n.value)]
[t.start() for t in threads]; [t.join() for t in threads]
t2 = time.monotonic()
print(f"{t1 - t0:.4f} {t2 - t1:.4f}")
"""


def once(beside: list[str] | None) -> tuple[float, float]:
    other = subprocess.Popen([sys.executable, "-m", "topodoctor", *beside], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) if beside else None  # fmt: skip
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60).stdout.split()
    if other is not None:
        other.wait(60)
    time.sleep(0.2)
    return float(out[0]), float(out[1])


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    got: dict[str, list[tuple[float, float]]] = {"alone": [], "beside scan": [], "beside check": []}
    for _ in range(rounds):
        got["alone"].append(once(None))
        got["beside scan"].append(once(["scan"]))
        got["beside check"].append(once(["check", "-f", "line"]))
    for name, rows in got.items():
        init = statistics.median(r[0] for r in rows)
        ctx = statistics.median(r[1] for r in rows)
        print(f"{name}: cuInit {init * 1e3:.0f} ms, contexts and peer access {ctx * 1e3:.0f} ms (median of {rounds})")


if __name__ == "__main__":
    main()
