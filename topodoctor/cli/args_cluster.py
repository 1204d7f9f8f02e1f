"""The options of the commands that read what other nodes and jobs left (fleet, job, nccl-log):
one frozen object per command, each field one option (cli/options.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topodoctor.cli.options import argument, fail_level, fmt, option, output, strict, timeout


@dataclass(frozen=True)
class FleetArgs:
    """``fleet``: the results to roll up, how to compare nodes, and the output."""

    results: tuple[Path, ...] = argument("RESULT...", kind=Path, many=True)
    fmt: str = fmt(
        ("text", "json", "drain", "scontrol", "prometheus"),
        "text; json; drain (NODE REASON lines); scontrol (scontrol update lines); prometheus.",
    )
    output: Path | None = output("Write there (atomically) instead of to stdout.")
    tolerance: float = option(
        "--tolerance",
        default=0.05,
        metavar="SHARE",
        kind=float,
        minimum=0.0,
        maximum=0.9,
        help="A figure this share below the fleet median may be slow.",
    )
    z_threshold: float = option(
        "--z",
        default=3.5,
        metavar="Z",
        kind=float,
        minimum=0.0,
        help="... and this many robust standard deviations (MAD) below it.",
    )
    min_nodes: int = option(
        "--min-nodes",
        default=3,
        metavar="N",
        kind=int,
        minimum=3,
        help="Compare a figure only when this many nodes measured it.",
    )
    fail_level: str = fail_level("Lowest severity of a node's finding that drains it.")
    systemic_share: float = option(
        "--systemic-share",
        default=0.5,
        metavar="SHARE",
        kind=float,
        minimum=0.0,
        maximum=1.0,
        help="A failing finding on more than this share of the nodes is fleet-wide: reported, drains no node.",
    )
    name_from: str = option(
        "--name-from",
        default="host",
        metavar="FROM",
        choices=("host", "file"),
        help="Name nodes by the host in each result, or by the file name.",
    )
    timeout: float = timeout(60.0)


@dataclass(frozen=True)
class JobArgs:
    """``job``: what the job left, where to ask, and how to judge it."""

    dumps: tuple[Path, ...] = argument("DUMP...", default=(), kind=Path, many=True)
    rank_map: tuple[Path, ...] = option(
        "--map",
        default=(),
        metavar="FILE",
        kind=Path,
        many=True,
        help="Rank map: 'RANK HOST [LOCAL_RANK [GPU [NIC]]]' lines, JSON, or a collectives result.",
    )
    results: tuple[Path, ...] = option(
        "--results",
        default=(),
        metavar="PATH",
        kind=Path,
        many=True,
        help="The nodes' topodoctor results (files or directories).",
    )
    host_from_dir: bool = option(
        "--host-from-dir",
        default=False,
        kind=bool,
        help="A rank the map does not place ran on the host its dump's directory is named after.",
    )
    world_size: int | None = option(
        "--world-size",
        default=None,
        metavar="N",
        kind=int,
        minimum=1,
        help="Ranks the job had (finds ranks without a dump).",
    )
    ras: str | None = option(
        "--ras", default=None, metavar="HOST:PORT", help="Ask a live job's NCCL RAS (localhost:28028)."
    )
    ras_file: Path | None = option("--ras-file", default=None, metavar="FILE", kind=Path, help="A saved RAS answer.")
    ras_json: bool = option("--ras-json", default=False, kind=bool, help="Ask RAS for JSON (NCCL 2.28.7+).")
    live: bool = option("--live", default=False, kind=bool, help="Sample this node's GPUs through NVML.")
    live_seconds: float = option(
        "--live-seconds",
        default=3.0,
        metavar="SECONDS",
        kind=float,
        minimum=0.2,
        maximum=60.0,
        help="How long to sample.",
    )
    record_live: Path | None = option(
        "--record-live", default=None, metavar="FILE", kind=Path, help="Also write the NVML sampling to FILE."
    )
    replay_live: Path | None = option(
        "--replay-live", default=None, metavar="FILE", kind=Path, help="Judge a recorded sampling instead."
    )
    host: str = option(
        "--host", default="", metavar="NAME", help="The name of this node, for --live (default: hostname)."
    )
    last: int = option(
        "--last", default=200, metavar="N", kind=int, minimum=2, help="Collectives the straggler ranking looks at."
    )
    late_ms: float = option(
        "--late-ms", default=5.0, metavar="MS", kind=float, minimum=0.0, help="Lateness that counts, in ms."
    )
    fmt: str = fmt(("text", "json", "line"), "text, json or line.")
    fail_level: str = fail_level()
    strict: bool = strict()
    timeout: float = timeout(60.0)


@dataclass(frozen=True)
class NcclLogArgs:
    """``nccl-log``: the logs to read, and how to judge them."""

    paths: tuple[Path, ...] = argument("FILE...", kind=Path, many=True)
    fmt: str = fmt(("text", "json"), "text, or json.")
    timeout: float = timeout(60.0)
    fail_level: str = fail_level()
    strict: bool = strict()
