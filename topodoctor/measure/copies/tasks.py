"""What to measure: the settings of a pass and its list of tasks for the copy timer (plain
data; imported before the probe, so it stays light)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topodoctor.measure.copies.worker import START_TIMEOUT_S
from topodoctor.model.copies import Mode

MiB = 1 << 20


@dataclass(frozen=True)
class CopySettings:
    """What a copy run measures and how: modes, buffer sizes, iterations, samples, timeouts, devices."""

    modes: tuple[Mode, ...] = ("oneway", "bidir", "latency", "h2d", "d2h")
    size_bytes: int = 256 * MiB
    iters: int = 4
    samples: int = 5
    latency_bytes: int = 4
    latency_iters: int = 100  # the CUDA samples' count; more would crowd the stream's queue
    # PCIe reaches its full rate well below this size, and pinning host memory takes time in
    # proportion to its size, so host copies use smaller buffers than peer copies.
    host_size_bytes: int = 64 * MiB
    pair_timeout_s: float = 20.0
    start_timeout_s: float = START_TIMEOUT_S
    devices: tuple[int, ...] | None = None  # NVML indices; None = the scope's GPUs
    # SM latency: reads per sample, spread over every SM one walk at a time as nvbandwidth does
    # (it reads 1 000 000 in one sample: 0.8 s a pair over NVLink); 100 000 keep the launches
    # under 0.4 % of a sample, and the median of three leaves out the first walk's slower clocks
    latency_accesses: int = 100_000
    latency_samples: int = 3
    sm_kernel: str | None = None  # the SM copies' kernel (copy_kernels names); None = copy_kernels.PEER

    def ahead(self) -> dict[str, Any]:
        """What the timer makes before the tasks (its ``prepare``): the buffers of these modes and sizes."""
        return {"modes": list(self.modes), "size": self.size_bytes, "host_size": self.host_size_bytes}

    @staticmethod
    def quick(devices: tuple[int, ...] | None = None) -> CopySettings:
        """Sized for a prolog: one-way pairs and host links, small buffers, three samples."""
        return CopySettings(
            modes=("oneway", "h2d", "d2h"),
            size_bytes=64 * MiB,
            iters=4,
            samples=3,
            host_size_bytes=32 * MiB,
            devices=devices,
        )


@dataclass(frozen=True)
class Task:
    """One task for the timer: a mode, a source and its destinations, and what the timer is sent."""

    mode: Mode
    src: int  # NVML index, -1 = host
    dsts: tuple[int, ...]  # several for a latency batch (one hold per source GPU)
    payload: dict[str, Any]


def plan_tasks(settings: CopySettings, ordinal: dict[int, int]) -> list[Task]:
    """Every ordered pair for one-way and latency (latency batched per source GPU), every
    unordered pair for both-ways, each GPU's host link both ways; the SM modes likewise, a task
    per pair (one kernel's pointer chase at a time)."""
    idx = sorted(ordinal)
    s = settings
    tasks: list[Task] = []
    base = {"op": "p2p", "size": s.size_bytes, "iters": s.iters, "samples": s.samples}
    sm = {"op": "sm_copy", "initiator": "pull", "size": s.size_bytes, "iters": s.iters, "samples": s.samples}
    pairs = [(a, b) for a in idx for b in idx if a != b]
    for mode in s.modes:
        if mode in ("sm_oneway", "sm_bidir"):
            both = mode == "sm_bidir"
            tasks += [
                Task(mode, a, (b,), dict(sm, src=ordinal[a], dst=ordinal[b], bidir=both))
                for a, b in pairs
                if not both or a < b
            ]
        elif mode == "sm_latency":
            chase = {"op": "chase", "accesses": s.latency_accesses, "samples": s.latency_samples, "size": 0}
            tasks += [Task(mode, a, (b,), dict(chase, dev=ordinal[a], target=ordinal[b])) for a, b in pairs]
        elif mode == "oneway":
            tasks += [
                Task(mode, a, (b,), dict(base, src=ordinal[a], dst=ordinal[b], mode=mode))
                for a in idx
                for b in idx
                if a != b
            ]
        elif mode == "latency":
            for a in idx:
                others = tuple(b for b in idx if b != a)
                if others:
                    payload = {
                        "op": "latency",
                        "src": ordinal[a],
                        "dsts": [ordinal[b] for b in others],
                        "size": s.latency_bytes,
                        "iters": s.latency_iters,
                        "samples": s.samples,
                    }
                    tasks.append(Task(mode, a, others, payload))
        elif mode == "bidir":
            for i, a in enumerate(idx):
                for b in idx[i + 1 :]:
                    tasks.append(Task(mode, a, (b,), dict(base, src=ordinal[a], dst=ordinal[b], mode="bidir")))
        else:
            for a in idx:
                payload = {
                    "op": "host",
                    "dev": ordinal[a],
                    "dir": mode,
                    "size": s.host_size_bytes,
                    "iters": s.iters,
                    "samples": s.samples,
                }
                tasks.append(Task(mode, -1 if mode == "h2d" else a, (a if mode == "h2d" else -1,), payload))
    return tasks
