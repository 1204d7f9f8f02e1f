"""One rank of a collectives run: the only module here that imports torch.

A rank joins whatever world it is given (``World``: spawned by ``launch.py``, or made by
torchrun / srun), runs the plan, and rank 0 gathers every rank's times. Spawned ranks also
print one JSON event per line on stdout (begin / end of each op, failures) so the parent can
cut a hang; every rank also watches itself and exits when an op outlives its timeout.

Timing on GPUs, per row: a spin kernel holds the stream while the timed ops are queued, one
untimed op lines the ranks up on the GPU, then CUDA events bracket ``iters`` ops. The
launch cost of Python stays outside the timed region and the ranks start together, so the
time per op is NCCL's, as nccl-tests measures it. On gloo (CPU) a host timer does the same.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import torch  # this module is a measuring process: importing torch is its job
import torch.distributed as dist

from topodoctor.measure.collectives.nodes import NodeSettings, node_name, node_rank
from topodoctor.measure.collectives.plan import SPECS, TYPE_NAME, Op, Plan, bandwidth_gbps, shape
from topodoctor.measure.collectives.world import World

Emit = Callable[[dict[str, Any]], None]
PATTERN_MOD = 31  # small integers: float32 sums of them stay exact for any practical world
# Test hook, for exercising the runner and the rules without broken hardware; comma-separated:
#   hang:RANK:OP:SIZE   RANK never joins OP at SIZE (its peers wait inside the op)
#   slow:RANK:MS        RANK takes MS longer to finish its timed loop (a rank that lags)
#   corrupt:RANK:OP     RANK's result of OP has one wrong element at every size
FAULT_ENV = "TOPODOCTOR_COLL_FAULT"


def nccl_environment(environ: dict[str, str], rank: int, log_dir: str | None) -> None:
    """What every rank runs with: NCCL's INFO log in a file of its own, NVLink multicast off
    unless the user turned it on (it can take a shared host's GPUs out of service)."""
    environ.setdefault("NCCL_NVLS_ENABLE", "0")
    environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    if log_dir and "NCCL_DEBUG_FILE" not in environ:
        environ["NCCL_DEBUG"] = "INFO"
        environ["NCCL_DEBUG_FILE"] = os.path.join(log_dir, f"nccl.{rank}.log")


class Watchdog:
    """Ends this rank when an op outlives its timeout, even when the main thread is stuck in
    a collective that will never complete (a peer that never joined it)."""

    def __init__(self, timeout_s: float, emit: Emit, rank: int) -> None:
        self.timeout_s, self.emit, self.rank = timeout_s, emit, rank
        self.current: tuple[str, int, float] | None = None
        threading.Thread(target=self._watch, daemon=True).start()

    def begin(self, op: str, size: int) -> None:
        self.current = (op, size, time.monotonic())

    def end(self) -> None:
        self.current = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.2)
            cur = self.current
            if cur is not None and time.monotonic() - cur[2] > self.timeout_s:
                op, size, _ = cur
                msg = f"{op} at {size} B did not finish within {self.timeout_s:g} s on rank {self.rank}"
                self.emit({"ev": "hang", "rank": self.rank, "op": op, "size": size, "message": msg})
                print(f"topodoctor: error: {msg}", file=sys.stderr, flush=True)
                os._exit(124)


class Rank:
    group: Any = None  # the process group the ops run on; None is the world (see worker_nodes.py)

    def __init__(self, plan: Plan, world: World, emit: Emit) -> None:
        self.plan, self.world, self.emit = plan, world, emit
        self.n, self.me = world.world_size, world.rank
        self.cuda = plan.backend == "nccl"
        self.device = torch.device("cuda", world.local_rank) if self.cuda else torch.device("cpu")
        self.faults = [f.split(":") for f in os.environ.get(FAULT_ENV, "").split(",") if f]

    # -- data ------------------------------------------------------------------------------
    def pattern(self, rank: int, n: int, offset: int = 0) -> torch.Tensor:
        """Rank ``rank``'s send data: small integers that differ by rank and by position."""
        i = torch.arange(offset, offset + n, device=self.device, dtype=torch.int64)
        return ((i * 7 + rank * 13 + 1) % PATTERN_MOD).to(torch.float32)

    def sum_pattern(self, n: int, offset: int = 0) -> torch.Tensor:
        out = torch.zeros(n, device=self.device, dtype=torch.float32)
        for r in range(self.n):
            out += self.pattern(r, n, offset)
        return out

    # -- one op ----------------------------------------------------------------------------
    def call(self, op: Op, send: torch.Tensor, recv: torch.Tensor) -> None:
        root = self.plan.root
        if op == "all_reduce":
            dist.all_reduce(recv, group=self.group)
        elif op == "all_gather":
            dist.all_gather_into_tensor(recv, send, group=self.group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(recv, send, group=self.group)
        elif op == "all_to_all":
            dist.all_to_all_single(recv, send, group=self.group)
        elif op == "broadcast":
            dist.broadcast(recv, src=self.peer(root), group=self.group)
        elif op == "reduce":
            dist.reduce(recv, dst=self.peer(root), group=self.group)
        else:  # sendrecv: each rank to its ring neighbour, as nccl-tests' sendrecv_perf
            ops = [
                dist.P2POp(dist.isend, send, self.peer((self.me + 1) % self.n), self.group),
                dist.P2POp(dist.irecv, recv, self.peer((self.me - 1) % self.n), self.group),
            ]
            for w in dist.batch_isend_irecv(ops):
                w.wait()

    def buffers(self, op: Op, size: int, place: str, pool: tuple[torch.Tensor, torch.Tensor]) -> tuple[Any, Any]:
        """Send and receive views of the preallocated pool, laid out as nccl-tests lays them."""
        sh = shape(op, size, self.n)
        a, b = pool
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
            return torch.cat([self.pattern(r, sh.send_elems)[self.me * c : (self.me + 1) * c] for r in range(self.n)])
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
        # The hold outlasts queueing the ops from Python; the untimed op after it starts the
        # ranks together, so neither launch gaps nor rank skew land inside the events.
        torch.cuda._sleep(hold_cycles(self.device.index, 2.0 + 0.1 * iters))
        self.call(op, send, recv)
        start.record(stream)
        for _ in range(iters):
            self.call(op, send, recv)
        slow = self.fault("slow")
        if slow:
            torch.cuda._sleep(hold_cycles(self.device.index, slow))
        end.record(stream)
        end.synchronize()
        return float(start.elapsed_time(end)) * 1e3 / iters

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

    def peer(self, group_rank: int) -> int:
        """The global rank of a rank of this group (torch's point-to-point and root
        arguments are global ranks)."""
        return group_rank if self.group is None else int(dist.get_global_rank(self.group, group_rank))

    def fault(self, kind: str, op: str = "", size: int = 0) -> float | None:
        """The test hook's argument for this rank (see FAULT_ENV), or None."""
        for f in self.faults:
            if len(f) < 3 or f[0] != kind or f[1] != str(self.me):
                continue
            if kind == "slow":
                return float(f[2])
            if f[2] == op and (kind == "corrupt" or (len(f) > 3 and f[3] == str(size))):
                return 1.0
        return None

    def maybe_hang(self, op: str, size: int) -> None:
        if self.fault("hang", op, size):
            while True:  # never joins the op: its peers wait inside it
                time.sleep(1)

    def run(self, watchdog: Watchdog) -> dict[str, Any]:
        plan = self.plan
        pool, top = self.allocate()
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
                    rows.append(self.row(op, size, per_rank))
                    self.emit({"ev": "row", "row": rows[-1]})
        return {"rows": rows, "failures": failures}

    def row(self, op: Op, size: int, per_rank: list[list[float]]) -> dict[str, Any]:
        sh = shape(op, size, self.n)
        cols: dict[str, Any] = {}
        for i, key in enumerate(("out_of_place", "in_place")):
            times = [v[i] for v in per_rank]
            if any(math.isnan(t) for t in times):
                cols[key] = None
                continue
            mean_us = sum(times) / len(times)
            alg, bus = bandwidth_gbps(op, sh.count, mean_us / 1e6, self.n)
            wrong = [v[2 + i] for v in per_rank]
            cols[key] = {
                "time_us": round(mean_us, 3),
                "algbw_gbps": alg,
                "busbw_gbps": bus,
                "wrong": None if any(math.isnan(w) for w in wrong) else int(sum(wrong)),
                "rank_time_us": [round(t, 3) for t in times],
                "rank_wrong": [] if any(math.isnan(w) for w in wrong) else [int(w) for w in wrong],
            }
        return {
            "op": op,
            "size_bytes": sh.size_bytes,
            "count": sh.count,
            "dtype": TYPE_NAME,
            "redop": SPECS[op].redop,
            "root": self.plan.root if op in ("broadcast", "reduce") else -1,
            **cols,
        }

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
    plan: Plan, world: World, emit: Emit, log_dir: str | None, nodes: NodeSettings | None = None
) -> dict[str, Any] | None:
    """Join the world, run the plan (then the multi-node phases, see worker_nodes.py); rank 0
    returns the raw result, the others None."""
    nccl_environment(os.environ, world.rank, log_dir)  # type: ignore[arg-type]
    for k, v in world.env().items():
        os.environ.setdefault(k, v)
    rank = Rank(plan, world, emit)
    from datetime import timedelta

    kwargs: dict[str, Any] = {}
    if rank.cuda:
        torch.cuda.set_device(rank.device)
        kwargs["device_id"] = rank.device  # eager NCCL init: a broken NCCL fails here, not mid-run
    dist.init_process_group(
        plan.backend,
        init_method=f"tcp://{world.master_addr}:{world.master_port}",
        rank=world.rank,
        world_size=world.world_size,
        # The library's own timeout backs up the watchdog, which names the op that hung.
        timeout=timedelta(seconds=plan.op_timeout_s + 5.0),
        **kwargs,
    )
    try:
        idents = rank.gather_json(rank.identity())
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if rank.cuda else ""
        ours = ("NCCL_DEBUG_FILE", "NCCL_DEBUG") if log_dir else ()
        env = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_")) and k not in ours}
        meta = {"torch": torch.__version__, "nccl": nccl, "ranks": idents, "env": env}
        if world.rank == 0:
            emit({"ev": "meta", **meta})
        emit({"ev": "ready", "rank": world.rank})
        body = rank.run(Watchdog(plan.op_timeout_s, emit, world.rank))
        from topodoctor.measure.collectives.worker_nodes import run_nodes

        body.update(run_nodes(rank, plan, idents, nodes or NodeSettings(), emit))
        return {**meta, **body} if world.rank == 0 else None
    finally:
        dist.destroy_process_group()


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
    try:
        run_rank(plan, world, _emit_stdout, os.environ.get("TOPODOCTOR_COLL_LOGDIR"), nodes)
    except torch.cuda.OutOfMemoryError as exc:
        _emit_stdout({"ev": "fail", "rank": world.rank, "kind": "oom", "message": str(exc).splitlines()[0]})
        return 1
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        _emit_stdout({"ev": "fail", "rank": world.rank, "kind": "error", "message": f"{type(exc).__name__}: {first}"})
        return 1
    _emit_stdout({"ev": "done", "rank": world.rank})
    return 0


if __name__ == "__main__":
    sys.exit(main())
