"""CollectivesResult: what a collectives run measured, as plain data (JSON round-trip).

The runner measures and never judges; the rules (TD0xx) read this. A run of nccl-tests
(its ``-J`` JSON) loads into the same shape, so its numbers are judged by the same rules.
Times are microseconds per op, bandwidths GB/s (1e9 bytes per second).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from topodoctor.core import codec, fileio
from topodoctor.core.errors import InputError
from topodoctor.model.collective_ops import BINARY_TO_OP, SPECS, Op
from topodoctor.model.copies import Activity
from topodoctor.model.during import RunSampling

# NCCL's account has a module of its own; its names stay importable from here, where the result carries it
from topodoctor.model.nccl_account import Connection as Connection
from topodoctor.model.nccl_account import NcclAccount as NcclAccount
from topodoctor.model.nccl_account import NcclChoice as NcclChoice
from topodoctor.model.pairwise import NodeVerdict, PairOutcome, Round
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.model.stamp import Stamped

COLLECTIVES_SCHEMA_VERSION = 1
FailureKind = Literal["hang", "error", "oom", "died", "join"]


@dataclass(frozen=True)
class RankInfo:
    """One rank of a collectives run: where it ran (host, node, device) and the NCCL variables it had."""

    rank: int
    local_rank: int
    host: str
    pid: int
    device: int | None  # CUDA ordinal in the rank's process; None on the CPU (gloo)
    bus_id: str | None  # PCI bus id of that device, to find it in the snapshot
    device_name: str = ""
    node: str = ""  # the node as NCCL tells hosts apart: NCCL_HOSTID, else the host name
    node_rank: int | None = None  # the launcher's index of the node (torchrun GROUP_RANK, SLURM_NODEID)
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* / TORCH_NCCL_* this rank ran with


@dataclass(frozen=True)
class Timing:
    """One column of a row (out-of-place or in-place)."""

    time_us: float  # the mean over ranks of each rank's time per op (nccl-tests' average)
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None  # elements that differed from the expected result, summed over ranks; None = not checked
    rank_time_us: tuple[float, ...] = ()  # each rank's own time per op, by rank
    rank_wrong: tuple[int, ...] = ()  # each rank's wrong elements, by rank


@dataclass(frozen=True)
class Row:
    """One line of the nccl-tests table: an op at one size, timed out of place and in place."""

    op: Op
    size_bytes: int  # max(send, recv) bytes, as nccl-tests prints it
    count: int  # elements per call
    dtype: str
    redop: str
    root: int
    out_of_place: Timing | None
    in_place: Timing | None

    def timings(self) -> list[tuple[str, Timing]]:
        """The timings that were taken, each with its label (out-of-place, in-place)."""
        return [(p, t) for p, t in (("out-of-place", self.out_of_place), ("in-place", self.in_place)) if t is not None]

    @property
    def best(self) -> Timing | None:
        """The faster column: what the op can do at this size."""
        ts = [t for _, t in self.timings()]
        return max(ts, key=lambda t: t.busbw_gbps) if ts else None


@dataclass(frozen=True)
class Failure:
    """An op that did not finish: hung (killed after its timeout), failed, or out of memory."""

    kind: FailureKind
    op: Op | None
    size_bytes: int | None
    message: str
    rank: int | None = None


@dataclass(frozen=True)
class SpanRows:
    """The plan's ops on a part of the world: one node's ranks (intra), one rail across nodes
    (inter), or one node's GPUs through its own NICs, in processes of their own with NCCL's
    P2P and SHM transports off (nic)."""

    scope: Literal["intra", "inter", "nic"]
    name: str  # the node, or "local rank K" for a rail
    nodes: tuple[str, ...]
    ranks: tuple[int, ...]  # global ranks, in subgroup order (nic: none, the run had ranks of its own)
    rows: tuple[Row, ...]
    account: str = ""  # NCCL's account of a nic run; why it has no rows when it failed


@dataclass(frozen=True)
class PairwiseReport:
    """The pairwise finder's account: its rounds, every pair's outcome, one verdict per node."""

    op: str
    size_bytes: int
    tolerance: float
    reference_gbps: float | None  # a healthy pair's busbw: the expectation, else round one's median
    expected_gbps: float | None  # from the NICs, when the probe found them
    rounds: tuple[Round, ...]
    outcomes: tuple[tuple[int, PairOutcome], ...]  # (round, outcome)
    verdicts: tuple[NodeVerdict, ...]


@dataclass(frozen=True)
class CollectivesResult(Stamped):
    """What a collectives run measured (ours or nccl-tests'): the ranks, the rows, what failed."""

    kind: Literal["collectives"]
    schema_version: int
    source: Literal["topodoctor", "nccl-tests"]
    host: str
    backend: str  # nccl, gloo
    world_size: int
    torch_version: str
    nccl_version: str
    ranks: tuple[RankInfo, ...]
    rows: tuple[Row, ...]
    failures: tuple[Failure, ...]
    wall_s: float
    settings: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* / TORCH_NCCL_* the ranks ran with
    activity: tuple[Activity, ...] = ()  # what else ran on the GPUs when the run started
    nccl: NcclAccount | None = None
    snapshot: HostSnapshot | None = None  # the host as probed: --from needs no GPU
    spans: tuple[SpanRows, ...] = ()  # intra- and inter-node figures of a world that spans nodes
    pairwise: PairwiseReport | None = None
    during: RunSampling | None = None  # NVML while the ranks ran; None: not sampled (older results, nccl-tests)

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes the ranks ran on, in order of first appearance."""
        return tuple(dict.fromkeys(r.node or r.host for r in self.ranks))

    def row(self, op: Op, size_bytes: int) -> Row | None:
        """The row of this op at this size, or None when it was not measured."""
        return next((r for r in self.rows if r.op == op and r.size_bytes == size_bytes), None)

    def largest(self, op: Op) -> Row | None:
        """The op's row at its largest size measured: where busbw is judged."""
        rows = [r for r in self.rows if r.op == op and r.best is not None]
        return max(rows, key=lambda r: r.size_bytes) if rows else None


def result_to_json(r: CollectivesResult) -> str:
    """The result as JSON text, as ``collectives -o`` writes it."""
    return codec.dumps(r)


def load_result(path: Path | str) -> CollectivesResult:
    """A topodoctor collectives result, or nccl-tests' own ``-J`` JSON (told apart by shape)."""
    data = fileio.read_json(path, "collectives result")
    if isinstance(data, dict) and "results" in data and "config" in data and "kind" not in data:
        return from_nccl_tests(data, str(path))
    codec.check_header(data, "collectives", COLLECTIVES_SCHEMA_VERSION, f"collectives result {path}")
    return codec.from_jsonable(CollectivesResult, data, f"collectives result {path}")


def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"{what}: expected a number, got {str(v)[:40]!r}")
    return float(v)


def _timing(col: Any, what: str) -> Timing | None:
    if col is None:
        return None
    if not isinstance(col, dict):
        raise InputError(f"{what}: expected an object")
    wrong = col.get("nwrong")
    time_us = col.get("time", col.get("cpu_time"))
    return Timing(
        time_us=_num(time_us, f"{what}.time"),
        algbw_gbps=_num(col.get("alg_bw"), f"{what}.alg_bw"),
        busbw_gbps=_num(col.get("bus_bw"), f"{what}.bus_bw"),
        wrong=None if wrong is None else int(_num(wrong, f"{what}.nwrong")),
    )


def from_nccl_tests(doc: dict[str, Any], what: str = "nccl-tests JSON") -> CollectivesResult:
    """nccl-tests' ``-J`` output (JSON version 3) as a CollectivesResult."""
    args = doc.get("args") or []
    prog = Path(str(args[0])).name if args else ""
    op = BINARY_TO_OP.get(prog.removesuffix("_perf"))
    if op is None:
        raise InputError(f"{what}: cannot tell the op from the program name {prog!r}")
    config = doc.get("config") or {}
    # nccl-tests 2.19 writes the rank lines inside "config"; older ones at the top level
    devices = (config.get("devices") if isinstance(config, dict) else None) or doc.get("devices") or []
    if not isinstance(config, dict) or not isinstance(devices, list):
        raise InputError(f"{what}: config or devices is malformed")
    # Without MPI only rank 0's line is kept; ranks = GPUs per thread x threads x processes.
    per_proc = int(_num(config.get("ngpus", 1), f"{what}.config.ngpus")) * int(
        _num(config.get("nthreads", 1), f"{what}.config.nthreads")
    )
    nranks = per_proc * max(len(devices), 1)
    rows = []
    for i, r in enumerate(doc.get("results") or []):
        where = f"{what}: results[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"{where}: expected an object")
        root = str(r.get("root", "-1")).strip()
        rows.append(
            Row(
                op=op,
                size_bytes=int(_num(r.get("size"), f"{where}.size")),
                count=int(_num(r.get("count"), f"{where}.count")),
                dtype=str(r.get("type", "")),
                redop=str(r.get("redop", SPECS[op].redop)),
                root=int(root) if root.lstrip("-").isdigit() else -1,
                out_of_place=_timing(r.get("out_of_place"), f"{where}.out_of_place"),
                in_place=_timing(r.get("in_place"), f"{where}.in_place"),
            )
        )
    ranks = tuple(
        RankInfo(
            rank=int(d.get("rank", i)),
            local_rank=int(d.get("device", i)),
            host=str(d.get("hostname", "")),
            pid=int(d.get("pid", 0)),
            device=int(d.get("device", i)),
            bus_id=f"{d['device_hex']}.0".lower() if str(d.get("device_hex", "")).count(":") == 2 else None,
            device_name=str(d.get("device_info", "")),
        )
        for i, d in enumerate(devices)
        if isinstance(d, dict)
    )
    if len(ranks) == 1 and per_proc > 1:
        # One process driving several GPUs (-g N): only its first rank line is kept; the
        # others are the next CUDA devices of the same process.
        r0 = ranks[0]
        extra = tuple(
            RankInfo(i, (r0.device or 0) + i, r0.host, r0.pid, (r0.device or 0) + i, None, r0.device_name)
            for i in range(1, per_proc)
        )
        ranks = ranks + extra
    env = {}
    for e in doc.get("env") or []:
        name, eq, value = str(e).partition("=")
        if eq and name.startswith(("NCCL_", "CUDA_VISIBLE")):
            env[name] = value
    return CollectivesResult(
        kind="collectives",
        schema_version=COLLECTIVES_SCHEMA_VERSION,
        source="nccl-tests",
        host=ranks[0].host if ranks else "",
        backend="nccl",
        world_size=nranks,
        torch_version="",
        nccl_version=str(doc.get("nccl_version", "")),
        ranks=ranks,
        rows=tuple(rows),
        failures=(),
        wall_s=0.0,
        settings={
            "program": prog,
            "iters": config.get("iterations"),
            "warmup_iters": config.get("warmup_iters"),
            "check": bool(config.get("validation")),
        },
        env=env,
    )


def merge(results: list[CollectivesResult]) -> CollectivesResult:
    """Several nccl-tests runs (one file per op) as one result."""
    if not results:
        raise InputError("no collectives results to merge")
    first = results[0]
    rows = tuple(r for res in results for r in res.rows)
    env: dict[str, str] = {}
    for res in results:
        env.update(res.env)
    from dataclasses import replace

    return replace(first, rows=rows, env=env, failures=tuple(f for res in results for f in res.failures))
