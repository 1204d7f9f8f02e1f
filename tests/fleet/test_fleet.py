"""The fleet roll-up on a simulated fleet built from real results (fixtures/fleet/simulate.py)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, ROOT

from topodoctor.cli.commands import main
from topodoctor.fleet.inputs import parse_result, read_results
from topodoctor.fleet.request import FleetThresholds
from topodoctor.fleet.rollup import NodeFigure, NodeResult, NodeType, robust_outliers, roll_up
from topodoctor.model.findings import Finding

sys.path.insert(0, str(ROOT / "fixtures" / "fleet"))
import simulate


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fleet")
    simulate.build(d)
    return d


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_simulated_fleet_names_the_slow_and_the_unhealthy_node(fleet_dir: Path) -> None:
    results, bad = read_results([fleet_dir])
    report = roll_up(results, bad)
    state = {n.node: n.state for n in report.nodes}
    assert state == {
        "node01": "healthy",
        "node02": "healthy",
        "node03": "slow",
        "node04": "unhealthy",
        "node05": "unknown",
        "node06": "unknown",
        "node07": "healthy",
        "node08": "healthy",
    }
    assert [(o.node, o.figure) for o in report.outliers] == [("node03", "oneway GPU1->GPU2")]
    o = report.outliers[0]
    assert 0.92 < o.ratio < 0.94 and o.peers == 5 and o.robust_z is not None and o.robust_z < -3.5
    drains = {n.node: n.drain_reason for n in report.drain}
    assert set(drains) == {"node03", "node04"}
    assert "0.93x the median of 5 nodes" in str(drains["node03"])
    assert str(drains["node04"]).startswith("topodoctor: TD101 GPU1/nvlink5")
    # node03 passes its own thresholds: only the fleet sees it.
    n3 = next(n for n in report.nodes if n.node == "node03")
    assert n3.sources == {"check": "healthy", "bandwidth": "healthy"}
    # The corrupt file is reported by name and tied to its node; the could-not-check is named by its file.
    assert [Path(u.path).name for u in report.unreadable] == ["node05.bandwidth.json"]
    assert report.unreadable[0].node == "node05"
    assert "not valid JSON" in report.unreadable[0].error
    n6 = next(n for n in report.nodes if n.node == "node06")
    assert n6.sources["check"] == "unknown" and not n6.drain
    types = {t.node_type: t for t in report.types}
    x4, x2 = types["4x NVIDIA H200, 18 NVLinks/GPU to NVSwitch"], types["2x NVIDIA H200, 18 NVLinks/GPU to NVSwitch"]
    # 32 copy rates and 12 pair latencies (the same on every node: simulate.py leaves latency as measured)
    assert x4.figures_compared == 44 and x4.figures_too_few == 0
    # Two nodes of a type are counted, never judged: no median tells which of two is off.
    assert x2.nodes == ("node07", "node08") and x2.figures_compared == 0 and x2.figures_too_few == 10


@pytest.mark.slow
def test_fleet_command_formats(fleet_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _run(["fleet", str(fleet_dir), "--format", "json"], capsys)
    assert code == 1
    doc = json.loads(out)
    assert doc["kind"] == "fleet" and doc["schema_version"] == 1
    assert doc["summary"]["drain"] == 2 and doc["summary"]["unreadable"] == 1
    assert "node05.bandwidth.json" in err and err.startswith("topodoctor: warning: ")

    code, out, _ = _run(["fleet", str(fleet_dir), "--format", "drain"], capsys)
    lines = out.splitlines()
    assert [ln.split(" ", 1)[0] for ln in lines] == ["node03", "node04"]
    assert all(ln.split(" ", 1)[1].startswith("topodoctor: ") for ln in lines)

    code, out, _ = _run(["fleet", str(fleet_dir), "--format", "scontrol"], capsys)
    words = [shlex.split(ln) for ln in out.splitlines()]
    assert words[0][:4] == ["scontrol", "update", "nodename=node03", "state=drain"]
    assert words[1][4].startswith("reason=topodoctor: TD101 GPU1/nvlink5")

    target = tmp_path / "fleet.txt"
    code, out, _ = _run(["fleet", str(fleet_dir), "-o", str(target)], capsys)
    assert out == "" and "node03" in target.read_text() and "\x1b[" not in target.read_text()


def test_a_healthy_fleet_exits_0_and_drains_nothing(fleet_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(fleet_dir / f"node0{i}.{k}.json") for i in (1, 2) for k in ("check", "bandwidth")]
    code, out, _ = _run(["fleet", *files, "--format", "drain"], capsys)
    assert (code, out) == (0, "")


def test_nothing_readable_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").write_text("{")
    code, _, err = _run(["fleet", str(tmp_path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "x.json" in err


def test_foreign_documents_are_named(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"kind": "snapshot", "schema_version": 1}))
    (tmp_path / "b.json").write_text(json.dumps({"kind": "check", "schema_version": 9, "verdict": "healthy"}))
    (tmp_path / "c.json").write_text(json.dumps({"kind": "check", "schema_version": 1, "verdict": "fine"}))
    (tmp_path / ".c.json.x1.tmp.json").write_text("{")  # a writer's temporary: skipped
    results, bad = read_results([tmp_path, tmp_path / "missing.json"])
    assert results == []
    errors = [u.error for u in bad]
    assert len(errors) == 4
    assert "a.json is not a check, bandwidth, collectives or fitness result (kind='snapshot')" in errors[0]
    assert "schema_version 9" in errors[1]
    assert "verdict" in errors[2]
    assert "not found" in errors[3]


def test_reading_budget_names_the_files_left(fleet_dir: Path) -> None:
    results, bad = read_results([fleet_dir], budget_s=0.0)
    assert results == [] and len(bad) == 16 and all("budget" in u.error for u in bad)


# ---------------------------------------------------------------- the statistic, on its own


def test_robust_outliers_near_misses() -> None:
    st = FleetThresholds()
    base = {f"n{i}": 394.0 + d for i, d in enumerate((0.0, 0.4, -0.3, 0.2, -0.1))}
    _, slow = robust_outliers({**base, "x": 394.0 * 0.97}, st)  # 3 % slow, far out in MADs: within tolerance
    assert slow == {}
    _, slow = robust_outliers({**base, "x": 394.0 * 0.94}, st)
    assert set(slow) == {"x"}
    # A noisy fleet: 6 % below its median is within its own spread (robust z about -0.7).
    noisy = {f"n{i}": 394.0 * f for i, f in enumerate((1.0, 0.93, 1.07, 0.95, 1.05, 0.96, 1.04))}
    _, slow = robust_outliers({**noisy, "x": 394.0 * 0.92}, st)
    assert slow == {}
    # Identical nodes (MAD 0): the ratio alone decides.
    _, slow = robust_outliers({"a": 100.0, "b": 100.0, "c": 100.0, "d": 90.0}, st)
    assert slow == {"d": (0.9, None)}


def _bw_node(name: str, gbps: float, findings: tuple[Finding, ...] = (), ty: NodeType | None = None) -> NodeResult:
    t = ty or NodeType("NVIDIA H200", 8, "18 NVLinks/GPU to NVSwitch")
    fig = NodeFigure("bandwidth", "oneway", "GPU0->GPU1", gbps)
    return NodeResult(name, "bandwidth", f"{name}.json", "healthy", "", findings, (fig,), t)


def test_too_few_nodes_are_not_compared() -> None:
    report = roll_up([_bw_node("a", 400.0), _bw_node("b", 200.0)])
    assert report.outliers == () and report.types[0].figures_too_few == 1 and report.types[0].figures_compared == 0


def test_nodes_of_other_types_are_not_compared() -> None:
    other = NodeType("NVIDIA H100 80GB HBM3", 8, "18 NVLinks/GPU to NVSwitch")
    nodes = [_bw_node(n, 394.0) for n in "abc"] + [_bw_node(n, 300.0, ty=other) for n in "de"]
    report = roll_up(nodes)
    assert report.outliers == ()
    assert {t.node_type: t.nodes for t in report.types}["8x NVIDIA H100 80GB HBM3, 18 NVLinks/GPU to NVSwitch"] == (
        "d",
        "e",
    )


def test_a_finding_on_most_nodes_is_fleet_wide_and_drains_none() -> None:
    env = Finding("TD601", "nccl-p2p-disabled", "error", "env:NCCL_P2P_DISABLE", "P2P off", "unset it", {})
    link = Finding("TD101", "nvlink-down", "error", "GPU1/nvlink5", "link down", "reseat", {})
    nodes = [
        NodeResult(n, "check", f"{n}.json", "unhealthy", "", (env,) + ((link,) if n == "a" else ())) for n in "abcd"
    ]
    report = roll_up(nodes)
    shared = {s.code: s for s in report.shared}
    assert shared["TD601"].systemic and shared["TD601"].nodes == ("a", "b", "c", "d")
    assert [n.node for n in report.drain] == ["a"]
    assert report.drain[0].drain_reason == "topodoctor: TD101 GPU1/nvlink5: link down"
    assert all(n.state == "unhealthy" for n in report.nodes)  # still unhealthy: the fleet has a problem


def test_collectives_results_are_compared_by_op_and_size(tmp_path: Path) -> None:
    snap = json.loads((FIXTURES / "bandwidth" / "h200-x4.full.json").read_text())["snapshot"]

    def doc(host: str, busbw: float) -> dict[str, Any]:
        def col(bw: float) -> dict[str, Any]:
            return {"time_us": 5000.0, "algbw_gbps": bw / 1.5, "busbw_gbps": bw, "wrong": 0}

        base = {"size_bytes": 1 << 30, "count": 1 << 28, "dtype": "float", "redop": "none", "root": -1}
        rows = [
            {"op": "all_gather", **base, "out_of_place": col(busbw), "in_place": col(353.0)},
            {"op": "sendrecv", **base, "out_of_place": None, "in_place": None},  # did not run: no figure
        ]
        return {"kind": "collectives", "schema_version": 1, "host": host, "rows": rows, "snapshot": snap}

    results = [
        parse_result(doc(h, v), tmp_path / f"{h}.json")
        for h, v in (("a", 353.0), ("b", 352.0), ("c", 354.1), ("d", 300.0))
    ]
    report = roll_up(results)
    assert [(o.node, o.source, o.figure) for o in report.outliers] == [
        ("d", "collectives", "all_gather busbw 1073741824 B")
    ]
    assert report.nodes[0].sources == {"collectives": "measured"}


def test_list_files_is_bounded(tmp_path: Path) -> None:
    from topodoctor.core.errors import InputError
    from topodoctor.core.fileio import list_files

    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ("n1.check.json", "a/n2.check.json", "a/b/n3.bandwidth.json", "a/.n4.check.json.x.tmp", "notes.txt"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "a" / "loop").symlink_to(tmp_path)  # a link back up is not followed
    found = [p.relative_to(tmp_path).as_posix() for p in list_files(tmp_path, "results", ".json")]
    assert found == ["a/b/n3.bandwidth.json", "a/n2.check.json", "n1.check.json"]
    with pytest.raises(InputError, match="more than 2"):
        list_files(tmp_path, "results", ".json", max_files=2)
    with pytest.raises(InputError, match="cannot list"):
        list_files(tmp_path / "missing", "results", ".json")


@pytest.mark.slow
def test_fleet_imports_neither_torch_nor_pynvml(fleet_dir: Path) -> None:
    import subprocess

    code = (
        "import sys; from topodoctor.cli.commands import main; "
        f"rc = main(['fleet', {str(fleet_dir)!r}, '-f', 'prometheus']); "
        "assert rc == 1 and 'torch' not in sys.modules and 'pynvml' not in sys.modules; print('clean')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "clean" in out.stdout, out.stderr


def test_a_fleet_wide_finding_drains_nobody_but_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seven nodes with the same link down: nobody is drained for it, the fleet is not healthy."""
    code, out, _ = _run(["check", "--replay", str(FIXTURES / "derived" / "x4-nvlink-down.json"), "-f", "json"], capsys)
    doc = json.loads(out)
    assert code == 1 and any(f["code"] == "TD101" for f in doc["findings"])
    for i in range(1, 8):
        (tmp_path / f"n{i}.check.json").write_text(json.dumps({**doc, "host": f"n{i}"}))
    code, out, err = _run(["fleet", str(tmp_path), "-f", "drain"], capsys)
    assert (code, out) == (1, "")
    assert "topodoctor: fleet-wide: TD101 on 7 of 7 nodes" in err and "drains no node" in err
    code, out, _ = _run(["fleet", str(tmp_path)], capsys)
    assert code == 1 and "0 to drain; fleet-wide: TD101 on 7 of 7 nodes" in " ".join(out.split())
    code, out, _ = _run(["fleet", str(tmp_path), "-f", "json"], capsys)
    got = json.loads(out)
    assert (code, got["exit_code"], got["drain"]) == (1, 1, [])
    assert "TD101 on 7 of 7 nodes" in got["fleet_wide"]
    # Near miss: on half of the nodes a finding is shared, not fleet-wide; those nodes drain.
    for i in range(4, 8):
        (tmp_path / f"n{i}.check.json").unlink()
    healthy = {**doc, "findings": [], "verdict": "healthy", "exit_code": 0}
    for i in range(4, 7):
        (tmp_path / f"n{i}.check.json").write_text(json.dumps({**healthy, "host": f"n{i}"}))
    code, out, err = _run(["fleet", str(tmp_path), "-f", "drain"], capsys)
    assert code == 1 and [ln.split()[0] for ln in out.splitlines()] == ["n1", "n2", "n3"] and "fleet-wide" not in err


def test_fleet_help_lists_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["fleet", "--help"], capsys)
    assert code == 0 and "Exit codes:" in out and "fleet-wide" in out and "3  a node or a file" in out


def test_the_text_is_one_screen_of_100_columns(
    fleet_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight nodes: one line each, the types, outlier, shared finding and unreadable file one line
    each, within a 24-line screen of 100 columns; --details gives every reason whole."""
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = _run(["fleet", str(fleet_dir)], capsys)
    lines = out.splitlines()
    assert code == 1 and len(lines) <= 24 and max(len(line) for line in lines) <= 100, out
    assert sum(1 for line in lines if line.startswith("node0")) == 8
    assert lines[-1] == "4 healthy, 1 slow, 1 unhealthy, 2 unknown; 2 to drain: node03, node04"
    code, full, _ = _run(["fleet", str(fleet_dir), "--details"], capsys)
    assert code == 1 and max(len(line) for line in full.splitlines()) <= 100
    assert "TD534" in full and "TD534" not in out  # the shared TD901's whole list, on request
