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

from topodoctor import __version__, cli_fleet
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
    typer.Option(
        "--replay",
        metavar="FILE|NAME",
        help="Replay a recording (or load a snapshot) instead of probing "
        "this host; NAME picks a recording bundled with topodoctor (see `topodoctor record --list`).",
    ),
]
SysfsOpt = Annotated[str, typer.Option("--sysfs-root", help="Read /sys and /proc under this directory.")]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=0,
        help="Hard wall-clock budget in seconds; past it the probe is killed and the "
        "command exits 3. 0 = no budget (and no child process).",
    ),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="text for people, json for machines.")]


def preload(module: str) -> None:
    """Import ``module`` on a thread while the probe waits on the driver.

    NVML calls release the GIL; on a host whose site-packages carry no bytecode, importing
    networkx costs about as long as the probe itself, and this hides one behind the other.
    """
    import importlib
    import threading

    threading.Thread(target=importlib.import_module, args=(module,), daemon=True).start()


def guarded_probe(replay: str | None, sysfs_root: str, timeout: float) -> Any:
    """Probe in a child process under the budget, while this process imports the graph
    library: the probe waits on the driver, the import on the CPU, side by side."""
    from topodoctor.probe import Probed, probe_host

    if timeout <= 0:
        return probe_host(replay, sysfs_root)
    from topodoctor.budget import run_with_budget

    def work(deadline: float) -> dict[str, Any]:
        from topodoctor.codec import to_jsonable

        p = probe_host(replay, sysfs_root)
        return {"snapshot": to_jsonable(p.snapshot), "origin": p.origin}

    answer = run_with_budget(work, timeout, meanwhile=lambda: preload("networkx"))
    from topodoctor.model import snapshot_from_data

    return Probed(snapshot_from_data(answer["snapshot"]), answer["origin"])


def _version(value: bool) -> None:
    if value:
        typer.echo(f"topodoctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
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
    timeout: TimeoutOpt = 60.0,
) -> None:
    """Discover GPUs, NVLink/NVSwitch/PCIe links, NICs and NUMA affinity; print the topology."""
    probed = guarded_probe(replay, sysfs_root, timeout)
    from topodoctor.graph import build_graph

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
    typer.echo(
        f"recorded {len(doc['nvml'])} NVML calls and {len(doc['sysfs'])} sysfs reads "
        f"({len(snap.gpus)} GPUs) to {output}",
        err=True,
    )


class FailLevel(str, Enum):
    warning = "warning"
    error = "error"
    critical = "critical"


class CheckFormat(str, Enum):
    text = "text"
    json = "json"
    line = "line"


def _split(values: list[str] | None) -> list[str]:
    return [p for v in values or [] for p in v.split(",") if p.strip()]


@app.command()
@reports_errors
def check(
    replay: ReplayOpt = None,
    fmt: Annotated[CheckFormat, typer.Option("--format", "-f", help="text, json, or line (a drain reason).")] = (
        CheckFormat.text
    ),
    timeout: TimeoutOpt = 30.0,
    select: Annotated[
        list[str] | None, typer.Option("--select", help="Only these rule codes, prefixes or names.")
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option("--ignore", help="Skip these rule codes, prefixes or names.")
    ] = None,
    prolog: Annotated[bool, typer.Option("--prolog", help="Only the rules tagged prolog (the fast subset).")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too.")] = False,
    fail_level: Annotated[
        FailLevel, typer.Option("--fail-level", help="Lowest severity that fails.")
    ] = FailLevel.error,
    expect: Annotated[Path | None, typer.Option("--expect", help="Expectations file for this node type.")] = None,
    with_bandwidth: Annotated[bool, typer.Option("--bandwidth", help="Add a quick copy pass (needs torch).")] = False,
    sysfs_root: SysfsOpt = "/",
) -> None:
    """Pre-job health check: probe, run the rules, exit 0 healthy / 1 unhealthy / 3 could not check."""
    from dataclasses import asdict

    from topodoctor.rules.registry import Finding, check_patterns

    sel, ign = _split(select), _split(ignore)
    check_patterns(sel + ign)
    exp_obj = None
    if expect is not None:
        from topodoctor.expect import load_expectations

        exp_obj = load_expectations(expect)
    level = "warning" if strict else fail_level.value

    import time

    t0 = time.monotonic()

    def work(deadline: float) -> dict[str, Any]:
        from topodoctor.codec import to_jsonable
        from topodoctor.probe import probe_host

        probed = probe_host(replay, sysfs_root)
        bw = None
        if with_bandwidth:
            from topodoctor.bandwidth.session import Settings, run
            from topodoctor.probe import live_nvml

            nvml = live_nvml() if replay is None else None
            bw = to_jsonable(run(probed.snapshot, Settings.quick(), nvml=nvml, deadline=deadline))
        return {"snapshot": to_jsonable(probed.snapshot), "origin": probed.origin, "bandwidth": bw}

    # The probe (and copies) run in a child under the budget; the rules, pure Python over
    # data, run here while nothing can hang.
    try:
        if timeout > 0:
            from topodoctor.budget import run_with_budget

            got = run_with_budget(work, timeout, meanwhile=lambda: preload("networkx"))
        else:
            got = work(time.monotonic() + 1e9)
    except TopodoctorError as exc:
        # Machines reading stdout get an answer in the format they asked for, too.
        if fmt is CheckFormat.json:
            from topodoctor.report.check import could_not_check_json

            typer.echo(json.dumps(could_not_check_json(str(exc), exc.exit_code), indent=1))
        elif fmt is CheckFormat.line:
            typer.echo(f"topodoctor UNKNOWN: {exc}")
        raise
    from topodoctor.bandwidth.result import BandwidthResult
    from topodoctor.codec import from_jsonable
    from topodoctor.model import snapshot_from_data
    from topodoctor.rules import Context, capture_environment, evaluate

    snap = snapshot_from_data(got["snapshot"])
    bw = from_jsonable(BandwidthResult, got["bandwidth"], "bandwidth result") if got["bandwidth"] else None
    ctx = Context(snap, capture_environment(), expect=exp_obj, bandwidth=bw)
    answer: dict[str, Any] = {
        "findings": [asdict(f) for f in evaluate(ctx, sel, ign, ("prolog",) if prolog else ())],
        "meta": {
            "origin": got["origin"],
            "host": snap.host.hostname,
            "gpus": len(snap.gpus),
            "elapsed_s": round(time.monotonic() - t0, 3),
            "bandwidth": bw is not None,
        },
    }
    findings = [Finding(**f) for f in answer["findings"]]
    meta = answer["meta"]
    from topodoctor.report.check import check_json, one_line, print_check, verdict

    if fmt is CheckFormat.json:
        typer.echo(json.dumps(check_json(findings, level, meta), indent=1))
    elif fmt is CheckFormat.line:
        typer.echo(one_line(findings, level, meta["gpus"]))
    else:
        from rich.console import Console

        print_check(findings, level, meta, Console(soft_wrap=False, width=None if sys.stdout.isatty() else 150))
    raise typer.Exit(verdict(findings, level)[1])


@app.command("rules")
@reports_errors
def list_rules(
    fmt: FormatOpt = Format.text,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print docs/rules.md.")] = False,
) -> None:
    """List every rule: code, name, default severity, tags."""
    from topodoctor.rules import REGISTRY
    from topodoctor.rules.docs import rules_markdown

    if markdown:
        typer.echo(rules_markdown(), nl=False)
        return
    if fmt is Format.json:
        typer.echo(
            json.dumps(
                [
                    {
                        "code": r.code,
                        "name": r.name,
                        "severity": r.severity,
                        "tags": sorted(r.tags),
                        "family": r.family,
                        "title": r.title,
                    }
                    for r in REGISTRY.values()
                ],
                indent=1,
            )
        )
        return
    for code in sorted(REGISTRY):
        r = REGISTRY[code]
        typer.echo(f"{r.code}  {r.name:<32} {r.severity:<8} {','.join(sorted(r.tags)) or '-':<8} {r.title}")


@app.command()
@reports_errors
def explain(code: Annotated[str, typer.Argument(help="A rule code (TD101) or name (nvlink-down).")]) -> None:
    """Print one rule's documentation."""
    from topodoctor.rules import REGISTRY
    from topodoctor.rules.docs import rule_markdown

    r = REGISTRY.get(code.upper()) or next((x for x in REGISTRY.values() if x.name == code), None)
    if r is None:
        raise InputError(f"no rule {code!r} (see `topodoctor rules`)")
    typer.echo(rule_markdown(r), nl=False)


@app.command("expect")
@reports_errors
def write_expect(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the expectations (JSON).")],
    replay: ReplayOpt = None,
    sysfs_root: SysfsOpt = "/",
) -> None:
    """Write an expectations file from a known-good host (live or replayed)."""
    from topodoctor.codec import dumps
    from topodoctor.expect import from_snapshot
    from topodoctor.probe import probe_host

    e = from_snapshot(probe_host(replay, sysfs_root).snapshot)
    try:
        output.write_text(dumps(e), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    typer.echo(f"wrote {output}: {e.gpu_count} x {e.gpu_model}, {e.nvlinks_per_pair} NVLinks per pair", err=True)


class BwMode(str, Enum):
    oneway = "oneway"
    bidir = "bidir"
    latency = "latency"
    host = "host"
    all = "all"


def _devices(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise InputError(f"--devices takes NVML indices such as 0,1,3; got {text!r}") from None


@app.command()
@reports_errors
def bandwidth(
    matrix: Annotated[bool, typer.Option("--matrix/--no-matrix", help="Print the pair matrices (default).")] = True,
    mode: Annotated[list[BwMode] | None, typer.Option("--mode", "-m", help="What to measure (repeatable).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A short pass sized for a prolog.")] = False,
    size_mib: Annotated[int | None, typer.Option("--size", help="Buffer size per copy, MiB.", min=1)] = None,
    iters: Annotated[int | None, typer.Option("--iters", help="Copies per sample.", min=1)] = None,
    samples: Annotated[int | None, typer.Option("--samples", help="Samples per measurement.", min=1)] = None,
    devices: Annotated[str | None, typer.Option("--devices", help="NVML indices to test, e.g. 0,1.")] = None,
    pair_timeout: Annotated[
        float, typer.Option("--pair-timeout", help="Seconds before a copy counts as hung.", min=0.1)
    ] = 20.0,
    from_file: Annotated[Path | None, typer.Option("--from", help="Show a saved result instead of measuring.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also save the result as JSON.")] = None,
    replay: ReplayOpt = None,
    fmt: FormatOpt = Format.text,
) -> None:
    """Measure GPU-to-GPU and host copies: bandwidth one way and both ways, latency, data integrity."""
    from topodoctor.bandwidth.result import load_result, result_to_json

    if from_file is not None:
        result = load_result(from_file)
    else:
        result = _measure(mode, quick, size_mib, iters, samples, _devices(devices), pair_timeout, replay)
    if output is not None:
        try:
            output.write_text(result_to_json(result), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    findings = _bandwidth_findings(result)
    if fmt is Format.json:
        from dataclasses import asdict

        from topodoctor.report.bandwidth import bandwidth_json

        doc = bandwidth_json(result)
        doc["findings"] = [asdict(f) for f in findings]
        typer.echo(json.dumps(doc, indent=1))
    else:
        from rich.console import Console

        from topodoctor.report.bandwidth import print_bandwidth

        console = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 150)
        if matrix:
            print_bandwidth(result, console)
        for f in findings:
            console.print(f"{f.code} {f.severity} {f.subject}: {f.message}")
    from topodoctor.report.check import verdict

    raise typer.Exit(verdict(findings, "error")[1])


def _bandwidth_findings(result: Any) -> list[Any]:
    """The bandwidth rules (TD7xx) on a result, against the host it was measured on."""
    if result.snapshot is None:
        return []
    from topodoctor.rules import Context, capture_environment, evaluate

    return evaluate(Context(result.snapshot, capture_environment({}), bandwidth=result), select=["TD7"])


def _measure(
    mode: list[BwMode] | None,
    quick: bool,
    size_mib: int | None,
    iters: int | None,
    samples: int | None,
    devices: tuple[int, ...] | None,
    pair_timeout: float,
    replay: str | None,
) -> Any:
    from dataclasses import replace

    from topodoctor.bandwidth.session import MiB, Settings, Worker, default_worker_cmd, run
    from topodoctor.probe import live_nvml, probe_host

    settings = Settings.quick(devices) if quick else Settings(devices=devices)
    if mode:
        chosen: list[str] = []
        for m in mode:
            chosen += (
                ["oneway", "bidir", "latency", "h2d", "d2h"]
                if m is BwMode.all
                else (["h2d", "d2h"] if m is BwMode.host else [m.value])
            )
        settings = replace(settings, modes=tuple(dict.fromkeys(chosen)))  # type: ignore[arg-type]
    if size_mib is not None:
        settings = replace(settings, size_bytes=size_mib * MiB)
    settings = replace(
        settings, iters=iters or settings.iters, samples=samples or settings.samples, pair_timeout_s=pair_timeout
    )
    worker = Worker(default_worker_cmd(), settings.start_timeout_s)
    worker.spawn()
    try:
        snap = probe_host(replay).snapshot
    except BaseException:
        worker.stop()
        raise
    nvml = live_nvml() if replay is None else None
    progress = None
    if sys.stderr.isatty():
        from rich.progress import Progress

        bar = Progress(transient=True)
        bar.start()
        job = bar.add_task("measuring", total=None)

        def progress(n: int, total: int, what: str) -> None:
            bar.update(job, completed=n, total=total, description=what)
            if n >= total:
                bar.stop()

    return run(snap, settings, nvml=nvml, worker=worker, progress=progress)


cli_fleet.register(app)


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
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # `topodoctor scan | head`: the reader left; that is not an error worth a traceback.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


from topodoctor.cli_collectives import register as _register_collectives  # noqa: E402

_register_collectives(app)
