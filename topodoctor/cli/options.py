"""Options and argument types shared by the commands, so a new command reads like the others.

A command module of its own (``register(app)``) imports what it needs from here: the source
of the host (--replay, --sysfs-root), the budget (--timeout), formats, and ``reports_errors``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand

from topodoctor.cli.io import fail
from topodoctor.core.errors import InputError, TopodoctorError

if TYPE_CHECKING:
    from topodoctor.core.budget import Budget
    from topodoctor.service.check import Source

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(fn: F) -> F:
    """Turn TopodoctorError into its one-line message and exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TopodoctorError as exc:
            raise fail(str(exc), exc.exit_code) from None

    return wrapper  # type: ignore[return-value]


def _timeout(value: float) -> float:
    from topodoctor.core.budget import parse_timeout

    try:
        return parse_timeout(value)
    except InputError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--timeout ")) from None


class Format(str, Enum):
    text = "text"
    json = "json"


ReplayOpt = Annotated[
    str | None,
    typer.Option(
        "--replay",
        metavar="FILE|NAME",
        help="Replay a recording (or load a snapshot) instead of probing this host; "
        "NAME picks a bundled recording (see `topodoctor record --list`).",
    ),
]
SysfsOpt = Annotated[str, typer.Option("--sysfs-root", metavar="DIR", help="Read /sys and /proc under DIR.")]
_TIMEOUT_HELP = (
    "Wall-clock budget in seconds, counted from the start of the command; past it the "
    "probe is killed and the command exits 3. 0 = no budget (no child process); inf = no limit."
)
TimeoutOpt = Annotated[float, typer.Option("--timeout", metavar="SECONDS", callback=_timeout, help=_TIMEOUT_HELP)]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", help="text or json.")]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", metavar="FILE", help="Where to write (JSON).")]


_PICTURE = "Also draw {}: .svg, or .png with the draw extra (resvg)."
DrawOpt = Annotated[
    Path | None, typer.Option("--draw", metavar="FILE", help=_PICTURE.format("it, with the findings marked"))
]
HeatmapOpt = Annotated[Path | None, typer.Option("--heatmap", metavar="FILE", help=_PICTURE.format("the matrices"))]


class Scope(str, Enum):
    auto = "auto"
    job = "job"
    node = "node"


ScopeOpt = Annotated[
    Scope,
    typer.Option(
        "--scope",
        metavar="SCOPE",
        help="job: only the GPUs SLURM_STEP_GPUS / SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES name (and node-wide facts); "
        "node: every GPU; auto: job when those name a subset.",
    ),
]


class FailLevel(str, Enum):
    warning = "warning"
    error = "error"
    critical = "critical"


class CheckFormat(str, Enum):
    text = "text"
    json = "json"
    line = "line"
    prometheus = "prometheus"


class MeasureFormat(str, Enum):
    text = "text"
    json = "json"
    prometheus = "prometheus"


MetricsOpt = Annotated[
    Path | None,
    typer.Option(
        "--metrics",
        metavar="FILE",
        help="Also write Prometheus metrics to FILE, atomically (node_exporter's textfile collector).",
    ),
]


RuleList = Annotated[list[str] | None, typer.Option(metavar="CODES", help="Rule codes, prefixes or names (TD1,TD301).")]


class BwMode(str, Enum):
    oneway = "oneway"
    bidir = "bidir"
    latency = "latency"
    host = "host"
    all = "all"


def split(values: list[str] | None) -> tuple[str, ...]:
    """Repeated and comma-separated values as one tuple: --select TD1,TD3 --select TD5."""
    return tuple(p.strip() for v in values or [] for p in v.split(",") if p.strip())


def source(replay: str | None, sysfs_root: str = "/") -> Source:
    from topodoctor.service.check import Source

    return Source(replay, sysfs_root)


def budget(timeout: float) -> Budget:
    from topodoctor.core.budget import Budget

    return Budget.start(timeout)


def version_callback(value: bool) -> None:
    if value:
        from topodoctor import __version__
        from topodoctor.cli.io import emit

        emit(f"topodoctor {__version__}")
        raise typer.Exit(0)


class PlainUsage(TyperCommand):
    """Arguments in the usage line as their metavar (``CODE``), not typer's ``{CODE}``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        return pieces + [str(p.metavar or p.name).upper() for p in self.params if isinstance(p, TyperArgument)]
