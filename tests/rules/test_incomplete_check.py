"""The check command end to end on a replayed host whose answers were refused: it says what it
could not check (naming the GPU and the field) instead of "no findings", and --strict fails it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import RECORDINGS
from typer.testing import CliRunner

from topodoctor.cli.commands import app

runner = CliRunner()
REFUSED = [
    ("nvmlDeviceGetRemappedRows", ["gpu:1"], "GPU1"),
    ("nvmlDeviceGetPersistenceMode", ["gpu:2"], "GPU2"),
    ("nvmlDeviceGetTotalEccErrors", ["gpu:3", 1, 0], "GPU3"),
]


@pytest.fixture
def refused(tmp_path: Path) -> Path:
    rec = json.loads(next(p for p in RECORDINGS if p.stem == "h200-x4").read_text())
    for fn, args, _ in REFUSED:
        for c in rec["nvml"]:
            if c["fn"] == fn and c["args"] == args:
                c.pop("result", None)
                c["error"] = 4  # NVML_ERROR_NO_PERMISSION
    rec["snapshot"] = None
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(rec))
    return path


def test_refused_answers_are_not_a_clean_pass(refused: Path) -> None:
    r = runner.invoke(app, ["check", "--replay", str(refused), "-f", "json"])
    doc = json.loads(r.stdout)
    incomplete = {(f["subject"], f["code"]) for f in doc["findings"]}
    assert {(subject, "TD901") for _, _, subject in REFUSED} <= incomplete
    assert r.exit_code == 0  # at the default fail level an incomplete check warns
    line = runner.invoke(app, ["check", "--replay", str(refused), "-f", "line"]).stdout
    assert "no findings" not in line and "warning" in line


def test_strict_fails_an_incomplete_check(refused: Path) -> None:
    assert runner.invoke(app, ["check", "--replay", str(refused), "--strict"]).exit_code == 1
