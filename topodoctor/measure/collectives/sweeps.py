"""Sweeps over runs: each op under each NCCL algorithm (``collectives --algo``), and the same ops
on growing subsets of the GPUs (``collectives --scaling``). The runs are the caller's (a function
that measures a plan with extra environment: spawned worlds, or process groups of a launcher's
world, see ``joined_runs``); here they are chosen, and their results compared. No torch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from topodoctor.core.stats import median
from topodoctor.core.text import human_size
from topodoctor.model.collective_ops import Plan
from topodoctor.model.collectives import CollectivesResult
from topodoctor.model.snapshot import HostSnapshot

Run = Callable[[Plan, dict[str, str]], CollectivesResult]
# tuning.cc (ncclTopoTuneModel): which algorithms each function may use at all; p2p ops have none
ALGO_OPS = {
    "ring": ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"),
    "tree": ("all_reduce",),
    "nvls": ("all_reduce", "all_gather", "reduce_scatter"),
    "nvlstree": ("all_reduce",),
    "collnetdirect": ("all_reduce", "all_gather", "reduce_scatter"),
    "collnetchain": ("all_reduce",),
    "pat": ("all_gather", "reduce_scatter"),
}
TUNING_SUBSYS = "INIT,GRAPH,ENV,TUNING,P2P,SHM,NET"  # the default run's log says what NCCL chose
CROSSOVER_GAIN = 0.05  # without a measured run-to-run spread: how much faster another algorithm must be
# NCCL's names of the functions in NCCL_ALGO's per-function form ("allreduce:tree", NCCL 2.24+)
NCCL_FUNCTION = {
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
}
REPEAT = "default again"  # the label of the default run made twice, when no pair measured the spread
SLOW_SUBSET = 0.85  # a subset under this share of its peers' median busbw is named


@dataclass(frozen=True)
class AlgoCell:
    """One op at one size under one algorithm (``default``: NCCL left to choose)."""

    op: str
    size_bytes: int
    algorithm: str
    busbw_gbps: float | None  # None: the row failed or is missing
    nccl_choice: str = ""  # the default run: what NCCL's log says it chose ("Ring/Simple"), if logged


@dataclass(frozen=True)
class Crossover:
    """A size where an algorithm other than NCCL's choice was faster, and by how much."""

    op: str
    size_bytes: int
    default: str  # NCCL's choice there (or "default" when its log did not say)
    faster: str
    gain: float  # faster / default - 1


@dataclass(frozen=True)
class Spread:
    """How much two runs of one configuration differ, per op and size: |a - b| / their mean."""

    pairs: tuple[tuple[str, int, float], ...]  # (op, size, relative difference)
    source: str  # which two runs: "the default run and the forced ring run (NCCL's own choice)"

    def at(self, op: str, size: int) -> float | None:
        """The threshold another algorithm must beat at this op and size: the spread measured
        there, or the op's median spread where that is larger (one pair is one sample)."""
        mine = [d for o, s, d in self.pairs if o == op]
        if not mine:
            return None
        here = next((d for o, s, d in self.pairs if o == op and s == size), 0.0)
        return max(here, median(mine))


@dataclass(frozen=True)
class Winner:
    """An algorithm that beat NCCL's choice by more than the run-to-run spread: at which sizes,
    by how much, and the variable that selects it."""

    op: str
    algorithm: str
    default: str  # what NCCL chose there
    sizes: tuple[int, ...]
    gains: tuple[float, ...]  # faster / default - 1, per size
    threshold: float  # the largest spread it had to beat at those sizes
    variable: str  # NCCL_ALGO="allreduce:tree"
    lost_at: tuple[int, ...] = ()  # sizes where NCCL's choice was as fast or faster (the variable applies there too)


@dataclass(frozen=True)
class AlgoSweep:
    """``--algo``: each op and size under each NCCL algorithm, the sizes where another beat NCCL's choice
    by more than the run-to-run spread (measured, see ``Spread``), and the algorithms whose runs failed."""

    algorithms: tuple[str, ...]
    cells: tuple[AlgoCell, ...]
    crossovers: tuple[Crossover, ...]
    failures: tuple[str, ...]  # "tree: NCCL refused ..." for an algorithm whose run failed
    spread: Spread | None = None  # None: not measured (``fallback_gain`` stood in for it)
    winners: tuple[Winner, ...] = ()
    fallback_gain: float = CROSSOVER_GAIN


def algo_runs(plan: Plan, algorithms: Sequence[str]) -> list[tuple[str, Plan, dict[str, str]]]:
    """(label, plan, environment) of each run of ``--algo``: the default one (with NCCL's TUNING
    log), then one per algorithm with NCCL_ALGO set, on the ops that algorithm serves (none: no run)."""
    out = [("default", plan, {"NCCL_DEBUG_SUBSYS": TUNING_SUBSYS})]
    for algo in algorithms:
        ops = tuple(op for op in plan.ops if op in ALGO_OPS.get(algo.lower(), ()))
        if ops:
            out.append((algo, replace(plan, ops=ops), {"NCCL_ALGO": algo}))
    return out


def algo_sweep(plan: Plan, algorithms: Sequence[str], run: Run, repeat: bool = True) -> AlgoSweep:
    """Each of ``algo_runs``, measured by ``run``; NCCL's choice marked, the run-to-run spread
    measured, the crossovers and winners named. The spread comes from the default run and the
    forced run of the algorithm NCCL chose (the same configuration twice); where NCCL's choice
    was not among those forced, and ``repeat``, the default run is made a second time."""
    cells: list[AlgoCell] = []
    failures: list[str] = []
    for label, p, env in algo_runs(plan, algorithms):
        res = run(p, env)
        failures += [f"{label}: {f.message}" for f in res.failures]
        cells += [_cell(res, op, size, label) for op in p.ops for size in p.sizes]
    spread = _spread(cells)
    if spread is None and repeat and any(c.algorithm == "default" and c.busbw_gbps for c in cells):
        again = run(plan, {"NCCL_DEBUG_SUBSYS": TUNING_SUBSYS})
        failures += [f"{REPEAT}: {f.message}" for f in again.failures]
        twice = [_cell(again, op, size, REPEAT) for op in plan.ops for size in plan.sizes]
        spread = _spread_of(cells, twice, "two runs of the default (NCCL's choice was not among those forced)")
    crossovers = _crossovers(cells, spread)
    return AlgoSweep(
        tuple(algorithms),
        tuple(cells),
        tuple(crossovers),
        tuple(failures),
        spread,
        tuple(_winners(cells, crossovers, spread)),
    )


def _cell(res: CollectivesResult, op: str, size: int, algo: str) -> AlgoCell:
    row = res.row(op, size)  # type: ignore[arg-type]
    bw = row.best.busbw_gbps if row is not None and row.best is not None else None
    choice = res.nccl.choice(op, size) if algo == "default" and res.nccl is not None else None
    return AlgoCell(op, size, algo, bw, f"{choice.algorithm}/{choice.protocol}" if choice else "")


def _chosen(c: AlgoCell) -> str:
    return c.nccl_choice.split("/")[0] if c.nccl_choice else "default"


def _spread(cells: Sequence[AlgoCell]) -> Spread | None:
    """The default run against the forced run of what NCCL chose, wherever it chose one of them."""
    pairs: list[tuple[str, int, float]] = []
    used: set[str] = set()
    for d in (c for c in cells if c.algorithm == "default" and c.busbw_gbps):
        same = next(
            (
                c
                for c in cells
                if (c.op, c.size_bytes) == (d.op, d.size_bytes) and c.algorithm.lower() == _chosen(d).lower()
            ),
            None,
        )
        if same is not None and same.busbw_gbps and d.busbw_gbps:
            pairs.append(
                (
                    d.op,
                    d.size_bytes,
                    round(abs(same.busbw_gbps - d.busbw_gbps) * 2 / (same.busbw_gbps + d.busbw_gbps), 4),
                )
            )
            used.add(same.algorithm)
    if not pairs:
        return None
    names = ", ".join(sorted(used))
    return Spread(tuple(pairs), f"the default run against the forced {names} run (NCCL's own choice)")


def _spread_of(cells: Sequence[AlgoCell], twice: Sequence[AlgoCell], source: str) -> Spread | None:
    first = {(c.op, c.size_bytes): c.busbw_gbps for c in cells if c.algorithm == "default" and c.busbw_gbps}
    pairs = [
        (c.op, c.size_bytes, round(abs(c.busbw_gbps - a) * 2 / (c.busbw_gbps + a), 4))
        for c in twice
        if c.busbw_gbps and (a := first.get((c.op, c.size_bytes)))
    ]
    return Spread(tuple(pairs), source) if pairs else None


def _crossovers(cells: Sequence[AlgoCell], spread: Spread | None) -> list[Crossover]:
    out: list[Crossover] = []
    keys = dict.fromkeys((c.op, c.size_bytes) for c in cells)
    for op, size in keys:
        here = [c for c in cells if c.op == op and c.size_bytes == size and c.busbw_gbps is not None]
        default = next((c for c in here if c.algorithm == "default"), None)
        forced = [c for c in here if c.algorithm != "default"]
        if default is None or not forced or not default.busbw_gbps:
            continue
        best = max(forced, key=lambda c: c.busbw_gbps or 0.0)
        gain = (best.busbw_gbps or 0.0) / default.busbw_gbps - 1
        chosen = _chosen(default)
        bar = spread.at(op, size) if spread is not None else None
        if gain > (CROSSOVER_GAIN if bar is None else bar) and best.algorithm.lower() != chosen.lower():
            out.append(Crossover(op, size, chosen, best.algorithm, round(gain, 3)))
    return out


def _winners(cells: Sequence[AlgoCell], crossovers: Sequence[Crossover], spread: Spread | None) -> list[Winner]:
    """Per op and winning algorithm: the sizes it won, and the variable that selects it."""
    out: list[Winner] = []
    for op, algo in dict.fromkeys((x.op, x.faster) for x in crossovers):
        won = [x for x in crossovers if x.op == op and x.faster == algo]
        sizes = tuple(x.size_bytes for x in won)
        every = sorted({c.size_bytes for c in cells if c.op == op})
        bar = max((spread.at(op, s) or 0.0 for s in sizes), default=0.0) if spread is not None else CROSSOVER_GAIN
        name = NCCL_FUNCTION.get(op, op.replace("_", ""))
        out.append(
            Winner(
                op,
                algo,
                won[0].default,
                sizes,
                tuple(x.gain for x in won),
                round(bar, 4),
                f'NCCL_ALGO="{name}:{algo.lower()}"',
                tuple(s for s in every if s not in sizes),
            )
        )
    return out


@dataclass(frozen=True)
class SubsetRun:
    """One run of ``--scaling`` on a subset of the GPUs: busbw per op and size, and what failed."""

    gpus: tuple[int, ...]
    busbw: tuple[tuple[str, int, float | None], ...]  # (op, size, busbw)
    failures: tuple[str, ...]


@dataclass(frozen=True)
class ScalingSweep:
    """``--scaling``: the runs on growing subsets, busbw relative to the 2-GPU runs, and the slow subsets."""

    runs: tuple[SubsetRun, ...]
    efficiency: tuple[tuple[int, str, int, float], ...]  # (GPUs, op, size, median busbw / 2-GPU median)
    slow: tuple[str, ...]  # "GPUs 2,3: all_reduce 1G 120 GB/s, 0.45 of its peers' 270"
    unit: str = "GPUs"  # what a group holds: GPUs (spawned, one rank each) or a launcher's ranks


def subsets(snap: HostSnapshot | None, n: int) -> list[tuple[int, ...]]:
    """Disjoint groups of 2, 4, ... and all ``n`` GPUs; GPUs that share a PCIe switch, then a
    socket, are grouped first (a slow link then shows in one group, not in all)."""
    order = list(range(n))
    if snap is not None:
        live = [g for g in snap.gpus if g.lost is None][:n]

        def place(g: object) -> tuple[int, str, int]:
            numa = getattr(g, "sysfs_numa_node", -1)
            path = getattr(g, "pcie_path", ())
            # the path ends GPU, its switch's downstream port, the switch's upstream port
            parent = path[-3] if isinstance(path, tuple) and len(path) >= 3 else ""
            return (numa if isinstance(numa, int) else -1, parent, int(getattr(g, "index", 0)))

        order = [g.index for g in sorted(live, key=place)]
    out: list[tuple[int, ...]] = []
    k = 2
    while k < len(order):
        out += [tuple(sorted(order[i : i + k])) for i in range(0, len(order) - k + 1, k)]
        k *= 2
    if len(order) >= 2:
        out.append(tuple(sorted(order)))
    return out


def scaling_sweep(
    plan: Plan,
    groups: Sequence[tuple[int, ...]],
    run: Callable[[Plan, tuple[int, ...]], CollectivesResult],
    unit: str = "GPUs",
) -> ScalingSweep:
    """Each group's run; per size the median busbw of each group size against the 2-GPU one,
    and any group under SLOW_SUBSET of its same-size peers' median at its largest size."""
    runs: list[SubsetRun] = []
    for gpus in groups:
        res = run(plan, gpus)
        figures = []
        for op in plan.ops:
            for size in plan.sizes:
                row = res.row(op, size)
                figures.append((op, size, row.best.busbw_gbps if row is not None and row.best is not None else None))
        runs.append(SubsetRun(gpus, tuple(figures), tuple(f.message for f in res.failures)))
    return ScalingSweep(tuple(runs), tuple(_efficiency(runs, plan)), tuple(_slow(runs, plan, unit)), unit)


def _median(runs: Sequence[SubsetRun], k: int, op: str, size: int) -> float | None:
    got = [bw for r in runs if len(r.gpus) == k for o, s, bw in r.busbw if o == op and s == size and bw]
    return median(got) if got else None


def _efficiency(runs: Sequence[SubsetRun], plan: Plan) -> list[tuple[int, str, int, float]]:
    out: list[tuple[int, str, int, float]] = []
    for k in sorted({len(r.gpus) for r in runs}):
        for op in plan.ops:
            for size in plan.sizes:
                base, here = _median(runs, 2, op, size), _median(runs, k, op, size)
                if base and here:
                    out.append((k, op, size, round(here / base, 3)))
    return out


def _slow(runs: Sequence[SubsetRun], plan: Plan, unit: str) -> list[str]:
    out = []
    size = max(plan.sizes)
    for r in runs:
        peers = [p for p in runs if len(p.gpus) == len(r.gpus) and p is not r]
        if not peers:
            continue
        for op, s, bw in r.busbw:
            if s != size or bw is None:
                continue
            med = _median(peers, len(r.gpus), op, size)
            if med and bw < SLOW_SUBSET * med:
                gpus = ",".join(map(str, r.gpus))
                out.append(
                    f"{unit} {gpus}: {op} at {human_size(size)} {bw:.1f} GB/s, {bw / med:.2f} of its peers' {med:.1f}"
                )
    return out


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep inside a launcher's world: ``plan`` on a new process group of
    ``ranks`` (global ranks), with ``env`` set on every rank while its communicator is made."""

    kind: Literal["algo", "scaling"]
    label: str  # "default" or the algorithm; the ranks "0,1" for scaling
    ranks: tuple[int, ...]
    plan: Plan
    env: dict[str, str]


# NCCL reads these once per process (debug.cc's init), not per communicator: a launcher's ranks
# set them before they join, for every run at once.
PROCESS_ENV = ("NCCL_DEBUG_SUBSYS",)


def joined_runs(plan: Plan, algorithms: Sequence[str] | None, scaling: bool, world_size: int) -> list[SweepRun]:
    """The runs of ``--algo`` (on every rank) then ``--scaling`` (on each group of ``subsets``,
    consecutive ranks: a launcher numbers a node's ranks together) in a launcher's world, in
    the order ``algo_sweep`` and ``scaling_sweep`` ask for them."""
    every = tuple(range(world_size))
    out = [
        SweepRun("algo", label, every, p, {k: v for k, v in env.items() if k not in PROCESS_ENV})
        for label, p, env in (algo_runs(plan, algorithms) if algorithms is not None else [])
    ]
    if scaling:
        out += [SweepRun("scaling", ",".join(map(str, g)), g, plan, {}) for g in subsets(None, world_size)]
    return out
