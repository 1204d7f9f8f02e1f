"""The options several commands share (the budget, the host, the format, the fail level, the
outputs), declared once by the spec (core/options.py) for every command's request."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

from topodoctor.core.budget import parse_timeout
from topodoctor.core.options import option

FailLevel = Literal["warning", "error", "critical"]  # --fail-level's choices, and the Python API's type
MEASURE_FORMATS = ("text", "json", "prometheus")  # what the measuring commands print

TIMEOUT_HELP = (
    "Wall-clock budget in seconds, counted from the start of the command; past it the "
    "work is stopped and the command exits 3. 0 = no budget (no child process); inf = no limit; "
    "nan or a negative number is a usage error."
)


def timeout(default: float, setting: bool = False) -> Any:
    """--timeout SECONDS: the command's budget; read once, the same way everywhere (``parse_timeout``)."""
    return option(
        "--timeout",
        default=default,
        metavar="SECONDS",
        kind=float,
        parse=parse_timeout,
        probes=True,
        help=TIMEOUT_HELP,
        setting=setting,
    )


def replay() -> Any:
    """--replay FILE|NAME: a recording or a snapshot instead of this host."""
    return option(
        "--replay",
        default=None,
        metavar="FILE|NAME",
        probes=True,
        help="Replay a recording (or load a snapshot) instead of probing this host; "
        "NAME picks a bundled recording (see `topodoctor record --list`).",
    )


def sysfs_root() -> Any:
    """--sysfs-root DIR: read /sys and /proc under DIR."""
    return option("--sysfs-root", default="/", metavar="DIR", probes=True, help="Read /sys and /proc under DIR.")


def config_file() -> Any:
    """--config FILE: the settings file (else TOPODOCTOR_CONFIG, else /etc/topodoctor/config.toml)."""
    return option(
        "--config",
        default=None,
        metavar="FILE",
        kind=Path,
        help="Read settings from this TOML file (default: $TOPODOCTOR_CONFIG, else /etc/topodoctor/config.toml; "
        "see `topodoctor config`).",
    )


def fmt(choices: tuple[str, ...], help: str, **spec: Any) -> Any:
    """--format / -f FORMAT, its first choice the default."""
    return option("--format", "-f", default=choices[0], metavar="FORMAT", choices=choices, help=help, **spec)


def fail_level(help: str = "Lowest severity that makes the command exit 1.", setting: bool = False) -> Any:
    """--fail-level LEVEL: the lowest severity that fails the command."""
    return option(
        "--fail-level",
        default="error",
        metavar="LEVEL",
        choices=get_args(FailLevel),
        help=help,
        setting=setting,
    )


def strict() -> Any:
    """--strict: warnings fail too."""
    return option("--strict", default=False, kind=bool, help="Warnings fail too (--fail-level warning).")


def metrics() -> Any:
    """--metrics FILE: Prometheus text beside the output."""
    return option(
        "--metrics",
        default=None,
        metavar="FILE",
        kind=Path,
        help="Also write Prometheus metrics to FILE, atomically (node_exporter's textfile collector).",
    )


def output(help: str = "Where to write (JSON).", default: Any = None) -> Any:
    """--output / -o FILE."""
    return option("--output", "-o", default=default, metavar="FILE", kind=Path, help=help)


PICTURE = "Also draw {}: .svg, or .png with the draw extra (resvg)."


def picture(flag: str, what: str, probes: bool = False) -> Any:
    """A picture to draw beside the output (``--draw``, ``--heatmap``)."""
    return option(flag, default=None, metavar="FILE", kind=Path, probes=probes, help=PICTURE.format(what))


def rule_list(flag: str) -> Any:
    """--select / --ignore CODES, repeatable and comma-separated."""
    return option(
        flag,
        default=(),
        metavar="CODES",
        many=True,
        parse=lambda values: tuple(p.strip() for v in values for p in v.split(",") if p.strip()),
        help="Rule codes, prefixes or names (TD1,TD301).",
    )


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
