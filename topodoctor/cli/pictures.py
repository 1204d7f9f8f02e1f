"""Commands and options that write pictures and NCCL's topology file.

``register(app)`` adds ``topodoctor nccl-topo``; the functions below back the options
``scan --draw FILE``, ``bandwidth --heatmap FILE`` and ``collectives --plot FILE``. Pictures are
SVG, or PNG where the ``draw`` extra (resvg) is installed; the extension picks.
"""

# No `from __future__ import annotations` here: typer reads the option annotations of the
# command defined inside register() at run time, and they name the CLI's shared option types.
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.model.findings import Finding
    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.topology.hostgraph import HostGraph


def check_picture_path(path: Path) -> None:
    """Refuse a bad extension, or PNG without its renderer, before any probing or measuring."""
    from topodoctor.core.errors import InputError
    from topodoctor.report.svg import png_renderer

    suffix = path.suffix.lower()
    if suffix not in (".svg", ".png"):
        raise InputError(f"{path}: pictures are written as .svg or .png, not {suffix or 'no extension'!r}")
    if suffix == ".png" and png_renderer() is None:
        raise InputError(
            f"{path}: writing PNG needs the resvg renderer: pip install 'topodoctor[draw]' (or write .svg)"
        )


def draw_scan(
    snap: "HostSnapshot", path: Path, findings: "Sequence[Finding] | None" = None, graph: "HostGraph | None" = None
) -> str:
    """``scan --draw FILE``: the topology picture with what the rules find drawn in place.

    ``findings`` default to every rule on the snapshot alone (no process environment); the
    picture computes no verdict of its own."""
    from topodoctor.report.draw import draw_topology
    from topodoctor.report.svg import write_picture

    check_picture_path(path)
    if findings is None:
        from topodoctor.service import check as doctor

        findings = doctor.evaluate(doctor.make_context(doctor.Host(snap, "snapshot")))[0]
    return write_picture(draw_topology(snap, findings, graph), path)


def draw_heatmap(result: "BandwidthResult", path: Path, findings: Sequence["Finding"] = ()) -> str:
    """``bandwidth --heatmap FILE``: every pair matrix measured, coloured by each pair's share of its
    path's rate, the pairs ``findings`` name framed."""
    from topodoctor.report.heatmap import draw_heatmap as heatmap
    from topodoctor.report.svg import write_picture

    check_picture_path(path)
    return write_picture(heatmap(result, findings), path)


def draw_collectives(
    result: Any,
    path: Path,
    expected: Mapping[str, float] | None = None,
    title: str = "",
    expected_from: str = "what the op should reach",
) -> str:
    """``collectives --plot FILE``: busbw against size per op, beside ``expected`` GB/s per op
    (``expected_from``: where they come from, for the subtitle)."""
    from topodoctor.report.plot import draw_collectives as plot
    from topodoctor.report.plot import series_from_result
    from topodoctor.report.svg import write_picture

    check_picture_path(path)
    heading = title or f"{getattr(result, 'host', '')}: collectives, bus bandwidth by message size".lstrip(": ")
    return write_picture(plot(series_from_result(result, expected), heading, expected_from), path)


def register(app: typer.Typer) -> None:
    """Add ``topodoctor nccl-topo`` to the app."""
    from topodoctor.cli.io import EXITS, reports_errors
    from topodoctor.cli.options import ReplayOpt, SysfsOpt, TimeoutOpt, budget, source

    @app.command("nccl-topo", epilog=EXITS["nccl-topo"])
    @reports_errors
    def nccl_topo(
        output: Annotated[
            Path | None,
            typer.Option(
                "--output", "-o", metavar="FILE", help="Where to write the topology XML ('-' for standard output)."
            ),
        ] = None,
        lint: Annotated[
            Path | None,
            typer.Option(
                "--lint",
                metavar="FILE",
                help="Instead, read this topology file as NCCL would and report what it gets wrong here.",
            ),
        ] = None,
        replay: ReplayOpt = None,
        keep_flat: Annotated[
            bool,
            typer.Option(
                "--keep-flat",
                help="In a VM whose PCIe tree is flat, leave it flat instead of giving each GPU and its NICs "
                "a switch of their own.",
            ),
        ] = False,
        sysfs_root: SysfsOpt = "/",
        timeout: TimeoutOpt = 60.0,
    ) -> None:
        """Write an NCCL_TOPO_FILE for this host: the PCIe tree, NVLinks and CPU affinity as NCCL reads them.

        With --lint FILE, check an existing file against this host instead (exit 1 on an error)."""
        from topodoctor.cli.io import render
        from topodoctor.core.errors import InputError
        from topodoctor.core.fileio import read_text, write_atomic
        from topodoctor.core.text import plural, printable
        from topodoctor.report.nccl_topo import nccl_topology_xml

        if (output is None) == (lint is None):
            raise InputError("nccl-topo needs either --output FILE (write) or --lint FILE (check)")
        text_in = read_text(lint, "topology file", max_bytes=4 << 20) if lint is not None else None
        from topodoctor.service import check as doctor

        host = doctor.probe(source(replay, sysfs_root), budget(timeout))
        snap, g = host.snapshot, host.view.graph
        if text_in is not None:
            problems = doctor.lint_nccl_topo(host, text_in)
            lines = "".join(printable(f"{p.severity} {p.check}: {p.message}") + "\n" for p in problems)
            render(lambda: sys.stdout.write(lines))
            errors = sum(1 for p in problems if p.severity == "error")
            counts = f"{plural(errors, 'error')}, {plural(len(problems) - errors, 'warning')}"
            typer.echo(printable(f"{lint}: {counts}"), err=True)
            raise typer.Exit(1 if errors else 0)
        assert output is not None
        text = nccl_topology_xml(snap, g, group_flat=not keep_flat)
        write_atomic(output, text, "topology file")
        tree = host.view.tree(group_flat=not keep_flat, numa_from="sysfs")
        nodes = tree.nodes()
        gpus = sum(1 for n in nodes if n.kind == "gpu")
        nics = sum(1 for n in nodes if n.kind == "nic")
        made = sum(1 for n in nodes if n.synthetic)
        note = f"; {plural(made, 'PCIe switch')} written for the flat VM tree" if made else ""
        where = "standard output" if str(output) == "-" else str(output)
        counted = f"{plural(gpus, 'GPU')}, {plural(nics, 'RDMA NIC')} under {plural(len(tree.roots), 'CPU')}"
        typer.echo(printable(f"wrote {where}: {counted}{note}"), err=True)
