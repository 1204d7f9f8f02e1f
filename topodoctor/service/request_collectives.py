"""``collectives``'s request: every option of the command, declared once by the spec
(core/options.py). ``collectives`` does several things, and its request is one part for each
(what to run and its limits; judge saved results; predict; compare algorithms and GPU counts;
small messages; across nodes) beside its outputs: each part is a heading of its help, and each of
cli/collectives.py's parts reads its own. The command line's options and the Python API's keywords
(``topodoctor.collectives``) both build it; the service makes the run it asks for
(service/collective_runs.py ``run_of``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, get_args

from topodoctor.core.options import group, option
from topodoctor.core.shared_options import MEASURE_FORMATS, fail_level, fmt, metrics, output, replay, strict, timeout
from topodoctor.core.sizes import MAX_BYTES
from topodoctor.core.text import human_size
from topodoctor.model.findings import Severity, fail_from

SIZE_DEFAULT = "8:1G"
# every rank is a process of its own that loads torch: a count past any host's GPUs is a typo, never a fork of thousands
MAX_LOCAL_RANKS = 64
Backend = Literal["nccl", "gloo"]  # --backend's choices, and the Python API's type  # collectives --size


@dataclass(frozen=True)
class RunOptions:
    """What each rank runs: the ops, sizes and iterations, on which backend and how many ranks."""

    HEADING: ClassVar[str] = "What to run"
    op: tuple[str, ...] = option(
        "--op",
        default=(),
        metavar="OPS",
        many=True,
        help="Ops to run (repeatable or comma-separated): all_reduce, all_gather, "
        "reduce_scatter, all_to_all, broadcast, reduce, sendrecv. Default: all.",
    )
    size: str = option(
        "--size",
        "-s",
        default=SIZE_DEFAULT,
        metavar="SIZES",
        help="Sizes: a sweep MIN:MAX (by --step-factor), a list, or both: 8:1G, 64M,1G "
        f"(each at most {human_size(MAX_BYTES)}).",
    )
    step_factor: int = option("--step-factor", default=2, metavar="N", kind=int, minimum=2, help="Sweep step factor.")
    iters: int = option("--iters", "-n", default=20, metavar="N", kind=int, minimum=1, help="Timed iterations per row.")
    warmup: int = option(
        "--warmup", "-w", default=1, metavar="N", kind=int, minimum=0, help="Warm-up iterations per size."
    )
    no_check: bool = option("--no-check", default=False, kind=bool, help="Skip the data check (#wrong).")
    backend: str = option(
        "--backend",
        default="nccl",
        metavar="BACKEND",
        choices=get_args(Backend),
        help="nccl on GPUs; gloo runs the ranks on CPU.",
    )
    nprocs: int | None = option(
        "--nprocs",
        default=None,
        metavar="N",
        kind=int,
        minimum=1,
        maximum=MAX_LOCAL_RANKS,
        help="Local ranks to start (default: every visible GPU; 2 on gloo).",
    )


@dataclass(frozen=True)
class LimitOptions:
    """How long an op, the start and the whole command may take."""

    HEADING: ClassVar[str] = "Time limits"
    op_timeout: float = option(
        "--op-timeout",
        default=30.0,
        metavar="SECONDS",
        kind=float,
        minimum=1,
        help="Seconds one op at one size may take before it counts as hung.",
    )
    start_timeout: float = option(
        "--start-timeout",
        default=120.0,
        metavar="SECONDS",
        kind=float,
        minimum=1,
        help="Seconds for every rank to start and join.",
    )
    timeout: float = timeout(0)


@dataclass(frozen=True)
class JudgeOptions:
    """Judge saved results (ours, or nccl-tests'), against a host and what it should reach."""

    HEADING: ClassVar[str] = "Judge saved results, or predict"
    from_file: tuple[Path, ...] = option(
        "--from",
        default=(),
        metavar="FILE",
        kind=Path,
        many=True,
        help="Judge saved results instead of measuring: ours, or nccl-tests' -J JSON (repeatable: one file per op).",
    )
    replay: str | None = replay()
    bandwidth_file: Path | None = option(
        "--bandwidth",
        default=None,
        metavar="FILE",
        kind=Path,
        help="A bandwidth result of this host: busbw is judged against it.",
    )
    expect_busbw: float | None = option(
        "--expect-busbw",
        default=None,
        metavar="GBPS",
        kind=float,
        minimum=0,
        help="GB/s every op should reach at its largest size.",
    )


@dataclass(frozen=True)
class PredictOptions:
    """Predict the busbw the topology gives, running nothing."""

    HEADING: ClassVar[str] = "Judge saved results, or predict"
    predict: bool = option(
        "--predict",
        default=False,
        kind=bool,
        help="Run nothing: the busbw the topology gives each op at 1 GiB, and at each --size given (no GPU, no torch).",
    )
    predict_nodes: int = option(
        "--nodes",
        default=1,
        metavar="N",
        kind=int,
        minimum=1,
        help="With --predict: that many such nodes, joined by their NICs.",
    )


@dataclass(frozen=True)
class SweepOptions:
    """Compare NCCL's algorithms, or the ops on growing sets of GPUs."""

    HEADING: ClassVar[str] = "Compare algorithms and GPU counts"
    algo: str | None = option(
        "--algo",
        default=None,
        metavar="ALGOS",
        help="Each op under each of these NCCL algorithms (NCCL_ALGO per run: ring,tree,nvls,pat,...), "
        "beside NCCL's own choice; crossovers named.",
    )
    scaling: bool = option(
        "--scaling",
        default=False,
        kind=bool,
        help="The ops on 2, 4, ... N GPUs (nearest GPUs grouped first); under a launcher, on groups of its ranks.",
    )


@dataclass(frozen=True)
class LatencyOptions:
    """Small messages through each path between the GPUs."""

    HEADING: ClassVar[str] = "Small messages"
    latency: bool = option(
        "--latency",
        default=False,
        kind=bool,
        help="Small messages through each path between the GPUs: NCCL eager and in a CUDA graph, PyTorch "
        "symmetric memory, NVSHMEM (the nvshmem extra); p2p 1K,100K and all_reduce 1K,1M,100M, each path's "
        "speedup over eager NCCL, and the size where NCCL catches up.",
    )


@dataclass(frozen=True)
class NodesOptions:
    """Across nodes, under torchrun or srun: the pairs, the nodes expected, the NIC loopback."""

    HEADING: ClassVar[str] = "Across nodes (under torchrun or srun)"
    spawn: bool = option("--spawn", default=False, kind=bool, help="Start local ranks even under torchrun / srun.")
    pairwise: bool = option(
        "--pairwise",
        default=False,
        kind=bool,
        help="Across nodes: test the nodes in pairs and name a slow or stuck node.",
    )
    expect_nodes: str | None = option(
        "--expect-nodes",
        default=None,
        metavar="NODES",
        help="Nodes that should join (comma-separated): a missing one is named.",
    )
    pair_size: str = option("--pair-size", default="64M", metavar="SIZE", help="all_reduce size of each pair test.")
    pair_tolerance: float = option(
        "--pair-tolerance",
        default=0.1,
        metavar="SHARE",
        kind=float,
        minimum=0,
        maximum=1,
        help="A pair below (1 - this) of the reference is slow.",
    )
    pair_timeout: float = option(
        "--pair-timeout",
        default=20.0,
        metavar="SECONDS",
        kind=float,
        minimum=1,
        help="Seconds one pair test may take before it counts as hung.",
    )
    nic_loopback: bool = option(
        "--nic-loopback",
        default=False,
        kind=bool,
        help="Under a launcher: also each node's GPUs through its own NICs (P2P and SHM off).",
    )
    expect_pair_busbw: float | None = option(
        "--expect-pair-busbw",
        default=None,
        metavar="GBPS",
        kind=float,
        minimum=0,
        help="GB/s a healthy pair of nodes reaches.",
    )


@dataclass(frozen=True)
class CollectivesOutput:
    """What to print and write, and what fails the command."""

    HEADING: ClassVar[str] = "Output and verdict"
    fmt: str = fmt(MEASURE_FORMATS, "text (nccl-tests' table), json, or prometheus (textfile collector).")
    output: Path | None = output("Also save the result as JSON.")
    plot: Path | None = option(
        "--plot",
        default=None,
        metavar="FILE",
        kind=Path,
        help="Also draw busbw by size per op: .svg, or .png with the draw extra (resvg).",
    )
    metrics_file: Path | None = metrics()
    log_dir: Path | None = option(
        "--log-dir",
        default=None,
        metavar="DIR",
        kind=Path,
        help="Keep NCCL's per-rank INFO logs (and each rank's stderr) here.",
    )
    fail_level: str = fail_level()
    strict: bool = strict()


@dataclass(frozen=True)
class CollectivesRequest:
    """``collectives``: one part for each thing it does, and its outputs."""

    run: RunOptions = group(RunOptions)
    limits: LimitOptions = group(LimitOptions)
    judge: JudgeOptions = group(JudgeOptions)
    predict: PredictOptions = group(PredictOptions)
    sweep: SweepOptions = group(SweepOptions)
    latency: LatencyOptions = group(LatencyOptions)
    nodes: NodesOptions = group(NodesOptions)
    out: CollectivesOutput = group(CollectivesOutput)

    @property
    def fails_from(self) -> Severity:
        """The lowest severity that fails the command (--fail-level, or warning with --strict)."""
        return fail_from(self.out.fail_level, self.out.strict)
