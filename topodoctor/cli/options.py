"""Options and argument types shared by the commands, so a new command reads like the others.

A command module of its own (``register(app)``) imports what it needs from here: the source
of the host (--replay, --sysfs-root), the budget (--timeout), formats, and ``reports_errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from topodoctor.core.errors import InputError
from topodoctor.model.findings import Severity, fail_from

if TYPE_CHECKING:
    from topodoctor.core.budget import Budget
    from topodoctor.service.check import Source

F = TypeVar("F", bound=Callable[..., Any])


def _timeout(value: float) -> float:
    from topodoctor.core.budget import parse_timeout

    try:
        return parse_timeout(value)
    except InputError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--timeout ")) from None


class Format(str, Enum):
    """``scan``'s output formats."""

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
    "work is stopped and the command exits 3. 0 = no budget (no child process); inf = no limit; "
    "nan or a negative number is a usage error."
)
TimeoutOpt = Annotated[float, typer.Option("--timeout", metavar="SECONDS", callback=_timeout, help=_TIMEOUT_HELP)]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", help="text or json.")]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", metavar="FILE", help="Where to write (JSON).")]

# Every short flag of every command, and the one long option it stands for: a flag learnt in one
# command means the same in the next (a test walks the app and holds each command to this table).
SHORT_FLAGS = {
    "-f": "--format",
    "-o": "--output",
    "-h": "--help",
    "-m": "--mode",
    "-s": "--size",
    "-n": "--iters",
    "-w": "--warmup",
}


_PICTURE = "Also draw {}: .svg, or .png with the draw extra (resvg)."
DrawOpt = Annotated[
    Path | None, typer.Option("--draw", metavar="FILE", help=_PICTURE.format("it, with the findings marked"))
]
HeatmapOpt = Annotated[Path | None, typer.Option("--heatmap", metavar="FILE", help=_PICTURE.format("the matrices"))]


class Scope(str, Enum):
    """What ``check --scope`` judges: the job's GPUs, the whole node, or the job's where one is found."""

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
    """The lowest severity that makes a check fail (``--fail-level``)."""

    warning = "warning"
    error = "error"
    critical = "critical"


FailLevelOpt = Annotated[
    FailLevel,
    typer.Option("--fail-level", metavar="LEVEL", help="Lowest severity that makes the command exit 1."),
]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Warnings fail too (--fail-level warning).")]


def fail_level(level: FailLevel, strict: bool) -> Severity:
    """The severity from which a finding fails the command (``model.findings.fail_from``)."""
    return fail_from(level.value, strict)


class CheckFormat(str, Enum):
    """``check``'s output formats: text, JSON, one drain line, or Prometheus text."""

    text = "text"
    json = "json"
    line = "line"
    prometheus = "prometheus"


class MeasureFormat(str, Enum):
    """The measuring commands' output formats."""

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
    """The copy modes ``bandwidth --mode`` takes; ``all`` is every one."""

    oneway = "oneway"
    bidir = "bidir"
    latency = "latency"
    host = "host"
    sm = "sm"
    sm_oneway = "sm-oneway"
    sm_bidir = "sm-bidir"
    sm_latency = "sm-latency"
    all = "all"


def source(replay: str | None, sysfs_root: str = "/") -> Source:
    """The service's ``Source`` for --replay and --sysfs-root (imported late: the service is heavy)."""
    from topodoctor.service.check import Source

    return Source(replay, sysfs_root)


def budget(timeout: float) -> Budget:
    """A wall-clock budget of ``timeout`` seconds, counted from the command's start; 0 is no budget."""
    from topodoctor.core.budget import Budget

    return Budget.start(timeout)


def deadline(timeout: float) -> float | None:
    """A parsed --timeout as a monotonic deadline counted from the command's start; None: no budget (0)."""
    b = budget(timeout)
    return b.deadline if b.limited else None


def version_callback(value: bool) -> None:
    """``--version``: print the version and exit before anything else runs."""
    if value:
        from topodoctor import __version__
        from topodoctor.cli.io import emit, render

        render(lambda: emit(f"topodoctor {__version__}"))
        raise typer.Exit(0)


class PlainUsage(TyperCommand):
    """Arguments in the usage line as their metavar (``CODE``), not typer's ``{CODE}``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line's pieces: the options' placeholder, then each argument's metavar."""
        pieces = [self.options_metavar] if self.options_metavar else []
        return pieces + [str(p.metavar or p.name).upper() for p in self.params if isinstance(p, TyperArgument)]


class GroupedOptions(TyperCommand):
    """Options listed under headings (``OPTION_GROUPS``: heading -> parameter names, in order), for a
    command with many: the rest come last under "Options"."""

    OPTION_GROUPS: ClassVar[dict[str, tuple[str, ...]]] = {}

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """click's options section, one section per heading of ``OPTION_GROUPS``."""
        rows = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        placed: set[str | None] = set()
        for heading, names in self.OPTION_GROUPS.items():
            records = [rows[n] for n in names if rows.get(n)]
            placed.update(names)
            if records:
                with formatter.section(heading):
                    formatter.write_dl(records)
        rest = [r for n, r in rows.items() if n not in placed and r]
        if rest:
            with formatter.section("Options"):
                formatter.write_dl(rest)


def grouped(groups: dict[str, tuple[str, ...]]) -> type[GroupedOptions]:
    """A command class whose help lists its options under ``groups``' headings."""
    return type("Grouped", (GroupedOptions,), {"OPTION_GROUPS": groups})


class CommandGroup(TyperGroup):
    """topodoctor's commands: the ones kept in modules of their own load only when named, and a
    single-valued option may be given once.

    Loading on demand is click's lazy-group pattern: a prolog's ``check`` builds neither the
    collectives' 27 options nor their modules. Click keeps the last of ``--replay a --replay b``
    and says nothing, so a check would judge the other recording: that is refused."""

    LAZY: ClassVar[dict[str, str]] = {
        "bandwidth": "bandwidth",
        "collectives": "collectives",
        "fleet": "fleet",
        "nccl-topo": "pictures",
        "nccl-log": "nccl_log",
        "job": "job",
    }

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command's name, the ones not loaded yet included (help, suggestions, completion)."""
        return [*self.commands, *(name for name in self.LAZY if name not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command ``cmd_name``, its module imported and registered the first time it is asked for."""
        if cmd_name not in self.commands and cmd_name in self.LAZY:
            # The import statement's machinery (not importlib's), so -X importtime counts it too.
            module = __import__(f"topodoctor.cli.{self.LAZY[cmd_name]}", fromlist=["register"])
            one = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
            module.register(one)
            self.add_command(typer.main.get_command(one), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        """The command click resolves, after refusing any single-valued option given twice."""
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:
            _refuse_repeats(ctx, cmd, rest)
        return name, cmd, rest


def _refuse_repeats(ctx: Any, cmd: Any, args: list[str]) -> None:
    """A usage error for an option that takes one value and was given more than once."""
    options = {opt: p for p in cmd.params if isinstance(p, TyperOption) for opt in (*p.opts, *p.secondary_opts)}
    seen: dict[str, int] = {}
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            break
        flag, attached = token.split("=", 1)[0] if token.startswith("--") else token, "=" in token
        param = options.get(flag)
        if param is None:
            continue
        takes_value = not param.is_flag and not param.count
        if takes_value and not attached:
            next(tokens, None)  # its value, whatever it looks like
        if takes_value and not param.multiple:
            name = param.name or flag  # click types the name as optional; a typer option always has one
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                raise typer.BadParameter("given more than once; give it once", ctx=ctx, param=param)
