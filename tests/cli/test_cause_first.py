"""The root cause leads: every recording and derived host's one-line reason names the cause before
what follows from it, within 200 characters, the subject once, never cut inside a parenthesis; the
JSON and the text group consequences under their cause (``caused_by``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import scenario_path

from topodoctor.cli.commands import main
from topodoctor.core.errors import InputError
from topodoctor.fleet.parse import parse_result
from topodoctor.probe.replay import bundled_names

ROOT = Path(__file__).resolve().parents[2]
DERIVED = sorted(p for p in (ROOT / "fixtures" / "derived").glob("*.json") if p.name != "index.json")
HOSTS = [*bundled_names(), *(str(p) for p in DERIVED)]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["check", *argv])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("host", HOSTS, ids=lambda h: Path(h).stem)
def test_every_hosts_line_leads_with_its_cause(capsys: pytest.CaptureFixture[str], host: str) -> None:
    _, line = _run(capsys, "--replay", host, "-f", "line")
    line = line.rstrip("\n")
    assert "\n" not in line and len(line) <= 200, line
    assert line.count("(") == line.count(")"), f"cut inside a parenthesis: {line}"
    _, doc = _run(capsys, "--replay", host, "-f", "json")
    findings = json.loads(doc)["findings"]
    failing = [f for f in findings if f["severity"] in ("error", "critical")]
    if not failing:
        return
    first = failing[0]
    refs = {f"{f['code']} {f['subject']}" for f in failing}
    assert not set(first.get("caused_by", ())) & refs, f"{first['code']} leads ahead of its cause"
    head = line.split(": ", 1)
    assert head[0].startswith(f"topodoctor FAIL {first['code']}")
    # the subject once: in the head, or at the start of the message, not both
    assert not (head[0].endswith(first["subject"]) and head[1].startswith(first["subject"])), line


def test_fabric_manager_not_ready_leads_its_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    host = str(scenario_path("x4-fabric-not-started"))
    code, line = _run(capsys, "--replay", host, "-f", "line")
    assert code == 1 and line.startswith("topodoctor FAIL TD501 GPU0: fabric manager not ready")
    assert "(+9 more: 9 errors; 6 follow from TD501)" in line
    _, doc = _run(capsys, "--replay", host, "-f", "json")
    found = json.loads(doc)["findings"]
    order = [(f["code"], f["subject"]) for f in found if f["code"] != "TD901"]
    # each GPU's cause, then the pairs it is the first cause of
    assert order[:4] == [("TD501", "GPU0"), ("TD306", "GPU0-GPU1"), ("TD306", "GPU0-GPU2"), ("TD306", "GPU0-GPU3")]
    pair = next(f for f in found if f["subject"] == "GPU1-GPU2")
    assert pair["caused_by"] == ["TD501 GPU1", "TD501 GPU2"]
    assert "caused_by" not in found[0]  # a cause follows from nothing: the key is left out
    # the fleet reads it back as it was written; a caused_by that is not a list of strings is named
    bad = json.loads(doc)
    bad["findings"][5]["caused_by"] = "TD501 GPU1"
    with pytest.raises(InputError, match=r"findings\[5\]\.caused_by: expected a list"):
        parse_result(bad, Path("check.json"))
    back = parse_result(json.loads(doc), Path("check.json"))
    assert next(f for f in back.findings if f.subject == "GPU1-GPU2").caused_by == ("TD501 GPU1", "TD501 GPU2")
    _, text = _run(capsys, "--replay", host)
    assert "follows from TD501 GPU0, TD501 GPU1: GPU0-GPU1" in text
    assert "6 follow from TD501" in text.splitlines()[-1]


def test_a_host_wide_cause_leads_every_pair(capsys: pytest.CaptureFixture[str]) -> None:
    code, line = _run(capsys, "--replay", str(scenario_path("x4-p2p-disabled")), "-f", "line")
    assert code == 1 and line.startswith("topodoctor FAIL TD305 host: P2P not available for 6 GPU pairs")
    assert "(+6 more: 6 errors; 6 follow from TD305)" in line


def test_a_finding_that_names_its_subject_first_is_not_preceded_by_it(capsys: pytest.CaptureFixture[str]) -> None:
    _, line = _run(capsys, "--replay", str(scenario_path("x4-gpu-lost")), "-f", "line")
    assert line.startswith("topodoctor FAIL TD507: GPU3 is lost: GPU_IS_LOST")
