"""Commands and options that write pictures and NCCL's topology file.

``register(app)`` adds ``topodoctor nccl-topo``; the functions below back the options
``scan --draw FILE``, ``bandwidth --heatmap FILE`` and ``collectives --plot FILE``. Pictures are
SVG, or PNG where the ``draw`` extra (resvg) is installed; the extension picks.
"""

# No `from __future__ import annotations` here: typer reads the option annotations of the
# command defined inside register() at run time, and they name the CLI's shared option types.
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.rules.registry import Finding


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


def draw_scan(snap: "HostSnapshot", path: Path, findings: "Sequence[Finding] | None" = None) -> str:
    """``scan --draw FILE``: the topology picture with what the rules find drawn in place.

    ``findings`` default to every rule on the snapshot alone (no process environment); the
    picture computes no verdict of its own."""
    from topodoctor.report.draw import draw_topology
    from topodoctor.report.svg import write_picture

    check_picture_path(path)
    if findings is None:
        from topodoctor.service import check as doctor

        findings = doctor.evaluate(doctor.make_context(doctor.Host(snap, "snapshot")))[0]
    return write_picture(draw_topology(snap, findings), path)


def draw_heatmap(result: "BandwidthResult", path: Path) -> str:
    """``bandwidth --heatmap FILE``: the one-way and both-ways matrices on a fixed colour scale."""
    from topodoctor.report.heatmap import draw_heatmap as heatmap
    from topodoctor.report.svg import write_picture

    check_picture_path(path)
    return write_picture(heatmap(result), path)


def draw_collectives(result: Any, path: Path, expected: Mapping[str, float] | None = None, title: str = "") -> str:
    """``collectives --plot FILE``: busbw against size per op, beside ``expected`` GB/s per op."""
    from topodoctor.report.plot import draw_collectives as plot
    from topodoctor.report.plot import series_from_result
    from topodoctor.report.svg import write_picture

    check_picture_path(path)
    heading = title or f"{getattr(result, 'host', '')}: collectives, bus bandwidth by message size".lstrip(": ")
    return write_picture(plot(series_from_result(result, expected), heading), path)


def register(app: typer.Typer) -> None:
    from topodoctor.cli.options import ReplayOpt, SysfsOpt, TimeoutOpt, budget, reports_errors, source

    @app.command("nccl-topo")
    @reports_errors
    def nccl_topo(
        output: Annotated[
            Path | None,
            typer.Option("--output", "-o", help="Where to write the topology XML ('-' for standard output)."),
        ] = None,
        lint: Annotated[
            Path | None,
            typer.Option(
                "--lint", help="Instead, read this topology file as NCCL would and report what it gets wrong here."
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
        from topodoctor.core.errors import InputError
        from topodoctor.core.fileio import read_text, write_atomic
        from topodoctor.report.nccl_topo import nccl_topology_xml
        from topodoctor.topology.graph import build_graph
        from topodoctor.topology.hosttree import build_tree

        if (output is None) == (lint is None):
            raise InputError("nccl-topo needs either --output FILE (write) or --lint FILE (check)")
        text_in = read_text(lint, "topology file", max_bytes=4 << 20) if lint is not None else None
        from topodoctor.service import check as doctor

        snap = doctor.probe(source(replay, sysfs_root), budget(timeout)).snapshot
        g = build_graph(snap)
        if text_in is not None:
            from topodoctor.topology.nccl_topo_lint import lint_topo_file

            problems = lint_topo_file(text_in, snap, g)
            for p in problems:
                typer.echo(f"{p.severity} {p.check}: {p.message}")
            errors = sum(1 for p in problems if p.severity == "error")
            typer.echo(f"{lint}: {errors} errors, {len(problems) - errors} warnings", err=True)
            raise typer.Exit(1 if errors else 0)
        assert output is not None
        text = nccl_topology_xml(snap, g, group_flat=not keep_flat)
        write_atomic(output, text, "topology file")
        tree = build_tree(snap, g, group_flat=not keep_flat, numa_from="sysfs")
        nodes = tree.nodes()
        gpus = sum(1 for n in nodes if n.kind == "gpu")
        nics = sum(1 for n in nodes if n.kind == "nic")
        made = sum(1 for n in nodes if n.synthetic)
        note = f"; {made} PCIe switches written for the flat VM tree" if made else ""
        where = "standard output" if str(output) == "-" else str(output)
        typer.echo(f"wrote {where}: {gpus} GPUs, {nics} RDMA NICs under {len(tree.roots)} CPUs{note}", err=True)
