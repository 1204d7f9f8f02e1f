"""Writing the topology graph as GraphML, DOT or node-link JSON, chosen by file extension."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import networkx as nx

from topodoctor.errors import InputError

FORMATS = {".graphml": "GraphML", ".dot": "DOT", ".gv": "DOT", ".json": "node-link JSON"}


def _scalar(v: Any) -> Any:
    """GraphML and DOT hold scalars only: tuples become text, missing values empty text."""
    if v is None:
        return ""
    if isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return ",".join(str(x) for x in v)
    return str(v)


def _flat(g: nx.Graph) -> nx.Graph:
    h = nx.Graph()
    for n, data in g.nodes(data=True):
        h.add_node(n, **{k: _scalar(v) for k, v in data.items()})
    for u, v, data in g.edges(data=True):
        h.add_edge(u, v, **{k: _scalar(x) for k, x in data.items()})
    return h


def _dot(g: nx.Graph) -> str:
    def attrs(d: dict[str, Any]) -> str:
        return ", ".join(f'{k}="{str(v).replace(chr(34), chr(39))}"' for k, v in d.items())

    lines = ["graph topodoctor {"]
    for n, d in g.nodes(data=True):
        lines.append(f'  "{n}" [{attrs(d)}];')
    for u, v, d in g.edges(data=True):
        lines.append(f'  "{u}" -- "{v}" [{attrs(d)}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def export_graph(g: nx.Graph, path: Path) -> str:
    """Write ``g`` to ``path``; returns the format name. Unknown extensions are a usage error."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(f"--export-graph: unknown extension {path.suffix!r} (use {', '.join(FORMATS)})")
    flat = _flat(g)
    try:
        if fmt == "GraphML":
            nx.write_graphml(flat, path)
        elif fmt == "DOT":
            path.write_text(_dot(flat), encoding="utf-8")
        else:
            path.write_text(json.dumps(nx.node_link_data(flat, edges="links"), indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return fmt
