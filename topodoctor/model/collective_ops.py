"""What to run and how to count it: the ops, their sizes and nccl-tests' bandwidth conventions.

Numbers here follow nccl-tests (``src/common.cu`` and the per-op ``*.cu`` files) so that a
row of ours and a row of theirs compare one to one:

- ``size`` is the larger of the send and receive buffers: all_gather's size is the whole
  output, reduce_scatter's the whole input; the per-rank chunk is ``size / n`` rounded down
  to 16 bytes.
- ``count`` is the element count passed to the NCCL call (the per-rank chunk for all_gather,
  reduce_scatter and all_to_all).
- algbw = bytes / time with bytes = count x element size (x n for the gathering ops);
  busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter, all_to_all),
  1 (broadcast, reduce, sendrecv). GB/s is 1e9 bytes per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from topodoctor.core.errors import InputError

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "sendrecv"]
Place = Literal["out", "in"]
OPS: tuple[Op, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "sendrecv")
ELEMENT_BYTES = 4  # float32, nccl-tests' default type
TYPE_NAME = "float"


@dataclass(frozen=True)
class OpSpec:
    """What an op is to nccl-tests and to torch: its program, reduction, whether its count is per rank,
    and the buffer placements torch allows."""

    name: Op
    binary: str  # the nccl-tests program that runs the same op
    redop: str  # as nccl-tests prints it
    chunked: bool  # the NCCL count is a per-rank chunk of the size (gathering ops)
    # torch.distributed offers only some forms: all_reduce, broadcast and reduce work in
    # place only; all_to_all_single and send/recv need distinct buffers.
    places: tuple[Place, ...]

    def bus_factor(self, nranks: int) -> float:
        """busbw / algbw for this op on ``nranks`` ranks, as nccl-tests defines it."""
        if nranks < 1:
            return 0.0
        if self.name == "all_reduce":
            return 2.0 * (nranks - 1) / nranks
        if self.chunked:
            return (nranks - 1) / nranks
        return 1.0


SPECS: dict[str, OpSpec] = {
    "all_reduce": OpSpec("all_reduce", "all_reduce_perf", "sum", False, ("in",)),
    "all_gather": OpSpec("all_gather", "all_gather_perf", "none", True, ("out", "in")),
    "reduce_scatter": OpSpec("reduce_scatter", "reduce_scatter_perf", "sum", True, ("out", "in")),
    "all_to_all": OpSpec("all_to_all", "alltoall_perf", "none", True, ("out",)),
    "broadcast": OpSpec("broadcast", "broadcast_perf", "none", False, ("in",)),
    "reduce": OpSpec("reduce", "reduce_perf", "sum", False, ("in",)),
    "sendrecv": OpSpec("sendrecv", "sendrecv_perf", "sum", False, ("out",)),
}
BINARY_TO_OP: dict[str, Op] = {s.binary.removesuffix("_perf"): s.name for s in SPECS.values()}


@dataclass(frozen=True)
class Shape:
    """One op at one requested size, as nccl-tests lays it out."""

    size_bytes: int  # what the table prints: max(send, recv) bytes
    count: int  # elements passed to the call
    send_elems: int  # per rank
    recv_elems: int  # per rank


def shape(op: Op, requested_bytes: int, nranks: int, elt: int = ELEMENT_BYTES) -> Shape:
    """nccl-tests' GetCollByteCount for ``op``: requested size in bytes, ``nranks`` ranks."""
    count = requested_bytes // elt
    if SPECS[op].chunked:
        # (count / n) rounded down to a multiple of 16 bytes' worth of elements
        base = (count // max(nranks, 1)) & ~(max(16 // elt, 1) - 1)
        send = base if op == "all_gather" else base * nranks
        recv = base * nranks if op in ("all_gather", "all_to_all") else base
        return Shape(max(send, recv) * elt, base, send, recv)
    return Shape(count * elt, count, count, count)


def bandwidth_gbps(op: Op, count: int, seconds: float, nranks: int, elt: int = ELEMENT_BYTES) -> tuple[float, float]:
    """(algbw, busbw) in GB/s, exactly as nccl-tests' GetBw computes them."""
    if seconds <= 0:
        return 0.0, 0.0
    spec = SPECS[op]
    moved = count * elt * (nranks if spec.chunked else 1)
    alg = moved / 1e9 / seconds
    return alg, alg * spec.bus_factor(nranks)


def parse_ops(names: list[str] | None) -> tuple[Op, ...]:
    """Op names as given (``alltoall`` and ``all_to_all`` both work); all ops when none."""
    if not names:
        return OPS
    out: list[Op] = []
    for raw in (p for n in names for p in n.split(",")):
        name = raw.strip().lower().replace("-", "_").removesuffix("_perf")
        op = BINARY_TO_OP.get(name) or next((o for o in OPS if o == name), None)
        if op is None:
            raise InputError(f"unknown op {raw!r}; choose from {', '.join(OPS)}")
        if op not in out:
            out.append(op)
    return tuple(out)


@dataclass(frozen=True)
class Plan:
    """What the worker runs: every op at every size, timed as nccl-tests times it."""

    ops: tuple[Op, ...] = OPS
    sizes: tuple[int, ...] = tuple(8 << i for i in range(28))  # 8 B .. 1 GiB by 2, as `-b 8 -e 1G -f 2`
    iters: int = 20  # timed iterations per row (nccl-tests -n)
    warmup_iters: int = 1  # per size, before timing (nccl-tests -w)
    check: bool = True  # compare every result with its expected value (#wrong)
    op_timeout_s: float = 30.0  # one op at one size, both places, check included
    backend: Literal["nccl", "gloo"] = "nccl"
    root: int = 0

    @staticmethod
    def quick(size_bytes: int = 256 << 20) -> Plan:
        """The pass ``check --collectives`` runs: all_reduce and sendrecv at one large size."""
        return Plan(ops=("all_reduce", "sendrecv"), sizes=(size_bytes,), iters=10, op_timeout_s=10.0)


def row_of(op: Op, size: int, nranks: int, root: int, per_rank: list[list[float]]) -> dict[str, Any]:
    """One table row from every rank's [time out, time in, wrong out, wrong in] (NaN: not run):
    time is the mean over ranks, as nccl-tests averages it; #wrong the sum."""
    sh = shape(op, size, nranks)
    cols: dict[str, Any] = {}
    for i, key in enumerate(("out_of_place", "in_place")):
        times = [v[i] for v in per_rank]
        if any(math.isnan(t) for t in times):
            cols[key] = None
            continue
        mean_us = sum(times) / len(times)
        alg, bus = bandwidth_gbps(op, sh.count, mean_us / 1e6, nranks)
        wrong = [v[2 + i] for v in per_rank]
        checked = not any(math.isnan(w) for w in wrong)
        cols[key] = {
            "time_us": round(mean_us, 3),
            "algbw_gbps": alg,
            "busbw_gbps": bus,
            "wrong": int(sum(wrong)) if checked else None,
            "rank_time_us": [round(t, 3) for t in times],
            "rank_wrong": [int(w) for w in wrong] if checked else [],
        }
    return {
        "op": op,
        "size_bytes": sh.size_bytes,
        "count": sh.count,
        "dtype": TYPE_NAME,
        "redop": SPECS[op].redop,
        "root": root if op in ("broadcast", "reduce") else -1,
        **cols,
    }
