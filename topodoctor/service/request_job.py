"""``job``'s request: every option of the command, declared once by the spec (core/options.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topodoctor.core.options import argument, option
from topodoctor.core.shared_options import config_file, fail_level, fmt, strict, timeout
from topodoctor.model.findings import Severity, fail_from


@dataclass(frozen=True)
class JobRequest:
    """``job``: what the job left, where to ask, and how to judge it. The command line's options
    build it; the service (service/job.py ``diagnose``) reads it as it is."""

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
        "--last",
        default=200,
        metavar="N",
        kind=int,
        minimum=2,
        setting=True,
        help="Collectives the straggler ranking looks at.",
    )
    late_ms: float = option(
        "--late-ms",
        default=5.0,
        metavar="MS",
        kind=float,
        minimum=0.0,
        setting=True,
        help="Lateness that counts, in ms.",
    )
    fmt: str = fmt(("text", "json", "line"), "text, json or line.")
    fail_level: str = fail_level(setting=True)
    strict: bool = strict()
    timeout: float = timeout(60.0, setting=True)
    config: Path | None = config_file()

    @property
    def fails_from(self) -> Severity:
        """The lowest severity that fails the command (--fail-level, or warning with --strict)."""
        return fail_from(self.fail_level, self.strict)
