"""The plain command lines of ``check`` and ``scan``, read at the console entry point before
anything else is imported: the probe they ask for is started first, and a plain ``scan`` is
answered without the command-line library.

A static check is two halves that need each other only at the end: the probe (NVML and sysfs,
in its budgeted child) and the parent's own loading (the command line library, the rules).
Forked after parsing, the child waits for the parent's imports; forked first, the two overlap,
and a live check answers a tenth of a second sooner on the GPU hosts, in every prolog. The
command adopts that child only when it asks for the same host the same way
(service/probing.py forks it and adopts it): an argument read differently here, a pass to run
in the child, ``--timeout 0`` (no child at all) or a usage error only cost the child, which is
killed.

A plain ``scan`` (its format, budget and host) or a plain static ``check`` (the options a prolog
gives, each once) runs ``cli/scan.py`` or ``cli/check.py`` directly: typer and click cost a sixth
of their answer on the GPU hosts. Anything else, a value typer would refuse included, goes to
typer, which answers it as always."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from topodoctor.core.budget import parse_timeout
from topodoctor.core.errors import InputError
from topodoctor.service.passes import Source

# The options of `check` and `scan` that change neither which host is probed nor how: what
# they change happens in the parent, after the probe. Any other option, a help request
# included, means no early probe.
_VALUE_OPTIONS = {
    "check": {"--format", "-f", "--metrics", "--timeout", "--select", "--ignore", "--fail-level", "--expect"}
    | {"--baseline", "--scope"},
    "scan": {"--format", "-f", "--export-graph", "--draw", "--timeout"},
}
_FLAGS = {"check": {"--prolog", "--strict"}, "scan": set()}
_SOURCE_OPTIONS = {"--replay": "replay", "--sysfs-root": "sysfs_root"}


def read_plain(argv: list[str]) -> tuple[str, dict[str, str]] | None:
    """The command (``check`` or ``scan``) and its options by long name (a flag's value is ""),
    as the command will read them; None for any other command line: another command, a help
    request, an unknown option or argument, an option given twice, a value missing."""
    if not argv or argv[0] not in _VALUE_OPTIONS:
        return None
    command, words = argv[0], iter(argv[1:])
    got: dict[str, str] = {}
    for word in words:
        if word.startswith("-f") and len(word) > 2:  # -fjson: the format, attached (click's reading)
            name, value = "-f", word[2:]
        else:
            name, attached, value = word.partition("=")
            if name in _FLAGS[command] and not attached:
                value = ""
            elif name in _VALUE_OPTIONS[command] or name in _SOURCE_OPTIONS:
                if not attached:
                    following = next(words, None)
                    if following is None:
                        return None
                    value = following
            else:
                return None
        name = "--format" if name == "-f" else name
        if name in got:
            return None  # click keeps the last; the early probe need not guess
        got[name] = value
    return command, got


def source_of(argv: list[str]) -> Source | None:
    """The host a ``check`` or ``scan`` command line will probe without a measurement pass, or
    None when it may do anything else (another command, a pass, a help request, no budget).
    A text ``scan`` with no graph or picture to write reads the topology alone."""
    read = read_plain(argv)
    if read is None:
        return None
    command, opts = read
    if opts.get("--timeout", "").strip() in ("0", "0.0", "0s"):
        return None  # no budget: everything runs in this process, as --timeout 0 promises
    drawn = "--draw" in opts or "--export-graph" in opts  # the picture judges; the graph file holds every reading
    topology_only = command == "scan" and opts.get("--format", "text") == "text" and not drawn
    return Source(opts.get("--replay"), opts.get("--sysfs-root", "/"), topology_only)


_PLAIN_SCAN = {"--format", "--timeout", "--replay", "--sysfs-root"}
SCAN_TIMEOUT_S = 60.0  # scan's default --timeout (cli/commands.py declares the same)
_CHOICES = {
    "--format": ("text", "json", "line", "prometheus"),
    "--fail-level": ("warning", "error", "critical"),
    "--scope": ("auto", "job", "node"),
}


def _timeout(opts: dict[str, str], default: float) -> float:
    """--timeout as typer reads it (a float, then parse_timeout); ValueError or InputError when
    typer would refuse it (then typer says why)."""
    return parse_timeout(float(opts["--timeout"])) if "--timeout" in opts else default


def plain_scan(argv: list[str]) -> dict[str, Any] | None:
    """``run_scan``'s arguments for a plain ``scan`` command line (its format, budget and host),
    or None: anything else is typer's to read, a value it would refuse included."""
    read = read_plain(argv)
    if read is None or read[0] != "scan" or not set(read[1]) <= _PLAIN_SCAN:
        return None
    opts = read[1]
    fmt = opts.get("--format", "text")
    if fmt not in ("text", "json"):
        return None
    try:
        timeout = _timeout(opts, SCAN_TIMEOUT_S)
    except (ValueError, InputError):
        return None
    return {
        "replay": opts.get("--replay"),
        "fmt": fmt,
        "export_graph": None,
        "draw": None,
        "sysfs_root": opts.get("--sysfs-root", "/"),
        "timeout": timeout,
    }


def plain_check(argv: list[str]) -> dict[str, Any] | None:
    """``run_check``'s arguments for a plain static ``check`` command line (the options a prolog
    gives, each once), or None: anything else is typer's to read, a value it would refuse
    included."""
    read = read_plain(argv)
    if read is None or read[0] != "check":
        return None
    from topodoctor.cli.check import DEFAULT_CHECK_TIMEOUT_S

    opts = read[1]
    if any(opts.get(name, choices[0]) not in choices for name, choices in _CHOICES.items()):
        return None
    if any(opts.get(name) == "" for name in ("--metrics", "--expect", "--baseline")):
        return None
    try:
        timeout = _timeout(opts, DEFAULT_CHECK_TIMEOUT_S)
    except (ValueError, InputError):
        return None

    def path(name: str) -> Path | None:
        return Path(opts[name]) if name in opts else None

    return {
        "replay": opts.get("--replay"),
        "fmt": opts.get("--format", "text"),
        "metrics": path("--metrics"),
        "timeout": timeout,
        "select": [opts["--select"]] if "--select" in opts else None,
        "ignore": [opts["--ignore"]] if "--ignore" in opts else None,
        "prolog": "--prolog" in opts,
        "strict": "--strict" in opts,
        "level_to_fail": opts.get("--fail-level", "error"),
        "expect": path("--expect"),
        "baseline": path("--baseline"),
        "with_bandwidth": False,
        "with_collectives": False,
        "scope": opts.get("--scope", "auto"),
        "sysfs_root": opts.get("--sysfs-root", "/"),
        "level": "static",
    }
