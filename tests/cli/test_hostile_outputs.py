"""Every output format stays valid whatever the host named: a GPU, host or NIC name, or an
environment value, holding a lone surrogate, ESC, BEL, NUL, ``]]>``, quotes and line breaks.

The inputs are derived at test time from the bundled 4 x H200 recording and the saved results
(the transform: ``EVIL`` replaces the names below). Each output is read back by a parser of its
format, and the name must still be found in it, escaped, so a writer that dropped it would fail.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import networkx as nx
import pydot
import pytest
from conftest import FIXTURES
from prometheus_client.parser import text_string_to_metric_families

from topodoctor.cli.commands import main
from topodoctor.core import codec
from topodoctor.probe.sources import probe_host

pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated:DeprecationWarning")  # pydot's use of pyparsing

EVIL = "E\udcff\x1b[31m\x07\x00]]>\"'<&\n\r\tz"
SHOWN = "E\\udcff\\x1b[31m\\x07\\x00]]>"  # as XML, DOT and Prometheus labels write what they cannot carry
IN_JSON = "E\\udcff\x1b[31m\x07\x00]]>"  # JSON escapes controls itself; only the surrogate is rewritten


def _strings(doc: Any) -> Iterator[str]:
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _strings(v)


def _no_constant(name: str) -> Any:
    raise AssertionError(f"{name} in JSON output")


def strict_json(text: str) -> Any:
    """JSON as a strict reader takes it: no NaN or Infinity, every string encodable as UTF-8."""
    doc = json.loads(text, parse_constant=_no_constant)
    for s in _strings(doc):
        s.encode("utf-8")
    return doc


def xml_text(path: Path) -> str:
    """The XML file parsed (expat holds it to XML 1.0), and all its text and attributes."""
    root = ET.parse(path).getroot()
    return "\n".join(
        [*(t for e in root.iter() for t in (e.text, e.tail) if t), *(v for e in root.iter() for v in e.attrib.values())]
    )


def prometheus(text: str) -> list[dict[str, str]]:
    """Every sample's labels, as prometheus_client's own parser reads them back."""
    return [s.labels for fam in text_string_to_metric_families(text) for s in fam.samples]


def strict_dot(path: Path, monkeypatch: pytest.MonkeyPatch) -> pydot.Dot:
    """The DOT file parsed by pydot (a grammar of its own, refusing what graphviz refuses)."""

    class Node(pydot.core.Node):  # pydot takes a node attribute called `name` as the node's own name
        def __init__(self, *args: Any, **attrs: Any) -> None:
            if "name" in attrs:
                attrs["name_"] = attrs.pop("name")
            super().__init__(*args, **attrs)

    monkeypatch.setattr(pydot.core, "Node", Node)
    graphs = pydot.graph_from_dot_data(path.read_text(encoding="utf-8"))
    assert graphs, "pydot could not parse the DOT file"
    return graphs[0]


@pytest.fixture(scope="module")
def snap_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data: dict[str, Any] = codec.to_jsonable(probe_host("h200-x4").snapshot)
    data["gpus"][0]["name"] = f"H200 {EVIL}"
    data["host"]["hostname"] = f"node {EVIL}"
    data["nics"][0]["name"] = f"eth{EVIL}"
    path = tmp_path_factory.mktemp("evil") / "snap.json"
    path.write_text(json.dumps(data))  # the surrogate travels as a \udcff escape, as a recording holds it
    return path


def run(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 0) -> str:
    got = main(argv)
    out = capsys.readouterr()
    assert got == code, out.err
    return out.out


def test_scan_json(capsys: pytest.CaptureFixture[str], snap_file: Path) -> None:
    doc = strict_json(run(capsys, ["scan", "--replay", str(snap_file), "-f", "json"]))
    assert any(IN_JSON in s for s in _strings(doc))


def test_check_json(capsys: pytest.CaptureFixture[str], snap_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", EVIL.replace("\x00", ""))  # an environment cannot hold NUL
    doc = strict_json(run(capsys, ["check", "--replay", str(snap_file), "-f", "json"], 1))
    assert any("E\\udcff\\x1b" in s for s in _strings(doc))


def test_check_prometheus_and_metrics(capsys: pytest.CaptureFixture[str], snap_file: Path, tmp_path: Path) -> None:
    prom = tmp_path / "td.prom"
    out = run(capsys, ["check", "--replay", str(snap_file), "-f", "prometheus", "--metrics", str(prom)])
    for text in (out, prom.read_text(encoding="utf-8")):
        labels = prometheus(text)
        assert any(SHOWN in v for sample in labels for v in sample.values()), labels[:3]


def test_scan_draw_svg(capsys: pytest.CaptureFixture[str], snap_file: Path, tmp_path: Path) -> None:
    run(capsys, ["scan", "--replay", str(snap_file), "--draw", str(tmp_path / "x.svg")])
    assert SHOWN in xml_text(tmp_path / "x.svg")


def test_export_graphml(capsys: pytest.CaptureFixture[str], snap_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.graphml"
    run(capsys, ["scan", "--replay", str(snap_file), "--export-graph", str(out)])
    ET.parse(out)
    g = nx.read_graphml(out)
    assert g.nodes["GPU0"]["name"].startswith(f"H200 {SHOWN}")


@pytest.mark.slow
def test_export_dot(
    capsys: pytest.CaptureFixture[str], snap_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "x.dot"
    run(capsys, ["scan", "--replay", str(snap_file), "--export-graph", str(out)])
    dot = strict_dot(out, monkeypatch)
    names = {n.get_name().strip('"') for n in dot.get_nodes()}
    assert "GPU0" in names and len(dot.get_edges()) > 0
    gpu0 = next(n for n in dot.get_nodes() if n.get_name().strip('"') == "GPU0")
    assert SHOWN.replace("\\", "\\\\") in gpu0.get_attributes()["name_"]


def test_export_node_link_json(capsys: pytest.CaptureFixture[str], snap_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    run(capsys, ["scan", "--replay", str(snap_file), "--export-graph", str(out)])
    assert any(SHOWN in s for s in _strings(strict_json(out.read_text(encoding="utf-8"))))


def test_nccl_topo_xml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An RDMA NIC's name is an attribute of NCCL's topology file (the 8-GPU scenario has four)."""
    data = json.loads((FIXTURES / "derived" / "hgx-8gpu-2socket.json").read_text())
    data["nics"][0]["name"] = f"mlx5_{EVIL}"
    src = tmp_path / "snap.json"
    src.write_text(json.dumps(data))
    out = tmp_path / "topo.xml"
    run(capsys, ["nccl-topo", "--replay", str(src), "-o", str(out)])
    assert SHOWN in xml_text(out)


def _evil_result(src: Path, dest: Path) -> Path:
    doc = json.loads(src.read_text())
    doc = copy.deepcopy(doc)
    doc["host"] = f"node {EVIL}"
    doc["snapshot"]["host"]["hostname"] = f"node {EVIL}"
    doc["snapshot"]["gpus"][0]["name"] = f"H200 {EVIL}"
    dest.write_text(json.dumps(doc))
    return dest


def test_bandwidth_heatmap_json_prometheus(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = _evil_result(FIXTURES / "bandwidth" / "h200-x4.quick.json", tmp_path / "bw.json")
    svg = tmp_path / "heat.svg"
    out = run(capsys, ["bandwidth", "--from", str(src), "--heatmap", str(svg), "-f", "json"])
    assert SHOWN in xml_text(svg)
    strict_json(out)
    labels = prometheus(run(capsys, ["bandwidth", "--from", str(src), "-f", "prometheus"]))
    assert any(SHOWN in v for sample in labels for v in sample.values())


def test_collectives_plot_json_prometheus(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = _evil_result(FIXTURES / "collectives" / "derived" / "x2-healthy.json", tmp_path / "coll.json")
    svg = tmp_path / "plot.svg"
    out = run(capsys, ["collectives", "--from", str(src), "--plot", str(svg), "-f", "json"])
    assert SHOWN in xml_text(svg)
    strict_json(out)
    labels = prometheus(run(capsys, ["collectives", "--from", str(src), "-f", "prometheus"]))
    assert any(SHOWN in v for sample in labels for v in sample.values())
    text = run(capsys, ["collectives", "--from", str(src)])
    assert SHOWN in text and not any(c in text for c in "\x00\x07\x1b\r")


def test_text_helpers() -> None:
    from topodoctor.core.text import escape_controls, label_safe, utf8_safe

    assert utf8_safe("a\udcff\x1b") == "a\\udcff\x1b"
    assert escape_controls("a\x00\x1b\t\n\udcff\ufffe") == "a\\x00\\x1b\t\n\\udcff\\ufffe"
    assert label_safe("a\r\n\x85\u2028\t") == "a\\x0d\n\\x85\\u2028\t"


# ------------------------------------------------------------------ fleet: names printed literally, quoted
FLEET_NODE = "node 04\x1b[31m[bold]\udcff"


@pytest.fixture(scope="module")
def evil_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulated fleet (fixtures/fleet/simulate.py) with node04, which drains, renamed."""
    import sys

    sys.path.insert(0, str(FIXTURES / "fleet"))
    import simulate

    d = tmp_path_factory.mktemp("fleet")
    simulate.build(d)
    for path in d.glob("node04.*.json"):
        doc = json.loads(path.read_text())
        doc["host"] = FLEET_NODE
        path.write_text(json.dumps(doc))
    return d


@pytest.mark.slow
def test_fleet_text_prints_names_literally(
    capsys: pytest.CaptureFixture[str], evil_fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the name whole on one line, whatever terminal runs the tests
    out = run(capsys, ["fleet", str(evil_fleet)], 1)
    assert "\x1b" not in out and "node 04\\x1b[31m[bold]\\udcff" in out


@pytest.mark.parametrize("fmt", ["drain", "scontrol"])
def test_fleet_drain_quotes_names(capsys: pytest.CaptureFixture[str], evil_fleet: Path, fmt: str) -> None:
    import shlex

    out = run(capsys, ["fleet", str(evil_fleet), "-f", fmt], 1)
    assert "\x1b" not in out
    lines = [shlex.split(line) for line in out.splitlines()]
    if fmt == "drain":
        assert sorted(w[0] for w in lines) == ["node 04\\x1b[31m[bold]\\udcff", "node03"]
    else:
        assert sorted(w[2] for w in lines) == ["nodename=node 04\\x1b[31m[bold]\\udcff", "nodename=node03"]


@pytest.mark.parametrize("fmt", ["json", "prometheus"])
def test_fleet_machine_formats(capsys: pytest.CaptureFixture[str], evil_fleet: Path, fmt: str) -> None:
    out = run(capsys, ["fleet", str(evil_fleet), "-f", fmt], 1)
    if fmt == "json":
        doc = strict_json(out)
        assert "node 04\x1b[31m[bold]\\udcff" in [n["node"] for n in doc["nodes"]]
    else:
        assert any(v == "node 04\\x1b[31m[bold]\\udcff" for s in prometheus(out) for v in s.values())
