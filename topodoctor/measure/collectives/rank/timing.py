"""How one row of a collectives run is timed on GPUs (imports torch: a measuring process only).

Up to ``GRAPH_MAX_BYTES`` an op takes a few microseconds, less than Python and torch take to
launch it, so a row's ``iters`` ops are captured once into a CUDA graph and replayed: one
launch for all of them, as nccl-tests times with ``-G``. The row's time is the median of
``GRAPH_REPLAYS`` replays after an untimed one: now and then a replay runs late (the first
after capture, a host hiccup), and one such replay must not make the row.

Above that size each op is launched as a training job launches it (eagerly, nccl-tests'
default), queued behind a spin kernel that holds the stream until Python has launched them
all, so launch gaps stay outside the events. The hold is checked afterwards: when the GPU ran
out of it before the last op was queued (a spin calibrated at idle clocks, a slow first call),
the row is timed again with a longer hold, on every rank.

Either way the timed ops start after a one-element all_reduce on the row's group, which every
rank leaves within microseconds of the others: a rank's events then never include waiting for
a peer that started late. (Lining ranks up with the op itself is not enough: a broadcast's
root finishes as soon as its data is out, and its timed loop then waits for the receiver.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch  # this module is a measuring process: importing torch is its job
import torch.distributed as dist

from topodoctor.core.stats import median
from topodoctor.measure.spin import hold_cycles

GRAPH_MAX_BYTES = 1 << 20
GRAPH_REPLAYS = 3
ALIGN_HOLD_MS = 0.3  # covers queueing the line-up, the events and one graph launch
HOLD_ATTEMPTS = 3  # timings of one eager row whose hold ran out before the ops were queued, at most

Call = Callable[[], None]
Wait = Callable[[torch.cuda.Event], None]


def _event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)


def _cycles(device: torch.device, ms: float) -> int:

    return hold_cycles(int(device.index or 0), ms)


class RowTimer:
    """The GPU timers of one rank on one group (the world or a subgroup)."""

    def __init__(self, device: torch.device, group: Any, wait: Wait) -> None:
        self.device, self.group, self.wait = device, group, wait
        self.one = torch.ones(1, device=device)
        self.hold_ms: dict[str, float] = {}  # per op: how long the stream is held while ops queue
        self.graphs = True

    def line_up(self) -> None:
        """A one-element all_reduce on the group, so every rank starts the timed ops together."""
        dist.all_reduce(self.one, op=dist.ReduceOp.MAX, group=self.group)

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank: a decision every rank takes together."""
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        done = _event()
        done.record()
        self.wait(done)
        return bool(t.item() > 0.0)

    def probe_graphs(self) -> None:
        """Whether this torch and NCCL capture a collective in a CUDA graph, agreed by all ranks
        (a rank that cannot must not leave the others capturing alone)."""
        ok = True
        try:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self.line_up()
            g.replay()
        except Exception:  # any failure to capture means: time eagerly, as before torch 2.8
            ok = False
        self.graphs = not self.any_rank(not ok)

    def row_us(self, op: str, size: int, calls: Sequence[Call], lag_ms: float = 0.0) -> float:
        """Time per op of ``calls`` (the row's iterations), in microseconds. ``lag_ms``: extra
        GPU time inside the timed region (the test hook for a rank that lags)."""
        if self.graphs and size <= GRAPH_MAX_BYTES:
            return self._graph_us(calls, lag_ms)
        return self._held_us(op, calls, lag_ms)

    def _graph_us(self, calls: Sequence[Call], lag_ms: float) -> float:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for call in calls:
                call()
        g.replay()  # untimed: the first replay after capture runs late
        times = []
        for _ in range(GRAPH_REPLAYS):
            start, end = _event(), _event()
            torch.cuda._sleep(_cycles(self.device, ALIGN_HOLD_MS))
            self.line_up()
            start.record()
            g.replay()
            if lag_ms:
                torch.cuda._sleep(_cycles(self.device, lag_ms))
            end.record()
            self.wait(end)
            times.append(float(start.elapsed_time(end)) * 1e3 / len(calls))
        return float(median(times))

    def _held_us(self, op: str, calls: Sequence[Call], lag_ms: float) -> float:
        start, end, held0, held1 = _event(), _event(), _event(), _event()
        for attempt in range(HOLD_ATTEMPTS):
            hold_ms = self.hold_ms.get(op, 1.0 + 0.15 * len(calls))
            cycles = _cycles(self.device, hold_ms)
            t0 = time.perf_counter()
            held0.record()
            torch.cuda._sleep(cycles)
            held1.record()
            self.line_up()
            start.record()
            for call in calls:
                call()
            if lag_ms:
                torch.cuda._sleep(_cycles(self.device, lag_ms))
            end.record()
            queued_ms = (time.perf_counter() - t0) * 1e3
            self.wait(end)
            short = float(held0.elapsed_time(held1)) < queued_ms
            self.hold_ms[op] = max(hold_ms, 1.5 * queued_ms, 2.0 * hold_ms if short else 0.0)
            if attempt + 1 == HOLD_ATTEMPTS or not self.any_rank(short):
                break
        return float(start.elapsed_time(end)) * 1e3 / len(calls)
