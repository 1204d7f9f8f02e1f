"""One rank of a collectives run: with worker_timing.py, the only modules here that import torch.

A rank joins whatever world it is given (``World``: spawned by ``launch.py``, or made by
torchrun / srun), runs the plan, and rank 0 gathers every rank's times. Spawned ranks also
print one JSON event per line on stdout (begin / end of each op, failures) so the parent can
cut a hang. The rank's process runs this in a thread of its own and watches it (timeouts,
the world's alarm: see rank_main.py and guard.run_watched).

How a row is timed on GPUs is worker_timing.py's: CUDA graphs for small sizes (as nccl-tests ``-G``),
eager launches held behind a spin kernel above; on gloo (CPU) a host timer.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from functools import partial
from typing import Any

import torch  # this module is a measuring process: importing torch is its job
import torch.distributed as dist

from topodoctor.measure.collectives.guard import FAULT_ENV, Emit, Watchdog, fault_arg
from topodoctor.measure.collectives.nodes import node_name, node_rank
from topodoctor.measure.collectives.rank.timing import RowTimer
from topodoctor.measure.collectives.world import World
from topodoctor.measure.spin import hold_cycles
from topodoctor.model.collective_ops import SPECS, Op, Plan, row_of, shape

PATTERN_MOD = 31  # small integers: float32 sums of them stay exact for any practical world


class Rank:
    """One rank's measurements, on the whole world or on a process subgroup (``group``, with
    this rank's index in it): every collective goes through ``self.group``."""

    def __init__(self, plan: Plan, world: World, emit: Emit, group: Any = None, control: Any = None) -> None:
        self.plan, self.world, self.emit, self.group = plan, world, emit, group
        # The rank's own bookkeeping (start signals, agreement, gathering the rows) goes through
        # ``control``: the measured group may run under a forced NCCL_ALGO that refuses those ops
        # (tree does only AllReduce: "no algorithm/protocol available for function AllGather").
        self.control = group if control is None else control
        self.n, self.me = world.world_size, world.rank
        if group is not None:
            self.n, self.me = dist.get_world_size(group), dist.get_rank(group)
        self.cuda = plan.backend == "nccl"
        self.device = torch.device("cuda", self.ordinal(world.local_rank)) if self.cuda else torch.device("cpu")
        self.faults = [f.split(":") for f in os.environ.get(FAULT_ENV, "").split(",") if f]
        self.watchdog: Watchdog | None = None  # the world's rank: where it is (run_rank sets it)
        self._timer: RowTimer | None = None
        self.rows: list[dict[str, Any]] = []  # rank 0: the rows so far (kept when a later op fails)
        self.failures: list[dict[str, Any]] = []

    @property
    def timer(self) -> RowTimer:
        """This rank's GPU timer on its group, made on first use."""
        if self._timer is None:
            self._timer = RowTimer(self.device, self.control, self.wait)
        return self._timer

    def wait(self, done: torch.cuda.Event) -> None:
        """Until the GPU passed ``done``; polled, so the thread never blocks inside CUDA holding
        the interpreter while its process's watching thread needs it."""
        while not done.query():
            time.sleep(0.0001)

    def synced(self) -> None:
        """Before reading a result on the host: the GPU's work so far done (polled, see wait)."""
        if self.cuda:
            done = torch.cuda.Event()
            done.record()
            self.wait(done)

    @staticmethod
    def ordinal(local_rank: int) -> int:
        """The CUDA device of this rank: its local rank, or the one GPU a launcher gave it
        (srun --gpus-per-task narrows CUDA_VISIBLE_DEVICES to one device per task)."""
        count = torch.cuda.device_count()
        if count == 0:
            raise RuntimeError("no CUDA device visible to this rank")
        if local_rank < count:
            return local_rank
        if count == 1:
            return 0
        raise RuntimeError(f"local rank {local_rank} but only {count} CUDA devices visible")

    # -- data ------------------------------------------------------------------------------
    def pattern(self, rank: int, n: int, offset: int = 0) -> torch.Tensor:
        """Rank ``rank``'s send data: small integers that differ by rank and by position."""
        # int32 and reduced first: a 1 GiB buffer's pattern costs 1 GiB of scratch, not 8
        wide = offset + n >= 1 << 31
        i = torch.arange(offset, offset + n, device=self.device, dtype=torch.int64 if wide else torch.int32)
        i.remainder_(PATTERN_MOD).mul_(7).add_(rank * 13 + 1).remainder_(PATTERN_MOD)
        return i.to(torch.float32)

    def sum_pattern(self, n: int, offset: int = 0) -> torch.Tensor:
        """The element-wise sum of every rank's pattern: what a summing op must return."""
        out = torch.zeros(n, device=self.device, dtype=torch.float32)
        for r in range(self.n):
            out += self.pattern(r, n, offset)
        return out

    # -- one op ----------------------------------------------------------------------------
    def call(self, op: Op, send: torch.Tensor, recv: torch.Tensor) -> None:
        """One call of ``op`` on this rank's group, with the root mapped to the group's numbering."""
        g = self.group
        root = self.peer(self.plan.root)
        if op == "all_reduce":
            dist.all_reduce(recv, group=g)
        elif op == "all_gather":
            dist.all_gather_into_tensor(recv, send, group=g)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(recv, send, group=g)
        elif op == "all_to_all":
            dist.all_to_all_single(recv, send, group=g)
        elif op == "broadcast":
            dist.broadcast(recv, src=root, group=g)
        elif op == "reduce":
            dist.reduce(recv, dst=root, group=g)
        else:  # sendrecv: each rank to its ring neighbour, as nccl-tests' sendrecv_perf
            ops = [
                dist.P2POp(dist.isend, send, self.peer((self.me + 1) % self.n), group=g),
                dist.P2POp(dist.irecv, recv, self.peer((self.me - 1) % self.n), group=g),
            ]
            for w in dist.batch_isend_irecv(ops):
                w.wait()

    def peer(self, index: int) -> int:
        """The global rank of the group's ``index``-th rank (torch's src / dst / peer are global)."""
        return index if self.group is None else int(dist.get_global_rank(self.group, index))

    def buffers(
        self, op: Op, size: int, place: str, pool: tuple[torch.Tensor, torch.Tensor], it: int = 0
    ) -> tuple[Any, Any]:
        """Send and receive views of the preallocated pool, laid out as nccl-tests lays them. Like
        nccl-tests, iteration ``it`` moves along the pool by the op's footprint, so back-to-back
        iterations do not find their data in the cache."""
        sh = shape(op, size, self.n)
        total = max(sh.send_elems, sh.recv_elems, 1)
        shift = total * (it % max(pool[0].numel() // total, 1))
        a, b = pool[0][shift:], pool[1][shift:]
        if place == "out":
            return a[: sh.send_elems], b[: sh.recv_elems]
        if op == "all_gather":  # in place: this rank's chunk inside the output
            return b[self.me * sh.count : (self.me + 1) * sh.count], b[: sh.recv_elems]
        if op == "reduce_scatter":
            return b[: sh.send_elems], b[self.me * sh.count : (self.me + 1) * sh.count]
        return b[: sh.send_elems], b[: sh.recv_elems]

    def fill(self, op: Op, size: int, send: torch.Tensor, recv: torch.Tensor) -> None:
        """Fill the buffers for one checked call: this rank's pattern where the op reads it, -1 elsewhere."""
        sh = shape(op, size, self.n)
        recv.fill_(-1.0)
        if op == "all_gather":
            send.copy_(self.pattern(self.me, sh.send_elems, self.me * sh.count))
        elif op in ("all_reduce", "broadcast", "reduce"):
            recv.copy_(self.pattern(self.me, sh.recv_elems))
        else:
            send.copy_(self.pattern(self.me, sh.send_elems))

    def expected(self, op: Op, size: int) -> torch.Tensor | None:
        """What ``recv`` must hold after one call of ``op`` at this size, or None where this rank receives
        nothing to compare (``reduce`` off the root)."""
        sh = shape(op, size, self.n)
        c = sh.count
        if op == "all_reduce":
            return self.sum_pattern(c)
        if op == "all_gather":
            return torch.cat([self.pattern(r, c, r * c) for r in range(self.n)])
        if op == "reduce_scatter":
            return self.sum_pattern(c, self.me * c)
        if op == "all_to_all":
            return torch.cat([self.pattern(r, c, self.me * c) for r in range(self.n)])
        if op == "broadcast":
            return self.pattern(self.plan.root, c)
        if op == "reduce":
            return self.sum_pattern(c) if self.me == self.plan.root else None
        return self.pattern((self.me - 1) % self.n, c)

    def check(self, op: Op, size: int, place: str, pool: tuple[torch.Tensor, torch.Tensor]) -> int:
        """Run ``op`` once on known data and return how many elements came back wrong (nccl-tests' #wrong)."""
        send, recv = self.buffers(op, size, place, pool)
        self.fill(op, size, send, recv)
        self.call(op, send, recv)
        if self.fault("corrupt", op):
            recv[0] += 1.0
        want = self.expected(op, size)
        if want is None:
            self.synced()
            return 0
        wrong = torch.count_nonzero(recv != want)
        self.synced()
        return int(wrong.item())

    def timed_us(self, op: Op, size: int, place: str, pool: tuple[torch.Tensor, torch.Tensor]) -> float:
        """Microseconds per call of ``op``, over ``plan.iters`` calls timed back to back."""
        send, recv = self.buffers(op, size, place, pool)
        self.fill(op, size, send, recv)
        iters = self.plan.iters
        lag_ms = self.fault("slow") or 0.0
        if not self.cuda:
            dist.barrier(group=self.group)
            t0 = time.perf_counter()
            for _ in range(iters):
                self.call(op, send, recv)
            time.sleep(lag_ms / 1e3)
            return (time.perf_counter() - t0) * 1e6 / iters
        views = [self.buffers(op, size, place, pool, it) for it in range(iters)]
        calls = [partial(self.call, op, s, r) for s, r in views]
        return self.timer.row_us(op, size, calls, lag_ms)

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank: a decision every rank takes together."""
        if self.cuda:
            return self.timer.any_rank(flag)
        t = torch.tensor([1.0 if flag else 0.0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.control)
        return bool(t.item() > 0.0)

    # -- the run ---------------------------------------------------------------------------
    def allocate(self) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, int]:
        """Two buffers for the largest size every rank can hold; sizes above are given up."""
        sizes = sorted(self.plan.sizes, reverse=True)
        for top in sizes:
            elems = max(shape(op, top, self.n).send_elems for op in self.plan.ops)
            elems = max(elems, max(shape(op, top, self.n).recv_elems for op in self.plan.ops), 1)
            ok = 1.0
            pool = None
            try:
                # Room for the expected result of a check, too.
                pool = (torch.empty(elems, device=self.device), torch.empty(elems, device=self.device))
                torch.empty(elems, device=self.device)
            except torch.cuda.OutOfMemoryError:
                pool, ok = None, 0.0
                if self.cuda:
                    torch.cuda.empty_cache()
            flag = torch.tensor([ok], device=self.device)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.control)
            self.synced()
            if flag.item() == 1.0 and pool is not None:
                return pool, top
            pool = None
        return None, 0

    def gather(self, values: list[float]) -> list[list[float]]:
        """Every rank's list of floats (same length on every rank), through one all_gather."""
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        out = torch.empty(self.n * len(values), dtype=torch.float64, device=self.device)
        dist.all_gather_into_tensor(out, mine, group=self.control)
        self.synced()
        flat = out.tolist()
        k = len(values)
        return [flat[r * k : (r + 1) * k] for r in range(self.n)]

    def gather_json(self, obj: dict[str, Any], width: int = 1024) -> list[Any]:
        """Every rank's small JSON document, through one all_gather (all_gather_object needs
        numpy, which a minimal torch install lacks)."""
        data = json.dumps(obj).encode()[:width].ljust(width, b" ")
        mine = torch.tensor(list(data), dtype=torch.uint8, device=self.device)
        out = torch.empty(self.n * width, dtype=torch.uint8, device=self.device)
        dist.all_gather_into_tensor(out, mine, group=self.control)
        self.synced()
        flat = bytes(out.tolist())
        return [json.loads(flat[r * width : (r + 1) * width]) for r in range(self.n)]

    def fault(self, kind: str, op: str = "", size: int = 0) -> float | None:
        """The argument of an injected fault of this kind for this rank, op and size, or None (test hook)."""
        return fault_arg(self.faults, self.me, kind, op, size)

    def maybe_hang(self, op: str, size: int) -> None:
        """Hang here for good where a test injected a hang for this op and size."""
        if self.fault("hang", op, size):
            while True:  # never joins the op: its peers wait inside it
                time.sleep(1)

    def run(self, watchdog: Watchdog) -> dict[str, Any]:
        """Run the whole plan on this rank: allocate, then every op and size checked and timed, under the
        watchdog; rank 0 keeps the rows."""
        plan = self.plan
        watchdog.begin("setup", 0)
        self.emit({"ev": "begin", "rank": self.me, "op": "setup", "size": 0})
        pool, top = self.allocate()
        if self.cuda:
            hold_cycles(self.device.index, 1.0)  # calibrated here, outside the first row's timing
            self.timer.probe_graphs()
        watchdog.end()
        self.emit({"ev": "end", "rank": self.me, "op": "setup", "size": 0})
        rows, failures = self.rows, self.failures
        for size in plan.sizes:
            if size > top:
                msg = "out of memory: buffers for this size do not fit on every rank"
                failures.append({"kind": "oom", "op": None, "size_bytes": size, "message": msg})
                if self.me == 0:
                    self.emit({"ev": "failure", **failures[-1]})
        for op in plan.ops:
            spec = SPECS[op]
            for size in (s for s in plan.sizes if s <= top and pool is not None):
                assert pool is not None
                sh = shape(op, size, self.n)
                if sh.count == 0:
                    continue
                watchdog.begin(op, size)
                self.maybe_hang(op, size)
                if self.fault("error", op):
                    raise RuntimeError(f"test fault: rank {self.me} refused {op}")
                self.emit({"ev": "begin", "rank": self.me, "op": op, "size": size})
                values = [math.nan] * 4
                for _ in range(plan.warmup_iters):
                    s, r = self.buffers(op, size, spec.places[0], pool)
                    self.call(op, s, r)
                for i, place in enumerate(("out", "in")):
                    if place in spec.places:
                        values[i] = self.timed_us(op, size, place, pool)
                        values[2 + i] = float(self.check(op, size, place, pool)) if plan.check else math.nan
                per_rank = self.gather(values)
                watchdog.end()
                self.emit({"ev": "end", "rank": self.me, "op": op, "size": size})
                if self.me == 0:
                    rows.append(row_of(op, size, self.n, self.plan.root, per_rank))
                    self.emit({"ev": "row", "row": rows[-1]})
        return {"rows": rows, "failures": failures}

    def identity(self) -> dict[str, Any]:
        """Who this rank is, for the result's ``RankInfo``: host, pid, node, and its device where it has one."""
        info: dict[str, Any] = {
            "rank": self.me,
            "local_rank": self.world.local_rank,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "device": None,
            "bus_id": None,
            "device_name": "cpu",
            "node": node_name(),
            "node_rank": node_rank(),
        }
        if self.cuda:
            p = torch.cuda.get_device_properties(self.device)
            info.update(
                device=self.device.index,
                bus_id=f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0",
                device_name=p.name,
            )
        return info
