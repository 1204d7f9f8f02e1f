"""What NCCL chose, in its own words: the TUNING cost table, the graph search and the per-call
algorithm lines (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING``). Text in, plain data out.

Forms read (NCCL's ``src/graph/tuning.cc``, ``search.cc`` and ``src/enqueue.cc``)::

      Algorithm   |      Tree      ...      |      Ring    ...  |          (one block per 3 algorithms)
      Protocol    |   LL |  LL128 | Simple |   LL |  LL128 | Simple | ...
      AllReduce   |  16.8/ 0.2 | 31.0/ 0.0 | 36.4/ 0.9 | ...        (latency us / bandwidth GB/s)
    Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1
    Could not find a path for pattern 1, falling back to simple order                (search.cc)
    AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}      (2.24 and later)
    AllReduce: 1048576 Bytes -> Algo 1 proto 2 time 36.4                           (2.21 - 2.23)
    1048576 Bytes -> Algo 1 proto 2 time 36.4                                      (2.20: no op name)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topodoctor.nccl import grammar as g

# NCCL's names for its algorithms and protocols (src/include/device.h, the order of its tables):
# what NCCL_ALGO and NCCL_PROTO take and what its tuning log prints.
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")


# ncclAlgoStr / ncclProtoStr (src/init.cc, in nccl/values.py): the numeric forms of 2.20 - 2.23 index them.
# NCCL's function names -> ours (model/collective_ops.py's OPS)
OP_OF = {
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "AllReduce": "all_reduce",
}

# search.cc's patterns (NCCL_TOPO_PATTERN_*), as the graph search prints their numbers
PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring", 5: "nvls", 6: "collnet direct"}
# topo.cc topoPathTypeStr, nearest first, as the graph line's types print (C2C and P2C from 2.27, NET from
# 2.19; P2C and PXN changed places in 2.28 and count as one rank here)
PATH_TYPES = {"LOC": 0, "NVL": 1, "NVB": 2, "C2C": 3, "PIX": 4, "PXB": 5, "PXN": 6, "P2C": 6, "PHB": 7, "SYS": 8,
              "NET": 9, "DIS": 10}  # fmt: skip
# search.cc: what the simple order it falls back to is credited with (GB/s per channel, over SYS)
FALLBACK_GBPS = 0.1


@dataclass(frozen=True)
class Cost:
    """One cell of NCCL's cost table: its model of an op under one algorithm and protocol."""

    op: str  # our name: all_reduce, ...
    algorithm: str
    protocol: str
    latency_us: float
    algbw_gbps: float  # the table's bandwidth (NCCL's algorithm bandwidth, GB/s); 0.0: not used here


@dataclass(frozen=True)
class GraphSearch:
    """One graph NCCL searched (``Pattern 4, crossNic 0, nChannels 12, bw 30/30, type NVL/PIX``)."""

    pattern: str  # ring, tree, ...
    cross_nic: int
    channels: int
    bw_intra_gbps: float  # per channel, GB/s, as NCCL's search found it
    bw_inter_gbps: float
    type_intra: str  # NVL, PCI/PIX/PXB/PHB/SYS, LOC
    type_inter: str
    number: int = 0  # the pattern's number as printed
    same_channels: int = 1

    @property
    def fallback(self) -> bool:
        """Whether this is the simple order search.cc falls back to: one channel at 0.1 GB/s over SYS."""
        return self.channels == 1 and self.bw_intra_gbps == FALLBACK_GBPS and self.type_intra == "SYS"


@dataclass(frozen=True)
class Choice:
    """What NCCL chose for one call (first seen; ``calls`` counts the repeats)."""

    op: str
    size_bytes: int
    algorithm: str
    protocol: str
    channel_lo: int | None  # None in the 2.20 - 2.23 forms, which print no channels
    channel_hi: int | None
    calls: int = 1

    @property
    def channels(self) -> int | None:
        """How many channels the call used, or None where the log did not say."""
        return None if self.channel_lo is None or self.channel_hi is None else self.channel_hi - self.channel_lo + 1


@dataclass(frozen=True)
class Choices:
    """Everything a log says about NCCL's choices."""

    costs: tuple[Cost, ...]
    graphs: tuple[GraphSearch, ...]
    calls: tuple[Choice, ...]
    failed: tuple[int, ...] = ()  # the patterns whose search found no path, as NCCL said it, each once
    paths: tuple[tuple[str, float], ...] = ()  # NCCL's paths between the GPUs of a node: (type, GB/s), each once

    def cost(self, op: str, algorithm: str, protocol: str) -> Cost | None:
        """The table's cell for one op, algorithm and protocol (names compared case-blind)."""
        for c in self.costs:
            if c.op == op and c.algorithm.lower() == algorithm.lower() and c.protocol.lower() == protocol.lower():
                return c
        return None

    def chosen(self, op: str, size_bytes: int) -> Choice | None:
        """The choice NCCL made for ``op`` at ``size_bytes`` (the nearest logged size at or below)."""
        best: Choice | None = None
        for c in self.calls:
            if c.op == op and c.size_bytes <= size_bytes and (best is None or c.size_bytes > best.size_bytes):
                best = c
        return best


def _canon(name: str, names: tuple[str, ...]) -> str:
    for n in names:
        if n.lower() == name.lower():
            return n
    return name


def _index(value: str, names: tuple[str, ...]) -> str:
    i = int(value)
    return names[i] if 0 <= i < len(names) else f"#{i}"


_CallKey = tuple[str, int, str, str, int | None, int | None]


def parse_choices(lines: Iterable[str]) -> Choices:
    """The cost table (first one printed), graph searches and per-call choices of one log."""
    costs: dict[tuple[str, str, str], Cost] = {}
    graphs: list[GraphSearch] = []
    failed: list[int] = []
    paths: dict[tuple[str, float], None] = {}
    calls: dict[_CallKey, int] = {}
    algos: list[str] = []
    protos: list[str] = []
    tables = 0
    for line in lines:
        if m := g.SEARCH_FAILED.search(line):  # a WARN to 2.26
            failed.append(int(m.group(1)))
            continue
        if "NCCL INFO" not in line:
            continue
        if m := g.ALGO_HEAD.search(line):
            names = [a.strip() for a in m.group(1).split("|") if a.strip()]
            if names and names[0] == ALGORITHMS[0]:
                tables += 1  # a second communicator's table: keep the first (the world's)
            algos = [_canon(a, ALGORITHMS) for a in names]
        elif m := g.PROTO_HEAD.search(line):
            protos = [_canon(p.strip(), PROTOCOLS) for p in m.group(1).split("|") if p.strip()]
        elif (m := g.COST_ROW.search(line)) and m.group(1) in OP_OF and algos and tables <= 1:
            cells = g.COST_CELL.findall(m.group(2))
            per = len(protos) // max(1, len(algos))
            for i, (lat, bw) in enumerate(cells):
                if per == 0 or i // per >= len(algos) or i >= len(protos):
                    break
                cell = (OP_OF[m.group(1)], algos[i // per], protos[i])
                costs.setdefault(cell, Cost(*cell, float(lat), float(bw)))
        elif m := g.GPU_PATHS.search(line):
            for _, bw, kind in g.PATH_TO_GPU.findall(m["rest"]):
                if kind != "LOC":  # the GPU itself
                    paths[(kind, float(bw))] = None
        elif m := g.PATTERN.search(line):
            p, cross, nch, bi, be, ti, te, same = m.groups()
            name = PATTERNS.get(int(p), p)
            graphs.append(GraphSearch(name, int(cross), int(nch), float(bi), float(be), ti, te, int(p), int(same)))
        elif m := g.CALL_NEW.search(line):
            op, size, algo, proto, lo, hi = m.groups()
            call: _CallKey = (
                OP_OF.get(op, op),
                int(size),
                _canon(algo, ALGORITHMS),
                _canon(proto, PROTOCOLS),
                int(lo),
                int(hi),
            )
            calls[call] = calls.get(call, 0) + 1
        elif m := g.CALL_OLD.search(line):
            op, size, algo, proto, _ = m.groups()
            old: _CallKey = (
                OP_OF.get(op or "", op or "?"),
                int(size),
                _index(algo, ALGORITHMS),
                _index(proto, PROTOCOLS),
                None,
                None,
            )
            calls[old] = calls.get(old, 0) + 1
    return Choices(
        costs=tuple(costs.values()),
        graphs=tuple(graphs),
        calls=tuple(Choice(*k, calls=n) for k, n in calls.items()),
        failed=tuple(dict.fromkeys(failed)),
        paths=tuple(paths),
    )


def traffic_bytes(op: str, logged_bytes: int, nranks: int) -> int:
    """The size nccl-tests (and NCCL's time model, ncclFuncMaxSendRecvCount) counts for a call
    NCCL logged as ``logged_bytes`` (count x type size: one rank's part for AllGather and
    ReduceScatter)."""
    return logged_bytes * nranks if op in ("all_gather", "reduce_scatter") else logged_bytes


def predicted_busbw(cost: Cost, size_bytes: int, bus_factor: float) -> float | None:
    """NCCL's own prediction of busbw at ``size_bytes``: its time model (tuning.cc
    ncclTopoGetAlgoTime: latency + bytes / (1000 x bandwidth), in us) turned into nccl-tests'
    busbw. None where the table disables the cell (bandwidth 0). The tree correction factors
    for small all_reduce are left out: they matter below 512 MiB only for Tree."""
    if cost.algbw_gbps <= 0 or size_bytes <= 0:
        return None
    time_us = cost.latency_us + size_bytes / (1000.0 * cost.algbw_gbps)
    return size_bytes / time_us / 1e3 * bus_factor
