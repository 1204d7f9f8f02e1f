"""`collectives --from` as text, on the 2 x H100 host's own results: it fits COLUMNS (nccl-tests'
table whole for a pipe), ops that reduce nothing say so, and the plot draws what its legend says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from topodoctor.model.collectives import load_result
from topodoctor.report.collectives import TABLE_WIDTH, fit, table_lines, text_report
from topodoctor.report.plot import Series, draw_collectives

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "collectives" / "real"
SVG = "{http://www.w3.org/2000/svg}"


def _from(*args: str, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    if columns is not None:
        env["COLUMNS"] = columns
    cmd = [sys.executable, "-m", "topodoctor", "collectives", "--from", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_from_fits_100_columns_and_a_pipe_keeps_nccl_tests_table() -> None:
    for name in ("h100-x2-default.json", "h100-x2-algo-tree.json"):
        r = _from(str(REAL / name), columns="100")
        assert r.returncode in (0, 1), r.stderr
        widest = max(r.stdout.splitlines(), key=len)
        assert len(widest) <= 100, widest
        assert "redop sum, root -1)" in r.stdout  # what the narrow table's columns held, in the heading
    piped = _from(str(REAL / "h100-x2-default.json"))
    head = "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
    assert any(line.startswith(head) for line in piped.stdout.splitlines())
    assert max(len(line) for line in piped.stdout.splitlines() if line.startswith(("#  ", "  "))) == TABLE_WIDTH


def test_wrapped_lines_keep_every_word_and_stay_comments() -> None:
    res = load_result(REAL / "h100-x2-algo-tree.json")
    assert all(len(line) <= 80 for line in text_report(res, [], width=80))
    long = next(line for line in text_report(res, []) if line.startswith("# FAILED"))
    parts = fit([long], 80)
    assert len(parts) > 1 and all(p.startswith("#") and len(p) <= 80 for p in parts)
    words = parts[0].split() + [w for p in parts[1:] for w in p.split()[1:]]  # continuations open with "#"
    assert words == long.split()
    assert fit([long], None) == [long]


def test_all_to_all_reduces_nothing_whatever_the_file_says() -> None:
    res = load_result(REAL / "h100-x2-default.json")
    res = replace(res, rows=tuple(replace(r, redop="sum") for r in res.rows if r.op == "all_to_all"))
    rows = [line.split() for line in table_lines(res) if line.startswith("  ")]
    assert len(rows) == 2 and all(r[3] == "none" for r in rows)  # size, count, type, redop
    assert "# all_to_all (2 ranks, nccl; float, redop none, root -1)" in table_lines(res, width=100)


@pytest.mark.slow
def test_the_plot_promises_only_the_lines_it_draws(tmp_path: Path) -> None:
    bare = ET.fromstring(draw_collectives([Series("all_reduce", ((1 << 20, 60.0), (1 << 30, 330.0)))]))
    texts = [t.text or "" for t in bare.iter(f"{SVG}text")]
    assert not any("dashed" in t for t in texts)
    drawn = ET.fromstring(draw_collectives([Series("all_reduce", ((1 << 30, 330.0),), 320.0)], expected_from="model"))
    assert any("dashed: model" in (t.text or "") for t in drawn.iter(f"{SVG}text"))
    out = tmp_path / "coll.svg"
    r = _from(str(REAL / "h100-x2-default.json"), "--plot", str(out))
    assert r.returncode in (0, 1) and out.exists(), r.stderr
    root = ET.fromstring(out.read_text())
    expected = [e for e in root.iter() if e.get("class") == "expected"]
    assert len(expected) == 7  # the topology model's busbw, one dashed line per op
    assert any("dashed: the topology model's busbw at 1 GiB" in (t.text or "") for t in root.iter(f"{SVG}text"))


@pytest.mark.slow
def test_json_keeps_everything() -> None:
    r = _from(str(REAL / "h100-x2-algo-tree.json"), "--format", "json", columns="100")
    doc = json.loads(r.stdout)
    assert "NCCL_ALGO was set to Tree" in doc["account"]  # the long account line, whole
