"""The command line: thin typer commands that map outcomes to exit codes.

Every failure ends as one line on stderr ("topodoctor: error: ...") and an exit code from
topodoctor.errors; no command prints a traceback for bad input or a missing driver.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from topodoctor import __version__
from topodoctor.errors import EXIT_USAGE, InputError, TopodoctorError

app = typer.Typer(
    name="topodoctor",
    help="GPU topology inspector and doctor: scan the topology, check its health, measure its links.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"topodoctor: error: {message}", err=True)
    return typer.Exit(code)


def reports_errors(fn: F) -> F:
    """Turn TopodoctorError into its one-line message and exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TopodoctorError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None

    return wrapper  # type: ignore[return-value]


class Format(str, Enum):
    text = "text"
    json = "json"


ReplayOpt = Annotated[
    str | None,
    typer.Option("--replay", metavar="FILE|NAME", help="Replay a recording (or load a snapshot) instead of probing "
                 "this host; NAME picks a recording bundled with topodoctor (see `topodoctor record --list`)."),
]  # fmt: skip
SysfsOpt = Annotated[str, typer.Option("--sysfs-root", help="Read /sys and /proc under this directory.")]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="text for people, json for machines.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"topodoctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """GPU topology inspector and doctor."""


@app.command()
@reports_errors
def scan(
    replay: ReplayOpt = None,
    fmt: FormatOpt = Format.text,
    export_graph: Annotated[
        Path | None, typer.Option("--export-graph", help="Write the topology graph: .graphml, .dot or .json.")
    ] = None,
    sysfs_root: SysfsOpt = "/",
) -> None:
    """Discover GPUs, NVLink/NVSwitch/PCIe links, NICs and NUMA affinity; print the topology."""
    from topodoctor.graph import build_graph
    from topodoctor.probe import probe_host

    probed = probe_host(replay, sysfs_root)
    g = build_graph(probed.snapshot)
    if export_graph is not None:
        from topodoctor.report.graph_export import export_graph as write_graph

        write_graph(g, export_graph)
    if fmt is Format.json:
        from topodoctor.report.scan import scan_json

        typer.echo(json.dumps(scan_json(probed.snapshot, probed.origin, g), indent=1))
        return
    from rich.console import Console

    from topodoctor.report.scan import print_scan

    print_scan(probed.snapshot, probed.origin, g, Console(soft_wrap=False, width=None if sys.stdout.isatty() else 150))


@app.command()
@reports_errors
def record(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write the recording (JSON).")] = None,
    label: Annotated[str, typer.Option("--label", help="A name for the host kind, kept in the file.")] = "",
    no_scrub: Annotated[bool, typer.Option("--no-scrub", help="Keep UUIDs, serials and the host name.")] = False,
    list_bundled: Annotated[bool, typer.Option("--list", help="List the recordings bundled with topodoctor.")] = False,
    sysfs_root: SysfsOpt = "/",
) -> None:
    """Record every NVML call and sysfs read of a live scan, for replay on any machine."""
    from topodoctor.probe.replay import bundled_names

    if list_bundled:
        for name in bundled_names():
            typer.echo(name)
        return
    if output is None:
        raise InputError("record needs --output FILE (or --list)")
    from topodoctor.probe import record_host

    doc, snap = record_host(label or "unlabelled", do_scrub=not no_scrub, sysfs_root=sysfs_root)
    try:
        output.write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    typer.echo(f"recorded {len(doc['nvml'])} NVML calls and {len(doc['sysfs'])} sysfs reads "
               f"({len(snap.gpus)} GPUs) to {output}", err=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Console entry point: usage errors become one line too, not a usage box.

    Typer ships its own copy of click, so its exceptions are matched by shape (what click
    documents: ``exit_code`` and ``format_message``), not by class.
    """
    try:
        result = app(args=argv, prog_name="topodoctor", standalone_mode=False)
    except Exception as exc:
        name = type(exc).__name__
        if name == "Exit":
            return int(getattr(exc, "exit_code", 0))
        if name == "Abort":
            typer.echo("topodoctor: error: aborted", err=True)
            return 130
        if name == "NoArgsIsHelpError":  # bare `topodoctor`: show the help, as click does
            typer.echo(exc.format_message() if hasattr(exc, "format_message") else "", err=True)
            return EXIT_USAGE
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.echo(f"topodoctor: error: {exc.format_message()}{hint}", err=True)
            return int(exc.exit_code) if exc.exit_code else EXIT_USAGE
        raise
    return result if isinstance(result, int) else 0


def run() -> None:
    sys.exit(main())
