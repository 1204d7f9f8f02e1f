"""Pictures: the topology drawing of every recording and derived host parses as SVG, holds the
parts of the host, and marks each fault scenario's findings where they happened; PNGs render
with a real renderer and the committed pictures are what it produces."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from tests_support import judged

from tests.conftest import DERIVED, FIXTURES, ROOT, scenario_path
from topodoctor.model.findings import Finding
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.sources import probe_host
from topodoctor.report.draw import PAIR_ARCS_MAX, draw_topology
from topodoctor.rules import Context, Environment, evaluate
from topodoctor.topology.graph import build_graph
from topodoctor.topology.hosttree import build_tree

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
    findings = list(evaluate(Context(snap, QUIET)).findings)
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
    assert judged(findings) == []
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


def _make() -> Any:
    sys.path.insert(0, str(ROOT / "docs" / "img"))
    try:
        import make
    finally:
        sys.path.pop(0)
    return make


def test_committed_svgs_are_what_the_code_draws() -> None:
    assert _make().main(check=True, png=False) == 0, "run: python docs/img/make.py"


@pytest.mark.slow
@NEEDS_RESVG
def test_committed_pngs_are_what_the_renderer_makes() -> None:
    from topodoctor.report.svg import png_renderer

    make = _make()
    if png_renderer() != make.RENDERER:
        pytest.skip(f"the pictures are made with {make.RENDERER}; this environment has {png_renderer()}")
    assert make.main(check=True) == 0, "run: python docs/img/make.py"


def test_a_host_without_gpus_still_draws() -> None:
    snap = probe_host("h100-x1").snapshot
    empty = dataclasses.replace(snap, gpus=(), pairs=(), nics=(), nvswitches=())
    root = ET.fromstring(draw_topology(empty, []))
    assert "no GPUs found" in [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]


# ---- heatmaps and collective plots ---------------------------------------------------------------


def test_heatmap_has_a_cell_per_pair_and_a_bad_pair_stands_out() -> None:
    from topodoctor.model.copies import load_result
    from topodoctor.report.heatmap import colour, draw_heatmap, shares
    from topodoctor.service.copies import bandwidth_findings

    r = load_result(FIXTURES / "bandwidth" / "derived" / "slow-link.json")
    findings = bandwidth_findings(r)
    root = ET.fromstring(draw_heatmap(r, findings))
    rects = [e for e in root.iter() if e.get("data-pair")]
    cells = {(e.get("data-pair"), e.get("data-gbps") or e.get("data-us")) for e in rects}
    n = len(r.gpus)
    assert len(cells) == 3 * n * (n - 1)  # one way, both ways each way, latency
    assert ("1-2", "236.5") in cells
    # linear in the share of the links' rate: 236 of 478 GB/s is far from its 394 GB/s peers
    share = shares(r, "oneway")
    assert share[(1, 2)][0] == pytest.approx(236.5 / 478.1, rel=1e-3) and share[(0, 1)][0] > 0.8
    assert colour(share[(1, 2)][0]) not in (colour(share[(0, 1)][0]), colour(0.8), colour(0.7))
    assert colour(0.0) == colour(-1.0) and colour(1.0) == colour(5.0)  # clipped, never stretched
    framed = {e.get("data-pair") for e in rects if e.get("stroke") == "#dc2626" and e.get("stroke-width") == "3"}
    assert framed == {"1-2"}  # the slow copy, in the one-way matrix only
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "TD307 TD701" in texts
    hung = ET.fromstring(draw_heatmap(load_result(FIXTURES / "bandwidth" / "derived" / "hung-copy.json")))
    assert "HUNG" in [t.text for t in hung.iter("{http://www.w3.org/2000/svg}text")]


def test_heatmap_labels_fit_their_cells() -> None:
    """Every text of a cell is narrower than the cell at DejaVu Sans' widest average advance (0.62 em)."""
    from topodoctor.model.copies import load_result
    from topodoctor.report.heatmap import CELL, draw_heatmap

    for name in ("sm-latency-high", "pcie-fallback", "corruption", "sm-kernels-missing"):
        r = load_result(FIXTURES / "bandwidth" / "derived" / f"{name}.json")
        root = ET.fromstring(draw_heatmap(r))
        for t in root.iter("{http://www.w3.org/2000/svg}text"):
            if t.get("text-anchor") == "middle" and t.text and not t.text.startswith("GPU"):
                assert len(t.text) * 0.62 * float(t.get("font-size") or 12) < CELL - 6, (name, t.text)


def test_collectives_plot_draws_each_op_and_its_expectation() -> None:
    from topodoctor.report.plot import Series, draw_collectives, series_from_result

    series = [
        Series("all_reduce", ((8, 0.0), (1 << 20, 60.5), (1 << 30, 353.0)), expected_gbps=360.0),
        Series("all_gather", ((0, 0.0), (1 << 20, 50.0), (1 << 30, 330.0))),
    ]
    root = ET.fromstring(draw_collectives(series, "h200-x4 <&>"))
    ops = {e.get("data-op"): e for e in root.iter() if e.get("data-op")}
    assert set(ops) == {"all_reduce", "all_gather"}
    assert [e.get("class") for e in ops["all_reduce"].iter() if e.get("class") == "expected"] == ["expected"]
    assert not [e for e in ops["all_gather"].iter() if e.get("class") == "expected"]
    assert root.find("s:title", NS).text == "h200-x4 <&>"  # type: ignore[union-attr]

    @dataclasses.dataclass
    class T:
        busbw_gbps: float

    @dataclasses.dataclass
    class R:
        op: str
        size_bytes: int
        best: T | None

    @dataclasses.dataclass
    class Res:
        rows: list[R]

    got = series_from_result(Res([R("broadcast", 1 << 30, T(361.0)), R("broadcast", 8, None)]), {"broadcast": 360.0})
    assert got == [Series("broadcast", ((1 << 30, 361.0),), 360.0)]
    assert "no collective" in draw_collectives([])


# ---- the command line ----------------------------------------------------------------------------


def test_cli_writes_pictures_and_the_topology_file(tmp_path: pytest.TempPathFactory) -> None:
    from topodoctor.cli.commands import main

    out = tmp_path / "topo.svg"  # type: ignore[operator]
    assert main(["scan", "--replay", str(scenario_path("x4-gpu-lost")), "--draw", str(out), "--timeout", "0"]) == 0
    assert _groups(ET.fromstring(out.read_text()), "gpu")["GPU3"].get("data-codes") == "TD507"
    xml = tmp_path / "nccl.xml"  # type: ignore[operator]
    assert main(["nccl-topo", "--replay", "h200-x2", "-o", str(xml), "--timeout", "0"]) == 0
    assert ET.fromstring(xml.read_text()).get("version") == "1"
    heat = tmp_path / "heat.svg"  # type: ignore[operator]
    bw = FIXTURES / "bandwidth" / "h200-x4.quick.json"
    assert main(["bandwidth", "--from", str(bw), "--heatmap", str(heat)]) == 0
    assert ET.fromstring(heat.read_text()).tag.endswith("svg")


def test_cli_refuses_a_picture_it_cannot_write_before_probing(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    from topodoctor.cli.commands import main

    assert main(["scan", "--replay", "h200-x4", "--draw", str(tmp_path / "x.jpg")]) == 2  # type: ignore[operator]
    assert "pictures are written as .svg or .png" in capsys.readouterr().err


def test_nvlinks_between_gpus_draw_as_arcs() -> None:
    from tests.topology.test_nccl_topo import nvlink_bridged
    from topodoctor.model.snapshot import load_snapshot

    snap = nvlink_bridged(load_snapshot(scenario_path("pcie-2socket")), {0: 1, 1: 0, 2: 3, 3: 2})
    root = ET.fromstring(draw_topology(snap, []))
    assert {e.get("data-pair") for e in root.iter() if e.get("data-pair")} == {"GPU0-GPU1", "GPU2-GPU3"}
    assert [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")].count("NV4") == 2
