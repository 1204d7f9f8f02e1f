"""The command line: parse arguments, call topodoctor.service.check, render, map outcomes to exit codes.

Every failure ends as one line ("topodoctor: error: ..." on stderr, or the one requested
drain-reason line) and an exit code from topodoctor.core.errors: never a traceback, and never
exit 1 for a failure of topodoctor itself.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from topodoctor.cli import wants_line
from topodoctor.cli.check import DEFAULT_CHECK_TIMEOUT_S, LEVEL_TIMEOUT_S
from topodoctor.cli.io import (
    EXITS,
    console,
    emit,
    emit_json,
    fail,
    install_signal_handlers,
    render,
    reports_errors,
    say,
)
from topodoctor.cli.options import (
    CheckFormat,
    CommandGroup,
    DrawOpt,
    FailLevel,
    FailLevelOpt,
    Format,
    FormatOpt,
    MetricsOpt,
    OutputOpt,
    PlainUsage,
    ReplayOpt,
    RuleList,
    Scope,
    ScopeOpt,
    StrictOpt,
    SysfsOpt,
    TimeoutOpt,
    budget,
    source,
    version_callback,
)
from topodoctor.cli.plain import SCAN_TIMEOUT_S
from topodoctor.core.errors import EXIT_USAGE, InputError
from topodoctor.core.text import plural

if TYPE_CHECKING:
    from topodoctor.service.check import Pass


class Level(str, Enum):
    """What ``check`` measures, by cost."""

    static = "static"
    quick = "quick"
    long = "long"


app = typer.Typer(
    name="topodoctor",
    cls=CommandGroup,
    help="GPU topology inspector and doctor: scan the topology, check its health, measure its links.",
    epilog=EXITS["all"],
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 80},
)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """GPU topology inspector and doctor."""
    from topodoctor.cli import io as cli_io

    cli_io.line_mode = cli_io.line_asked  # per invocation; check and job set it again from their --format


@app.command(epilog=EXITS["scan"])
@reports_errors
def scan(
    replay: ReplayOpt = None,
    fmt: FormatOpt = Format.text,
    export_graph: Annotated[
        Path | None,
        typer.Option("--export-graph", metavar="FILE", help="Write the topology graph: .graphml, .dot or .json."),
    ] = None,
    draw: DrawOpt = None,
    sysfs_root: SysfsOpt = "/",
    timeout: TimeoutOpt = SCAN_TIMEOUT_S,
) -> None:
    """Discover GPUs, NVLink/NVSwitch/PCIe links, NICs and NUMA affinity; print the topology."""
    from topodoctor.cli.scan import run_scan

    raise typer.Exit(run_scan(replay, fmt.value, export_graph, draw, sysfs_root, timeout))


@app.command(epilog=EXITS["record"])
@reports_errors
def record(
    output: OutputOpt = None,
    label: Annotated[str, typer.Option("--label", metavar="TEXT", help="A name for the host kind.")] = "",
    no_scrub: Annotated[bool, typer.Option("--no-scrub", help="Keep UUIDs, serials and the host name.")] = False,
    list_bundled: Annotated[bool, typer.Option("--list", help="List the recordings bundled with topodoctor.")] = False,
    sysfs_root: SysfsOpt = "/",
    timeout: TimeoutOpt = 120.0,
) -> None:
    """Record every NVML call and sysfs read of a live scan, for replay on any machine."""
    from topodoctor.service.check import bundled_recordings

    if list_bundled:
        render(lambda: emit("\n".join(bundled_recordings())))
        return
    if output is None:
        raise InputError("record needs --output FILE (or --list)")
    from topodoctor.core import fileio
    from topodoctor.service import check as doctor

    doc, gpus = doctor.record(label or "unlabelled", not no_scrub, sysfs_root, budget(timeout))
    fileio.write_atomic(output, fileio.dumps_strict(doc, separators=(",", ":")) + "\n", "recording")
    calls, reads = plural(len(doc["nvml"]), "NVML call"), plural(len(doc["sysfs"]), "sysfs read")
    say(f"recorded {calls} and {reads} ({plural(gpus, 'GPU')}) to {output}")


@app.command(epilog=EXITS["check"])
def check(
    replay: ReplayOpt = None,
    fmt: Annotated[
        CheckFormat,
        typer.Option("--format", "-f", metavar="FORMAT", help="text, json, line (a drain reason) or prometheus."),
    ] = CheckFormat.text,
    metrics: MetricsOpt = None,
    timeout: TimeoutOpt = DEFAULT_CHECK_TIMEOUT_S,
    select: RuleList = None,
    ignore: RuleList = None,
    prolog: Annotated[bool, typer.Option("--prolog", help="Only the rules tagged prolog (the fast subset).")] = False,
    strict: StrictOpt = False,
    fail_level: FailLevelOpt = FailLevel.error,
    expect: Annotated[
        Path | None, typer.Option("--expect", metavar="FILE", help="Expectations file for this node type.")
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            metavar="FILE",
            help="An earlier snapshot of this node (scan --format json, or a recording): PCIe and NIC error "
            "counters are judged by their rise since then, too.",
        ),
    ] = None,
    with_bandwidth: Annotated[bool, typer.Option("--bandwidth", help="Add a quick copy pass.")] = False,
    with_collectives: Annotated[
        bool, typer.Option("--collectives", help="Add a quick NCCL pass: all_reduce and sendrecv, 256 MiB.")
    ] = False,
    scope: ScopeOpt = Scope.auto,
    sysfs_root: SysfsOpt = "/",
    level: Annotated[
        Level,
        typer.Option(
            "--level",
            metavar="LEVEL",
            help="static (the topology, ~0.3 s); quick (adds copies, HBM and a short collectives pass, ~10 s; "
            "--timeout 60 unless given); long (adds the GEMM stress and SM copies, ~3 min; --timeout 300).",
        ),
    ] = Level.static,
) -> None:
    """Pre-job health check: probe, run the rules, exit 0 healthy / 1 unhealthy / 3 could not check."""
    from topodoctor.cli.check import run_check

    code = run_check(
        replay,
        fmt.value,
        metrics,
        timeout,
        select,
        ignore,
        prolog,
        strict,
        fail_level.value,
        expect,
        baseline,
        with_bandwidth,
        with_collectives,
        scope.value,
        sysfs_root,
        level.value,
    )
    raise typer.Exit(code)


@app.command("rules", epilog=EXITS["rules"])
@reports_errors
def list_rules(
    fmt: FormatOpt = Format.text,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print docs/rules.md.")] = False,
) -> None:
    """List every rule: code, name, default severity, tags."""
    from topodoctor.report.rule_docs import rules_markdown
    from topodoctor.report.rules import rules_json, rules_text

    if markdown:
        render(lambda: sys.stdout.write(rules_markdown()))
    else:
        render(lambda: emit_json(rules_json()) if fmt is Format.json else emit(rules_text()))


@app.command(epilog=EXITS["explain"], cls=PlainUsage)
@reports_errors
def explain(
    code: Annotated[str, typer.Argument(metavar="CODE", hidden=True)],
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the Markdown source.")] = False,
) -> None:
    """Print the documentation of one rule; CODE is its code (TD101) or name (nvlink-down)."""
    from topodoctor.report.rule_docs import explain_markdown

    text = explain_markdown(code)
    if markdown:
        render(lambda: sys.stdout.write(text))
    else:  # rendered for a person: headings, emphasis and lists at the terminal's width
        from topodoctor.report.terminal import print_markdown

        render(lambda: print_markdown(text, console()))


@app.command("expect", epilog=EXITS["expect"])
@reports_errors
def write_expect(
    output: Annotated[Path, typer.Option("--output", "-o", metavar="FILE", help="Where to write (JSON).")],
    replay: ReplayOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Write even from a host with error findings.")] = False,
    sysfs_root: SysfsOpt = "/",
    timeout: TimeoutOpt = 60.0,
    level: Annotated[
        Level,
        typer.Option("--level", metavar="LEVEL", help="quick or long: measure, and expect the figures (TD714)."),
    ] = Level.static,
) -> None:
    """Write an expectations file from a known-good host (live or replayed)."""
    from topodoctor.core import codec, fileio
    from topodoctor.service import check as doctor

    passes: tuple[Pass, ...] = ()
    if level is not Level.static:
        from topodoctor.service.fitness import fitness_pass

        passes = (fitness_pass(level.value, "node"),)
        timeout = max(timeout, LEVEL_TIMEOUT_S[level.value])
    base = doctor.baseline(source(replay, sysfs_root), budget(timeout), passes)
    if base.blocking and not force:
        for f in base.blocking:
            say(f"  {f.code} {f.severity} {f.subject}: {f.message}")
        raise fail(f"not writing {output}: this host has {plural(len(base.blocking), 'error finding')} (--force)", 1)
    e = base.expectations
    fileio.write_atomic(output, codec.dumps(e), "expectations")
    measured = "".join(f", {k} {v:g}" for k, v in e.fitness.items())
    where = "standard output" if str(output) == "-" else output
    say(f"wrote {where}: {e.gpu_count} x {e.gpu_model}, {e.nvlinks_per_pair} NVLinks per pair{measured}")


# The commands kept in modules of their own (bandwidth, collectives, fleet, nccl-topo, nccl-log, job)
# load when named: CommandGroup.LAZY.


def main(argv: list[str] | None = None) -> int:
    """Run one command; every outcome becomes an exit code and at most one error line."""
    from topodoctor.cli import io as cli_io

    # The one-line format from the first instruction: a usage error or a signal before the
    # command's body runs is that line too.
    cli_io.line_asked = cli_io.line_mode = wants_line(sys.argv[1:] if argv is None else argv)
    try:
        with install_signal_handlers():
            return cli_io.run_app(app, argv, EXIT_USAGE)
    finally:
        cli_io.line_asked = False


def run() -> None:
    """The commands, once the entry point (cli.run) has set up the streams and the early probe.
    Ends with os._exit once the output is flushed: tearing down the interpreter can cost tenths
    of a second, past the budget a prolog gave us, and there is nothing left to clean up."""
    import os

    from topodoctor.cli.io import flush_stdio
    from topodoctor.core.budget import end_children
    from topodoctor.service.probing import drop_early

    code = main()
    drop_early()
    lost = flush_stdio()  # the report is out before the world's ending can take this process down
    end_children()
    code = code if lost is None else lost
    if "torch" in sys.modules:  # only a process that imported torch can be a rank of a launcher's world
        from topodoctor.service.world import leave_world

        code = leave_world(code)  # in a launcher's world every rank leaves with the world's code
        flush_stdio()
    os._exit(code)
