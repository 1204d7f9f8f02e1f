"""The compute stress: a sustained bf16 GEMM on every visible GPU at once, in one child process
(``python -m topodoctor.measure.fitness.worker_gemm``), the only torch import of fitness.

The task comes as one JSON line on stdin: ``{"seconds": S, "n": N, "batch": B}``. Every GPU
gets its own stream and operands; batches of B multiplications are queued on all GPUs in turn
and bracketed by CUDA events, so each GPU's rate is timed on the GPU and the GPUs load the
node's power and cooling together, as a job does. Answers, one JSON line each:
``{"started": t}`` when the warm-up is done (CLOCK_MONOTONIC, which the parent shares: its NVML
sampler keeps the samples of the loaded window), then ``{"gpus": [...], "window": [t0, t1]}``.
A C of the product is checked against a float32 product of a slice, so a GPU computing
garbage fast is not fit.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def _answer(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


def _die_with_parent() -> None:
    """SIGKILL when the parent dies (Linux): a check killed at its deadline, or run without a
    budget child and killed, leaves no GEMM loading a GPU."""
    import contextlib
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):  # not Linux: the budget's process group still holds it
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def main() -> None:
    """The child's entry point: run the GEMM stress task read from stdin on every GPU and answer in JSON."""
    _die_with_parent()
    task = json.loads(sys.stdin.readline() or "{}")
    try:
        import torch
    except ImportError:
        _answer({"error": "torch is not installed: pip install 'topodoctor[bandwidth]'"})
        return
    if not torch.cuda.is_available():
        _answer({"error": f"torch {torch.__version__} sees no CUDA GPU"})
        return
    seconds, n, batch = float(task.get("seconds", 10.0)), int(task.get("n", 8192)), int(task.get("batch", 8))
    count = torch.cuda.device_count()
    work = []
    for d in range(count):
        with torch.cuda.device(d):
            gen = torch.Generator(device=f"cuda:{d}").manual_seed(d)
            a = torch.randn(n, n, device=f"cuda:{d}", dtype=torch.bfloat16, generator=gen)
            b = torch.randn(n, n, device=f"cuda:{d}", dtype=torch.bfloat16, generator=gen)
            c = torch.empty(n, n, device=f"cuda:{d}", dtype=torch.bfloat16)
            work.append((d, torch.cuda.Stream(d), a, b, c))
    for d, s, a, b, c in work:  # warm-up: cuBLAS picks its kernel, clocks rise
        with torch.cuda.device(d), torch.cuda.stream(s):
            torch.matmul(a, b, out=c)
    for d, *_ in work:
        torch.cuda.synchronize(d)
    start = time.monotonic()
    _answer({"started": start, "devices": [torch.cuda.get_device_properties(d).name for d in range(count)]})
    elapsed = [0.0] * count
    done = [0] * count
    rates: list[list[float]] = [[] for _ in range(count)]
    while time.monotonic() - start < seconds:
        marks = []
        for d, s, a, b, c in work:
            with torch.cuda.device(d), torch.cuda.stream(s):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(s)
                for _ in range(batch):
                    torch.matmul(a, b, out=c)
                e1.record(s)
                marks.append((d, e0, e1))
        for d, e0, e1 in marks:
            e1.synchronize()
            dt = e0.elapsed_time(e1) / 1e3
            elapsed[d] += dt
            done[d] += batch
            rates[d].append(2.0 * n * n * n * batch / dt / 1e12)
    end = time.monotonic()
    gpus = []
    for d, _, a, b, c in work:
        with torch.cuda.device(d):
            ref = a[:64].float() @ b.float()
            got = c[:64].float()
            err = float(((got - ref).abs().max() / ref.abs().max().clamp(min=1e-6)).item())
        flops = 2.0 * n * n * n * done[d]
        gpus.append(
            {
                "ordinal": d,
                "gemms": done[d],
                "gpu_s": round(elapsed[d], 6),
                "tflops": flops / elapsed[d] / 1e12 if elapsed[d] else 0.0,
                "samples": rates[d],
                "verified": err < 0.02,
                "rel_error": err,
            }
        )
    _answer({"gpus": gpus, "window": [start, end], "n": n, "torch": torch.__version__})


if __name__ == "__main__":
    if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        _answer({"error": "the GEMM worker must run with CUDA_DEVICE_ORDER=PCI_BUS_ID"})
    else:
        main()
