"""The shipped Prometheus rules (docs/examples/prometheus-rules.yml) under `promtool test rules`,
against series made from the generated history (fixtures/fleet/history.py): each node's daily
check as its textfile gauge would hold it for the day, scraped every 3 hours.

The alerts' annotations are text for people and left out of the comparison; the expressions,
durations and labels are what is tested. promtool comes from Debian's prometheus package (CI
installs it); where it is missing the test says so and is skipped."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "fixtures" / "fleet"))
import history as gen

RULES = ROOT / "docs" / "examples" / "prometheus-rules.yml"
# promtool evaluates the groups of a step in no fixed order unless told: an alert read before the
# recording rule it compares with sees the previous step's sample, hours old at these intervals and
# so past the lookback, and the alert goes missing at random. A server evaluating every minute does
# not see that; the test names the order the file writes.
GROUP_ORDER = re.findall(r"^  - name: (\S+)$", RULES.read_text(), flags=re.M)
NODES = ("drift", "near-drift", "drift-late", "lemon", "near-lemon", "flap", "refail", "ok01")
STATUS = {"command": "check", "scope": "node", "gpus": "0,1", "status": "unhealthy"}


def _without_annotations(text: str) -> str:
    out, skip = [], None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if skip is not None and (indent > skip or not line.strip()):
            continue
        skip = indent if line.strip() == "annotations:" else None
        if skip is None:
            out.append(line)
    return "\n".join(out) + "\n"


def _labels(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _daily(values: list[float]) -> str:
    """Each day's value held for its 8 scrapes, one every 3 h (few samples: promtool stays quick on a busy host)."""
    return " ".join(f"{v!r}+0x7" for v in values)


def _series() -> list[dict[str, str]]:
    base = gen.CHECK.read_text()
    out = []
    for node in NODES:
        case = gen.CASES[node]
        hbm, latency, bad = [], [], []
        for d in range(gen.DAYS):
            doc = gen.check_doc(base, node, case, d)
            figs = {(f["kind"], f["initiator"], f["src"]): f["value"]["median"] for f in doc["fitness"]["figures"]}
            hbm.append(round(figs[("hbm", "ce", 1)] * 1e9, 1))
            latency.append(figs[("latency", "sm", 0)] * 1e-9)
            bad.append(1.0 if doc["verdict"] == "unhealthy" else 0.0)
        out += [
            {
                "series": _labels("topodoctor_hbm_bytes_per_second", {"Hostname": node, "gpu": "1", "engine": "ce"}),
                "values": _daily(hbm),
            },
            {
                "series": _labels("topodoctor_sm_latency_seconds", {"Hostname": node, "gpu": "0", "peer_gpu": "-1"}),
                "values": _daily(latency),
            },
            {"series": _labels("topodoctor_status", {"Hostname": node, **STATUS}), "values": _daily(bad)},
        ]
    return out


def _alert(name: str, at: str, *labels: dict[str, str]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": x} for x in labels]}


def _tests() -> dict[str, Any]:
    status = [{**STATUS, "Hostname": n, "severity": "critical"} for n in ("lemon", "flap")]
    # The collector's own finding (fleet --history -f prometheus); its warnings raise no alert.
    lemon = {"Hostname": "lemon", "code": "TD951", "name": "lemon-node", "subject": "node"}
    return {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "3h",
        "group_eval_order": GROUP_ORDER,
        "tests": [
            {
                "interval": "3h",
                "input_series": _series(),
                "alert_rule_test": [
                    # A day after the staged drift (day 20): drift only; near-drift (x0.96) is within 5 %.
                    _alert(
                        "TopodoctorDriftHBM",
                        "20d6h",
                        {"Hostname": "drift", "gpu": "1", "engine": "ce", "severity": "warning"},
                    ),
                    # Nine days on, the drift is its own 7-day median: the rule is quiet (the database is not).
                    _alert("TopodoctorDriftHBM", "29d6h"),
                    _alert(
                        "TopodoctorDriftLatency",
                        "28d6h",
                        {"Hostname": "drift-late", "gpu": "0", "peer_gpu": "-1", "severity": "warning"},
                    ),
                    # Failed on days 21, 24, 27: 3 of the last 10; near-lemon's 1, flap's 2, refail's 2 are not.
                    _alert("TopodoctorLemonNode", "29d21h", status[0]),
                    _alert("TopodoctorLemonNode", "20d21h"),
                    # Unhealthy and back twice in 7 days: flap (25, 27) and lemon (24, 27); refail's one day is not.
                    _alert("TopodoctorFlapping", "29d21h", status[0], status[1]),
                ],
            },
            {
                "interval": "1h",
                "input_series": [
                    {
                        "series": _labels("topodoctor_fleet_history_finding", {**lemon, "severity": sev}),
                        "values": "1+0x10",
                    }
                    for sev in ("error", "warning")
                ],
                "alert_rule_test": [_alert("TopodoctorHistoryFinding", "5h", {**lemon, "severity": "critical"})],
            },
        ],
    }


@pytest.mark.slow  # about a second of promtool, run where nothing else competes for the CPU
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)")
def test_the_rules_judge_the_generated_history_as_fleet_does(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(_without_annotations(RULES.read_text()))
    (tmp_path / "tests.yml").write_text(json.dumps(_tests(), indent=1))  # JSON is YAML
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    got = subprocess.run(
        ["promtool", "test", "rules", "tests.yml"], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert got.returncode == 0, got.stdout + got.stderr


def test_the_annotations_are_only_what_is_left_out() -> None:
    text = RULES.read_text()
    kept = _without_annotations(text)
    assert "annotations:" not in kept and "summary:" not in kept
    assert kept.count("expr:") == text.count("expr:") and kept.count("alert:") == text.count("alert:") == 8
