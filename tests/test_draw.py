"""Pictures: the topology drawing of every recording and derived host parses as SVG, holds the
parts of the host, and marks each fault scenario's findings where they happened; PNGs render
with a real renderer and the committed pictures are what it produces."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import DERIVED, FIXTURES, ROOT, scenario_path
from topodoctor.graph import build_graph
from topodoctor.hosttree import build_tree
from topodoctor.model import HostSnapshot
from topodoctor.probe import probe_host
from topodoctor.report.draw import PAIR_ARCS_MAX, draw_topology
from topodoctor.rules import Context, Environment, Finding, evaluate

NS = {"s": "http://www.w3.org/2000/svg"}
QUIET = Environment({}, {}, {}, (), None)
HAS_RESVG = importlib.util.find_spec("resvg_py") is not None
NEEDS_RESVG = pytest.mark.skipif(not HAS_RESVG, reason="resvg-py (the draw extra) is not installed")
SNAPSHOT_HOSTS = [
    s["name"] for s in DERIVED if json.loads(scenario_path(s["name"]).read_text())["kind"] == "snapshot"
] + ["h200-x2", "h200-x4", "h100-x1"]


def _source(name: str) -> str:
    path = FIXTURES / "derived" / f"{name}.json"
    return str(path) if path.exists() else name


def _draw(name: str) -> tuple[HostSnapshot, list[Finding], ET.Element]:
    snap = probe_host(_source(name)).snapshot
    findings = evaluate(Context(snap, QUIET))
    return snap, findings, ET.fromstring(draw_topology(snap, findings))


def _groups(root: ET.Element, kind: str) -> dict[str, ET.Element]:
    out = {}
    for e in root.iter():
        if kind in (e.get("class") or "").split():
            out[e.get("data-key", "")] = e
    return out


@pytest.mark.parametrize("name", SNAPSHOT_HOSTS)
def test_drawing_holds_every_part_of_the_host(name: str) -> None:
    snap, _, root = _draw(name)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert float(root.get("width", 0)) >= 760
    tree = build_tree(snap, build_graph(snap))
    assert set(_groups(root, "gpu")) == {f"GPU{g.index}" for g in snap.gpus}
    assert len(_groups(root, "nic")) == len([n for n in tree.nodes() if n.kind == "nic"])
    assert len(_groups(root, "switch")) == len([n for n in tree.nodes() if n.kind == "switch"])
    assert len(_groups(root, "numa")) == len(tree.roots)
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    if snap.nvswitches:
        assert "NVSwitch" in texts
        g = build_graph(snap)
        for key, e in _groups(root, "nvlink").items():
            want = sum(g.edges[key, m]["links"] for m in g.neighbors(key) if g.nodes[m]["kind"] == "nvswitch")
            assert int(e.get("data-links", -1)) == want
    if any(isinstance(g.pcie.gen_max, int) for g in snap.gpus):
        assert "x16" in texts


@pytest.mark.parametrize(
    "sc", [s for s in DERIVED if s["codes"] and s["name"] != "x4-nvml-hang"], ids=lambda s: s["name"]
)
def test_every_fault_scenario_draws_its_fault_in_place(sc: dict) -> None:  # type: ignore[type-arg]
    _, findings, root = _draw(sc["name"])
    marked = {c for e in root.iter() for c in (e.get("data-codes") or "").split()}
    pairs = {e.get("data-pair") for e in root.iter() if e.get("data-pair")}
    listed = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    per_code: dict[str, int] = {}
    for f in findings:
        per_code[f.code] = per_code.get(f.code, 0) + 1
    for f in findings:
        assert f.code in listed, f"{f.code} not listed under the picture"
        if "-GPU" in f.subject:
            if per_code[f.code] <= PAIR_ARCS_MAX:
                assert f.subject in pairs, f"{f.code} {f.subject} not drawn between the pair"
        elif f.subject.startswith(("GPU", "bridge:", "nic:")):
            assert f.code in marked, f"{f.code} {f.subject} not marked in place"
    assert set(sc["codes"]) <= {f.code for f in findings}


def test_the_marks_sit_on_the_right_parts() -> None:
    _, _, root = _draw("x4-gpu-lost")
    assert _groups(root, "gpu")["GPU3"].get("data-codes") == "TD507"
    _, _, root = _draw("x4-pcie-downtrained")
    assert _groups(root, "pcie")["GPU2"].get("data-codes") == "TD203 TD204"
    _, _, root = _draw("x4-nvlink-down")
    bundle = _groups(root, "nvlink")["GPU1"]
    assert bundle.get("data-links") == "17" and bundle.get("data-codes") == "TD101"
    _, _, root = _draw("pcie-2socket-acs")
    (switch,) = [e for e in _groups(root, "switch").values() if e.get("data-codes")]
    assert switch.get("data-codes") == "TD304" and switch.get("data-key") == "pci:0000:03:00.0"


def test_a_healthy_host_has_nothing_marked() -> None:
    _, findings, root = _draw("h200-x4")
    assert findings == []
    assert not [e for e in root.iter() if "fault" in (e.get("class") or "")]


def test_every_value_is_escaped() -> None:
    snap = probe_host("h200-x2").snapshot
    host = dataclasses.replace(snap.host, hostname='<evil host="1"> & </svg>')
    gpus = (dataclasses.replace(snap.gpus[0], name="GPU <&>"), *snap.gpus[1:])
    odd = dataclasses.replace(snap, host=host, gpus=gpus)
    finding = Finding("TD101", "nvlink-down", "error", "GPU0/nvlink1", 'a <message> & "quotes"', "fix", {})
    root = ET.fromstring(draw_topology(odd, [finding]))
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert any('<evil host="1"> & </svg>' in t for t in texts)
    assert "GPU <&>" in texts


@NEEDS_RESVG
def test_png_renders_with_resvg() -> None:
    from topodoctor.report.svg import render_png

    _, findings, _ = _draw("x4-pcie-fallback")
    snap = probe_host(_source("x4-pcie-fallback")).snapshot
    png = render_png(draw_topology(snap, findings))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 1000 and height > 800
    assert png == render_png(draw_topology(snap, findings))  # bundled fonts: the same bytes every time


@NEEDS_RESVG
def test_committed_pictures_are_what_the_renderer_makes() -> None:
    sys.path.insert(0, str(ROOT / "docs" / "img"))
    try:
        import make
    finally:
        sys.path.pop(0)
    assert make.main(check=True) == 0, "run: python docs/img/make.py"
