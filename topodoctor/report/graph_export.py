"""Writing the topology graph as GraphML, DOT or node-link JSON, chosen by file extension."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import networkx as nx

from topodoctor.core import fileio
from topodoctor.core.errors import InputError
from topodoctor.core.text import escape_controls
from topodoctor.topology.hostgraph import HostGraph

FORMATS = {".graphml": "GraphML", ".dot": "DOT", ".gv": "DOT", ".json": "node-link JSON"}


def _scalar(v: Any) -> Any:
    """GraphML and DOT hold scalars only: tuples become text, missing values empty text. Text
    is made ``escape_controls``: a control character or lone surrogate in a name would make the
    GraphML invalid XML and the DOT file unencodable."""
    if v is None:
        return ""
    if isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, (tuple, list)):
        return escape_controls(",".join(str(x) for x in v))
    return escape_controls(str(v))


def _flat(g: HostGraph) -> nx.Graph:
    h = nx.Graph()
    for n, data in g.nodes(data=True):
        h.add_node(_scalar(n), **{k: _scalar(v) for k, v in data.items()})
    for u, v, data in g.edges(data=True):
        h.add_edge(_scalar(u), _scalar(v), **{k: _scalar(x) for k, x in data.items()})
    return h


def _quoted(value: Any) -> str:
    """A DOT quoted string: backslash, quote and line breaks escaped, so any name survives."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{text}"'


def _dot(g: nx.Graph) -> str:
    def attrs(d: dict[str, Any]) -> str:
        return ", ".join(f"{k}={_quoted(v)}" for k, v in d.items())

    lines = ["graph topodoctor {"]
    for n, d in g.nodes(data=True):
        lines.append(f"  {_quoted(n)} [{attrs(d)}];")
    for u, v, d in g.edges(data=True):
        lines.append(f"  {_quoted(u)} -- {_quoted(v)} [{attrs(d)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def export_graph(g: HostGraph, path: Path) -> str:
    """Write ``g`` to ``path``; returns the format name. Unknown extensions are a usage error."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(f"--export-graph: unknown extension {path.suffix!r} (use {', '.join(FORMATS)})")
    flat = _flat(g)
    if fmt == "GraphML":
        buf = io.BytesIO()
        nx.write_graphml(flat, buf)
        data: str | bytes = buf.getvalue()
    elif fmt == "DOT":
        data = _dot(flat)
    else:
        data = fileio.dumps_strict(nx.node_link_data(flat, edges="links"), indent=1) + "\n"
    fileio.write_atomic(path, data, "graph")
    return fmt
