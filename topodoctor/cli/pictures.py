"""The pictures the commands draw beside their output: the functions below back the options
``scan --draw FILE``, ``bandwidth --heatmap FILE`` and ``collectives --plot FILE``. Pictures are
SVG, or PNG where the ``draw`` extra (resvg) is installed; the extension picks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topodoctor.core.errors import InputError
from topodoctor.report.draw import draw_topology
from topodoctor.report.heatmap import draw_heatmap as heatmap
from topodoctor.report.plot import draw_collectives as plot
from topodoctor.report.plot import series_from_result
from topodoctor.report.svg import png_renderer, write_picture

if TYPE_CHECKING:
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.model.findings import Finding
    from topodoctor.service.host import ProbedHost
    from topodoctor.topology.hostgraph import HostGraph


def check_picture_path(path: Path) -> None:
    """Refuse a bad extension, or PNG without its renderer, before any probing or measuring."""
    suffix = path.suffix.lower()
    if suffix not in (".svg", ".png"):
        raise InputError(f"{path}: pictures are written as .svg or .png, not {suffix or 'no extension'!r}")
    if suffix == ".png" and png_renderer() is None:
        raise InputError(
            f"{path}: writing PNG needs the resvg renderer: pip install 'topodoctor[draw]' (or write .svg)"
        )


def draw_host(host: ProbedHost, path: Path) -> str:
    """``scan --draw FILE``: the topology picture with what the rules find drawn in place; the
    picture computes no verdict of its own."""
    from topodoctor.service import judging as doctor  # the rules, every family: only a drawn scan judges

    check_picture_path(path)
    findings = doctor.evaluate(doctor.make_context(host))[0]
    return write_picture(draw_topology(host.snapshot, findings, host.view.graph), path)


def export_graph(graph: HostGraph, path: Path) -> str:
    """``scan --export-graph FILE``: the host graph as GraphML, DOT or JSON."""
    from topodoctor.report import graph_export  # networkx: only to export the graph

    return graph_export.export_graph(graph, path)


def draw_heatmap(result: BandwidthResult, path: Path, findings: Sequence[Finding] = ()) -> str:
    """``bandwidth --heatmap FILE``: every pair matrix measured, coloured by each pair's share of its
    path's rate, the pairs ``findings`` name framed."""
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
    check_picture_path(path)
    heading = title or f"{getattr(result, 'host', '')}: collectives, bus bandwidth by message size".lstrip(": ")
    return write_picture(plot(series_from_result(result, expected), heading, expected_from), path)
