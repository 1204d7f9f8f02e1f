"""A rank's side of ``collectives --latency``: each path timed at each small size (imports torch:
a measuring process only). What the paths are and how a cell reads: ``model/collective_latency.py``.

Every cell is taken the same way on every rank, in two steps with an all_gather after each:
prepare (buffers, closures; for a CUDA graph the capture), agree that every rank could; then
time ``reps`` x ``iters`` operations after the ranks line up, check one operation on known data,
and gather every rank's time, #wrong and reason; rank 0 reports the cell. A path that cannot
start on some rank (no symmetric memory, no nvshmem4py) is "not available" on all of them before
any of its operations is launched, so no rank waits for a peer that will never come. An operation
that breaks once launched leaves its peers inside it: the watchdog then names the path, op and
size as the hang.

Point-to-point is a ping-pong between ranks 0 and 1 (the others idle): rank 0 sends, rank 1
answers once it has received; one way is half a round trip. all_reduce runs on every rank.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch  # this module is a measuring process: importing torch is its job
import torch.distributed as dist

from topodoctor.core.stats import median
from topodoctor.measure.collectives.rank.worker import Rank
from topodoctor.model.collective_latency import LatencyOp, LatencyPlan

Call = Callable[[], None]
Job = Callable[[], tuple[float, float]]  # times and checks a prepared cell: (us per op, #wrong)
WHY_CHARS = 300  # of a reason that goes round the ranks (one all_gather of 1 KiB each)
NO_GPU = "needs CUDA GPUs (gloo runs the ranks on the CPU)"


def first_line(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}"[:WHY_CHARS]


def said(docs: list[Any]) -> str:
    """The reason the ranks gave: as it is when every rank gave the same, else the first, named
    by its rank; '' when none gave one."""
    whys = [str(d.get("why") or "") for d in docs]
    if whys and whys[0] and all(w == whys[0] for w in whys):
        return whys[0]
    return next((f"rank {r}: {w}" for r, w in enumerate(whys) if w), "")


class Bench:
    """One rank's timers and buffers for the latency table."""

    def __init__(self, rank: Rank, plan: LatencyPlan) -> None:
        self.rank, self.plan = rank, plan
        self.cuda = rank.cuda
        self.me, self.n = rank.me, rank.n
        self.one = torch.ones(1, device=rank.device)
        self.peer = 1 - self.me if self.me < 2 else None  # p2p runs between ranks 0 and 1
        self.symm_buf: torch.Tensor | None = None
        self.symm_hdl: Any = None
        self.symm_group = ""

    # -- agreement and timing ---------------------------------------------------------------
    def agree(self, why: str) -> str:
        """Every rank's reason, the first that is not empty (named by its rank), or ''."""
        docs = self.rank.gather_json({"why": why[:WHY_CHARS]})
        return said(docs)

    def line_up(self) -> None:
        """Every rank leaves together, its GPU idle: no timing includes a late peer's start."""
        dist.all_reduce(self.one, group=self.rank.control)
        self.rank.synced()

    def eager_us(self, call: Call, per: int = 1) -> float:
        """Time per operation of ``iters`` calls launched one after the other, as a program's
        loop launches them (``per``: operations per call, 2 for a round trip)."""
        for _ in range(self.plan.warmup):
            call()
        times = []
        for _ in range(self.plan.reps):
            self.line_up()
            if not self.cuda:  # gloo: the calls return when done
                t0 = time.perf_counter()
                for _ in range(self.plan.iters):
                    call()
                times.append((time.perf_counter() - t0) * 1e6)
                continue
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(self.plan.iters):
                call()
            end.record()
            self.rank.wait(end)
            times.append(float(start.elapsed_time(end)) * 1e3)
        return float(median(times)) / (self.plan.iters * per)

    def captured(self, call: Call) -> torch.cuda.CUDAGraph:
        """``iters`` calls captured once in a CUDA graph (after eager warm-up calls, so that every
        communicator exists before the capture)."""
        for _ in range(self.plan.warmup):
            call()
        self.rank.synced()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(self.plan.iters):
                call()
        return g

    def replay_us(self, g: torch.cuda.CUDAGraph, per: int = 1) -> float:
        """Time per operation of a captured graph's calls, replayed ``reps`` times."""
        g.replay()  # untimed: the first replay after capture runs late
        self.rank.synced()
        times = []
        for _ in range(self.plan.reps):
            self.line_up()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            g.replay()
            end.record()
            self.rank.wait(end)
            times.append(float(start.elapsed_time(end)) * 1e3)
        return float(median(times)) / (self.plan.iters * per)

    def wrong(self, got: torch.Tensor, want: torch.Tensor) -> float:
        """Elements of ``got`` that differ from ``want`` (read after the GPU finished)."""
        bad = torch.count_nonzero(got != want)
        self.rank.synced()
        return float(bad.item())

    # -- NCCL -----------------------------------------------------------------------------------
    def nccl(self, op: LatencyOp, size: int, graph: bool) -> Job:
        """NCCL through torch.distributed, eager or in a CUDA graph."""
        count = max(size // 4, 1)
        r = self.rank
        if op == "all_reduce":
            buf = r.pattern(self.me, count)

            def call() -> None:
                dist.all_reduce(buf)

            g = self.captured(call) if graph else None

            def job() -> tuple[float, float]:
                us = self.replay_us(g) if g is not None else self.eager_us(call)
                if not self.plan.check:
                    return us, math.nan
                buf.copy_(r.pattern(self.me, count))
                call()
                return us, self.wrong(buf, r.sum_pattern(count))

            return job
        send, recv = r.pattern(self.me, count), torch.empty(count, device=r.device)
        pong = self.ping_pong(send, recv)
        gp = self.captured(pong) if graph else None

        def job_p2p() -> tuple[float, float]:
            us = self.replay_us(gp, 2) if gp is not None else self.eager_us(pong, 2)
            return us, self.pong_wrong(pong, recv, count)

        return job_p2p

    def ping_pong(self, send: torch.Tensor, recv: torch.Tensor) -> Call:
        """One round trip of NCCL send / recv between ranks 0 and 1."""
        if self.me == 0:

            def first() -> None:
                dist.send(send, 1)
                dist.recv(recv, 1)

            return first
        if self.me == 1:

            def second() -> None:
                dist.recv(recv, 0)
                dist.send(send, 0)

            return second
        return lambda: None

    def pong_wrong(self, pong: Call, recv: torch.Tensor, count: int) -> float:
        """One checked round trip: what each of ranks 0 and 1 received against its peer's data."""
        if not self.plan.check or self.peer is None:
            return math.nan
        recv.fill_(-1.0)
        self.line_up()  # both filled before either writes into the other (a put lands any time)
        pong()
        return self.wrong(recv, self.rank.pattern(self.peer, count))

    # -- PyTorch symmetric memory ---------------------------------------------------------------
    def symm_open(self) -> str:
        """Symmetric memory for the largest size it serves, rendezvoused on the world; '' or why not."""
        if self.symm_hdl is not None:
            return ""
        if not self.cuda:
            return NO_GPU
        try:
            import torch.distributed._symmetric_memory as symm_mem  # only this path needs it

            name = dist.group.WORLD.group_name
            enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
            if enable is not None:  # needed before torch 2.8, a deprecated no-op since
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    enable(name)
            top = max([*self.plan.p2p_sizes, *self.plan.all_reduce_sizes]) // 4
            self.symm_buf = symm_mem.empty(top, dtype=torch.float32, device=self.rank.device)
            self.symm_hdl = symm_mem.rendezvous(self.symm_buf, name)
            self.symm_group = name
        except Exception as exc:  # any failure to set up means the path is not available here
            return first_line(exc)
        return ""

    def symm(self, path: str, size: int) -> Job:
        """A symmetric-memory path at one size."""
        count = max(size // 4, 1)
        assert self.symm_buf is not None
        r, buf, group = self.rank, self.symm_buf[:count], self.symm_group
        if path == "symm_put":
            return self.symm_put(count)
        one_shot = path == "symm_one_shot"

        def call() -> None:
            if one_shot:
                torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group)
            else:
                torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group)

        def job() -> tuple[float, float]:
            buf.copy_(r.pattern(self.me, count))
            us = self.eager_us(call)
            if not self.plan.check:
                return us, math.nan
            buf.copy_(r.pattern(self.me, count))
            self.line_up()  # every rank's input in place before any rank reads it
            got = buf
            if one_shot:
                got = torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group)
            else:
                torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group)
            return us, self.wrong(got, r.sum_pattern(count))

        return job

    def symm_put(self, count: int) -> Job:
        """Ping-pong: a copy into the peer's symmetric buffer, then ``put_signal``; the peer
        ``wait_signal``s, then answers the same way."""
        r, hdl, peer, mine = self.rank, self.symm_hdl, self.peer, self.symm_buf
        assert mine is not None
        send = r.pattern(self.me, count)
        pong: Call = lambda: None  # noqa: E731 - ranks past 1 idle
        if peer is not None:
            theirs = hdl.get_buffer(peer, (count,), torch.float32)

            def put() -> None:
                theirs.copy_(send)
                hdl.put_signal(peer)

            def pong() -> None:
                if self.me == 0:
                    put()
                    hdl.wait_signal(peer)
                else:
                    hdl.wait_signal(peer)
                    put()

        def job() -> tuple[float, float]:
            return self.eager_us(pong, 2), self.pong_wrong(pong, mine[:count], count)

        return job
