"""One rank of a collectives run: the only module here that imports torch.

A rank joins whatever world it is given (``World``: spawned by ``launch.py``, or made by
torchrun / srun), runs the plan, and rank 0 gathers every rank's times. Spawned ranks also
print one JSON event per line on stdout (begin / end of each op, failures) so the parent can
cut a hang; every rank also watches itself and exits when an op outlives its timeout.

Timing on GPUs, per row: a spin kernel holds the stream while the timed ops are queued, one
untimed op lines the ranks up on the GPU, then CUDA events bracket ``iters`` ops. The
launch cost of Python stays outside the timed region and the ranks start together, so the
time per op is the GPU's. nccl-tests by default times the same loop from the host (launches
back to back, then a stream sync): above ~1 MiB the two agree; below, its figure is bounded
by its own launch rate (~15-18 us per op on an H200), and ours matches nccl-tests run with
CUDA graphs (``-G``), which also takes launches out. On gloo (CPU) a host timer is used.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
from datetime import timedelta
from typing import Any

import torch  # this module is a measuring process: importing torch is its job
import torch.distributed as dist

from topodoctor.measure.collectives.guard import FAULT_ENV, Emit, Watchdog, fault_arg, nccl_environment
from topodoctor.measure.collectives.nodes import NodeSettings, node_name, node_rank
from topodoctor.measure.collectives.plan import SPECS, Op, Plan, row_of, shape
from topodoctor.measure.collectives.world import World

PATTERN_MOD = 31  # small integers: float32 sums of them stay exact for any practical world
HOLD_ATTEMPTS = 3  # timings of one row whose hold ran out before the ops were queued, at most


class Rank:
    """One rank's measurements, on the whole world or on a process subgroup (``group``, with
    this rank's index in it): every collective goes through ``self.group``."""

    def __init__(self, plan: Plan, world: World, emit: Emit, group: Any = None) -> None:
        self.plan, self.world, self.emit, self.group = plan, world, emit, group
        self.n, self.me = world.world_size, world.rank
        if group is not None:
            self.n, self.me = dist.get_world_size(group), dist.get_rank(group)
        self.cuda = plan.backend == "nccl"
        self.device = torch.device("cuda", self.ordinal(world.local_rank)) if self.cuda else torch.device("cpu")
        self.faults = [f.split(":") for f in os.environ.get(FAULT_ENV, "").split(",") if f]
        self.hold_ms: dict[str, float] = {}  # per op: how long the stream is held while ops queue

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
        out = torch.zeros(n, device=self.device, dtype=torch.float32)
        for r in range(self.n):
            out += self.pattern(r, n, offset)
        return out

    # -- one op ----------------------------------------------------------------------------
    def call(self, op: Op, send: torch.Tensor, recv: torch.Tensor) -> None:
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
        sh = shape(op, size, self.n)
        recv.fill_(-1.0)
        if op == "all_gather":
            send.copy_(self.pattern(self.me, sh.send_elems, self.me * sh.count))
        elif op in ("all_reduce", "broadcast", "reduce"):
            recv.copy_(self.pattern(self.me, sh.recv_elems))
        else:
            send.copy_(self.pattern(self.me, sh.send_elems))

    def expected(self, op: Op, size: int) -> torch.Tensor | None:
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
        send, recv = self.buffers(op, size, place, pool)
        self.fill(op, size, send, recv)
        self.call(op, send, recv)
        if self.fault("corrupt", op):
            recv[0] += 1.0
        want = self.expected(op, size)
        if want is None:
            return 0
        return int(torch.count_nonzero(recv != want).item())

    def timed_us(self, op: Op, size: int, place: str, pool: tuple[torch.Tensor, torch.Tensor]) -> float:
        send, recv = self.buffers(op, size, place, pool)
        self.fill(op, size, send, recv)
        iters = self.plan.iters
        if not self.cuda:
            dist.barrier(group=self.group)
            t0 = time.perf_counter()
            for _ in range(iters):
                self.call(op, send, recv)
            time.sleep((self.fault("slow") or 0.0) / 1e3)
            return (time.perf_counter() - t0) * 1e6 / iters
        from topodoctor.bandwidth.runner import hold_cycles

        stream = torch.cuda.current_stream(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        held0, held1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # The hold outlasts queueing the ops from Python; the untimed op after it starts the
        # ranks together, so neither launch gaps nor rank skew land inside the events. Each rank
        # sizes its own hold (the untimed op aligns them). The hold is checked afterwards: when
        # the GPU ran out of it before Python had queued every op (a spin calibrated at idle
        # clocks, a slow first call), the ops ran at Python's launch rate and the ranks waited
        # for each other's launches, so the row is timed again with a longer hold, on every rank.
        views = [self.buffers(op, size, place, pool, it) for it in range(iters)]
        for attempt in range(HOLD_ATTEMPTS):
            hold_ms = self.hold_ms.get(op, 1.0 + 0.15 * iters)
            cycles = hold_cycles(self.device.index, hold_ms)
            t0 = time.perf_counter()
            held0.record(stream)
            torch.cuda._sleep(cycles)
            held1.record(stream)
            self.call(op, send, recv)
            start.record(stream)
            for s_view, r_view in views:
                self.call(op, s_view, r_view)
            slow = self.fault("slow")
            if slow:
                torch.cuda._sleep(hold_cycles(self.device.index, slow))
            end.record(stream)
            queued_ms = (time.perf_counter() - t0) * 1e3
            end.synchronize()
            short = float(held0.elapsed_time(held1)) < queued_ms
            self.hold_ms[op] = max(hold_ms, 1.5 * queued_ms, 2.0 * hold_ms if short else 0.0)
            if attempt + 1 == HOLD_ATTEMPTS or not self.any_rank(short):
                break
        return float(start.elapsed_time(end)) * 1e3 / iters

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank: a decision every rank takes together."""
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
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
            dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.group)
            if flag.item() == 1.0 and pool is not None:
                return pool, top
            pool = None
        return None, 0

    def gather(self, values: list[float]) -> list[list[float]]:
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        out = torch.empty(self.n * len(values), dtype=torch.float64, device=self.device)
        dist.all_gather_into_tensor(out, mine, group=self.group)
        flat = out.tolist()
        k = len(values)
        return [flat[r * k : (r + 1) * k] for r in range(self.n)]

    def gather_json(self, obj: dict[str, Any], width: int = 1024) -> list[Any]:
        """Every rank's small JSON document, through one all_gather (all_gather_object needs
        numpy, which a minimal torch install lacks)."""
        data = json.dumps(obj).encode()[:width].ljust(width, b" ")
        mine = torch.tensor(list(data), dtype=torch.uint8, device=self.device)
        out = torch.empty(self.n * width, dtype=torch.uint8, device=self.device)
        dist.all_gather_into_tensor(out, mine, group=self.group)
        flat = bytes(out.tolist())
        return [json.loads(flat[r * width : (r + 1) * width]) for r in range(self.n)]

    def fault(self, kind: str, op: str = "", size: int = 0) -> float | None:
        return fault_arg(self.faults, self.me, kind, op, size)

    def maybe_hang(self, op: str, size: int) -> None:
        if self.fault("hang", op, size):
            while True:  # never joins the op: its peers wait inside it
                time.sleep(1)

    def run(self, watchdog: Watchdog) -> dict[str, Any]:
        plan = self.plan
        watchdog.begin("setup", 0)
        self.emit({"ev": "begin", "rank": self.me, "op": "setup", "size": 0})
        pool, top = self.allocate()
        if self.cuda:
            from topodoctor.bandwidth.runner import hold_cycles

            hold_cycles(self.device.index, 1.0)  # calibrated here, outside the first row's timing
        watchdog.end()
        self.emit({"ev": "end", "rank": self.me, "op": "setup", "size": 0})
        rows: list[dict[str, Any]] = []
        failures: list[dict[str, Any]] = []
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


def run_rank(
    plan: Plan, world: World, emit: Emit, log_dir: str | None, nodes: NodeSettings | None = None, keep: bool = False
) -> dict[str, Any] | None:
    """Join the world, run the plan (then the multi-node phases, see worker_nodes.py); rank 0
    returns the raw result, the others None. ``keep``: the group outlives this (worker_exit)."""
    nccl_environment(os.environ, world.rank, log_dir)  # type: ignore[arg-type]
    for k, v in world.env().items():
        os.environ.setdefault(k, v)
    rank = Rank(plan, world, emit)
    kwargs: dict[str, Any] = {}
    if rank.cuda:
        torch.cuda.set_device(rank.device)
        kwargs["device_id"] = rank.device  # eager NCCL init: a broken NCCL fails here, not mid-run
    # env:// (MASTER_ADDR / MASTER_PORT): under torchrun it joins the agent's own store as a
    # client (TORCHELASTIC_USE_AGENT_STORE) instead of trying to open a second one on its port.
    dist.init_process_group(
        plan.backend,
        init_method="env://",
        rank=world.rank,
        world_size=world.world_size,
        # The library's own timeout backs up the watchdog, which names the op that hung.
        timeout=timedelta(seconds=plan.op_timeout_s + 5.0),
        **kwargs,
    )
    try:
        idents = rank.gather_json(rank.identity())
        version = torch.cuda.nccl.version() if rank.cuda else ""
        nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        ours = ("NCCL_DEBUG_FILE", "NCCL_DEBUG") if log_dir else ()
        env = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_")) and k not in ours}
        meta = {"torch": torch.__version__, "nccl": nccl, "ranks": idents, "env": env}
        if world.rank == 0:
            emit({"ev": "meta", **meta})
        emit({"ev": "ready", "rank": world.rank})
        watchdog = Watchdog(plan.op_timeout_s, emit, world.rank)
        if rank.cuda:
            # A stream of its own (non-blocking), as nccl-tests uses: no implicit waits on the
            # legacy default stream; synchronous collectives run on it (torch >= 2.8).
            with torch.cuda.stream(torch.cuda.Stream(rank.device)):
                body = rank.run(watchdog)
        else:
            body = rank.run(watchdog)
        from topodoctor.measure.collectives.worker_nodes import run_nodes

        body.update(run_nodes(rank, plan, idents, nodes or NodeSettings(), emit))
        _flush_c_streams()  # NCCL's log file is C stdio: complete on disk before we may be killed
        emit({"ev": "finished", "rank": world.rank})
        return {**meta, **body} if world.rank == 0 else None
    finally:
        if not keep:
            dist.destroy_process_group()


def _flush_c_streams() -> None:
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def _emit_stdout(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    """Entry point of a spawned rank: plan and world from the environment, events (rank 0's
    rows among them) on stdout, so the parent keeps what finished when a later op hangs."""
    from topodoctor.codec import from_jsonable
    from topodoctor.measure.collectives.world import from_env

    plan = from_jsonable(Plan, json.loads(os.environ["TOPODOCTOR_COLL_PLAN"]), "collectives plan")
    world = from_env()
    assert world is not None, "a spawned rank needs RANK and WORLD_SIZE"
    nodes_doc = os.environ.get("TOPODOCTOR_COLL_NODES")
    nodes = from_jsonable(NodeSettings, json.loads(nodes_doc), "node settings") if nodes_doc else None
    _emit_stdout({"ev": "imported", "rank": world.rank})  # torch loaded: the start-up's first part
    try:
        run_rank(plan, world, _emit_stdout, os.environ.get("TOPODOCTOR_COLL_LOGDIR"), nodes)
    except Exception as exc:
        kind = "oom" if isinstance(exc, torch.cuda.OutOfMemoryError) else "error"
        first = (str(exc).strip().splitlines() or [""])[0]
        _emit_stdout({"ev": "fail", "rank": world.rank, "kind": kind, "message": f"{type(exc).__name__}: {first}"})
        return 1
    _emit_stdout({"ev": "done", "rank": world.rank})
    return 0


if __name__ == "__main__":
    sys.exit(main())
