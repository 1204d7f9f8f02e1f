"""The shipped Prometheus rules on the series a Slurm node really writes: the prolog's check (scope
"job", the job's GPUs) and then the health check's (scope "node"), their labels taken from
`topodoctor check -f prometheus` itself. A refused job never makes the node a lemon, the flapping
alert counts round trips, and the lemon's window is the one Prometheus had."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from test_prometheus_rules import GROUP_ORDER, _without_annotations

RULES = ROOT / "docs" / "examples" / "prometheus-rules.yml"
GPU2_DOWN = str(ROOT / "fixtures/derived/x4-two-gpus-links-down.json")


def _status(host: str, scope: str, **env: str) -> str:
    """The ``topodoctor_status{status="unhealthy"}`` series of a check, as its textfile names it."""
    run = subprocess.run(
        [sys.executable, "-m", "topodoctor", "check", "--replay", host, "-f", "prometheus", "--scope", scope],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )  # fmt: skip
    (line,) = [x for x in run.stdout.splitlines() if x.startswith("topodoctor_status{") and 'status="unhealthy"' in x]
    return line.rsplit(" ", 1)[0]


TRIPS = "topodoctor:check_unhealthy:round_trips_7d"


def _promtool(where: Path) -> subprocess.CompletedProcess[str]:
    argv = ["promtool", "test", "rules", "tests.yml"]
    return subprocess.run(argv, capture_output=True, text=True, cwd=where, timeout=120)


def _labels_of(series: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', series))


def _flapping(series: str) -> str:
    return series.replace('Hostname="recorded-host"', 'Hostname="flappy"')


def _tests(job: str, node: str) -> dict[str, Any]:
    flap = _flapping(node)
    labels = _labels_of(flap)
    return {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1h",
        "group_eval_order": GROUP_ORDER,
        "tests": [
            {
                "interval": "1h",
                "input_series": [
                    # one refused job on GPUs 2,3 (its prolog's file, 2 h), then the next job's file replaced it
                    {"series": job, "values": "1 1 _x22"},
                    # the node's own health check, healthy all day
                    {"series": node, "values": "0+0x23"},
                    # a node whose own check went unhealthy and back twice
                    {"series": flap, "values": "0 1 1 0 0 1 0 0+0x16"},
                ],
                "alert_rule_test": [
                    # the refused job's host is no lemon; flappy, unhealthy in 1 of its first 2 hours, is (for now)
                    {
                        "eval_time": "1h",
                        "alertname": "TopodoctorLemonNode",
                        "exp_alerts": [{"exp_labels": {**labels, "severity": "critical"}}],
                    },
                    {"eval_time": "23h", "alertname": "TopodoctorLemonNode", "exp_alerts": []},
                    {
                        "eval_time": "23h",
                        "alertname": "TopodoctorFlapping",
                        "exp_alerts": [{"exp_labels": {**labels, "severity": "critical"}}],
                    },
                ],
                "promql_expr_test": [
                    # two round trips are 2, not the 4 changes they make
                    {
                        "expr": 'topodoctor:check_unhealthy:round_trips_7d{Hostname="flappy"}',
                        "eval_time": "23h",
                        "exp_samples": [
                            {
                                "labels": flap.replace(
                                    "topodoctor_status", "topodoctor:check_unhealthy:round_trips_7d"
                                ),
                                "value": 2,
                            }
                        ],
                    },
                    # the job's series is not the node's: no share, no round trip of it
                    {"expr": 'topodoctor:check_unhealthy:share_10d{scope="job"}', "eval_time": "1h", "exp_samples": []},
                    # a Prometheus one day old has one day, and says so (in hours here)
                    {
                        "expr": 'floor(topodoctor:check_unhealthy:window_seconds_10d{Hostname="flappy"} / 3600)',
                        "eval_time": "23h",
                        "exp_samples": [{"labels": "{" + flap.split("{", 1)[1], "value": 23}],
                    },
                ],
            }
        ],
    }


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)")
def test_a_refused_job_is_not_a_lemon_and_round_trips_are_counted(tmp_path: Path) -> None:
    job = _status(GPU2_DOWN, "job", SLURM_JOB_ID="4711", SLURM_JOB_GPUS="2,3", CUDA_VISIBLE_DEVICES="2,3")
    node = _status("h200-x4", "node")
    assert 'scope="job"' in job and 'gpus="2,3"' in job and 'scope="node"' in node
    (tmp_path / "rules.yml").write_text(_without_annotations(RULES.read_text()))
    (tmp_path / "tests.yml").write_text(json.dumps(_tests(job, node), indent=1))
    got = subprocess.run(
        ["promtool", "test", "rules", "tests.yml"], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert got.returncode == 0, got.stdout + got.stderr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)")
def test_the_lemon_alert_says_the_window_it_had(tmp_path: Path) -> None:
    """The annotations, kept this time: a lemon on a Prometheus of one day says one day, not 10."""
    node = _flapping(_status("h200-x4", "node")).replace('Hostname="flappy"', 'Hostname="lemon"')
    labels = _labels_of(node)
    shutil.copy(RULES, tmp_path / "rules.yml")
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1h",
        "group_eval_order": GROUP_ORDER,
        "tests": [{
            "interval": "1h",
            "input_series": [{"series": node, "values": "1+0x23"}],
            "alert_rule_test": [{"eval_time": "23h", "alertname": "TopodoctorLemonNode", "exp_alerts": [{
                "exp_labels": {**labels, "severity": "critical"},
                "exp_annotations": {
                    "summary": "lemon failed its check in 100% of the last 23h 0m 0s (10 days at most)",
                    "description": "A lemon: keep it drained until the cause is found (topodoctor explain TD951).",
                },
            }]}],
        }],
    }  # fmt: skip
    (tmp_path / "tests.yml").write_text(json.dumps(test, indent=1))
    got = subprocess.run(
        ["promtool", "test", "rules", "tests.yml"], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert got.returncode == 0, got.stdout + got.stderr
