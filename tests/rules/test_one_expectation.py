"""One expectation per measurement (topology/busbw_expect.py): for every row of a run with
NCCL_P2P_DISABLE=1, the figure TD001 judged against, TD020's word on the same row, the collectives
table's model column, the document's ``expected`` rows and ``collectives --predict`` at that size
are one number, to the digit, and each names its basis."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from topodoctor.cli.commands import main
from topodoctor.core.codec import dumps
from topodoctor.model.collectives import load_result

ROOT = Path(__file__).resolve().parents[2]
# nccl-tests on 2 x H200 with the P2P transport off (7 ops at 128 and 512 MiB), and topodoctor's own
# run on 2 x H100 with the same setting (all_reduce at 64 MiB and 1 GiB)
RUNS = [
    ROOT / "fixtures/collectives/derived/x2-p2p-disabled.json",
    ROOT / "fixtures/diagnosis/h100-x2/coll-p2p-disable.json",
]
ROW = re.compile(r"^  (\w+)\s+(\d+[KMG])\s+[\d.]+\s+\S+\s+\S+\s+([\d.]+)$", re.M)
PREDICTED = re.compile(r"^  (\w+)((?:\s+[\d.]+)+)$", re.M)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    main(list(args))
    return capsys.readouterr().out


def _size(n: int) -> str:
    return f"{n >> 30}G" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{n >> 20}M"


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_the_finding_the_table_predict_and_the_json_agree_to_the_digit(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = {(m[1], m[2]): float(m[3]) for m in ROW.finditer(_run(capsys, "collectives", "--from", str(run)))}
    doc = json.loads(_run(capsys, "collectives", "--from", str(run), "-f", "json"))
    expected = {(e["op"], _size(e["size_bytes"])): e for e in doc["expected"]}
    assert table and set(table) == set(expected)
    for key, e in expected.items():
        assert e["expected_gbps"] == table[key] and e["basis"] == "model", key

    # --predict on the host the run was measured on, at the run's sizes
    snap = tmp_path / "host.json"
    snap.write_text(dumps(load_result(str(run)).snapshot))
    sizes = sorted({e["size_bytes"] for e in doc["expected"]})
    spec = ",".join(_size(n) for n in sizes)
    predicted = json.loads(
        _run(capsys, "collectives", "--predict", "--replay", str(snap), "--size", spec, "-f", "json")
    )
    at = {(p["op"], _size(p["size_bytes"])): p for p in predicted["at_sizes"]}
    text = _run(capsys, "collectives", "--predict", "--replay", str(snap), "--size", spec)
    printed = {m[1]: [float(v) for v in m[2].split()] for m in PREDICTED.finditer(text.split("at each size")[1])}
    for (op, size), e in expected.items():
        assert at[(op, size)]["expected_gbps"] == e["expected_gbps"], (op, size)
        assert printed[op][[_size(n) for n in sizes].index(size)] == e["expected_gbps"], (op, size)

    # one finding: the setting, each op once against that figure, TD020 folded under TD001
    (merged,) = [f for f in doc["findings"] if f["severity"] == "error"]
    assert merged["subject"] == "env:NCCL_P2P_DISABLE"
    assert {"TD001", "TD003", "TD020"} <= set(merged["evidence"]["codes"])
    ops: list[dict[str, Any]] = merged["evidence"]["ops"]
    assert {o["code"] for o in ops} == {"TD001"}
    assert "below the topology's model: " in merged["message"]
    for o in ops:
        e = expected[(o["op"], _size(o["size_bytes"]))]
        assert o["expected_gbps"] == e["expected_gbps"] and o["basis"] == "model"
        assert f"{o['op']} {o['measured_gbps']:.1f} of {o['expected_gbps']:.1f} GB/s" in merged["message"]
        assert f"of the {o['expected_gbps']:.1f} GB/s the topology's model gives at that size" in o["message"]
        for said in o.get("also", []):  # TD020 judged the same row by the same figure
            assert said["code"] == "TD020" and said["evidence"]["expected_gbps"] == o["expected_gbps"]
    assert any(o.get("also") for o in ops) == any(n >= 256 << 20 for n in sizes)


def test_an_expectation_given_is_the_basis_and_the_model_stays_the_models(capsys: pytest.CaptureFixture[str]) -> None:
    """With --expect-busbw TD001 judges by the user's number and says so; TD020 still holds the run to
    the topology's model (the table's column): two findings, each naming its own basis."""
    doc = json.loads(_run(capsys, "collectives", "--from", str(RUNS[1]), "--expect-busbw", "300", "-f", "json"))
    (merged,) = [f for f in doc["findings"] if f["severity"] == "error"]
    bases = {(o["code"], o["basis"], o["expected_gbps"]) for o in merged["evidence"]["ops"]}
    assert ("TD001", "expectation", 300.0) in bases and ("TD020", "model", 320.0) in bases
    assert "all_reduce 27.1 of 320.0 GB/s" in merged["message"]  # the model where a finding had it
