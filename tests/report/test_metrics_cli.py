"""--metrics and --format prometheus through the command line: parsed back with the reference parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, scenario_path
from prometheus_client.parser import text_string_to_metric_families

from topodoctor.cli.commands import main


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _status(samples: dict[str, list[tuple[dict[str, str], float]]]) -> str:
    (status,) = [labels["status"] for labels, v in samples["topodoctor_status"] if v == 1]
    return status


def test_check_writes_metrics_beside_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prom = tmp_path / "td.prom"
    assert main(["check", "--replay", str(scenario_path("x4-nvlink-down")), "-f", "line", "--metrics", str(prom)]) == 1
    assert capsys.readouterr().out.startswith("topodoctor FAIL TD101")
    got = _samples(prom.read_text())
    assert _status(got) == "unhealthy"
    codes = {labels["code"] for labels, _ in got["topodoctor_finding"]}
    assert "TD101" in codes


@pytest.mark.slow
def test_could_not_check_still_writes_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prom = tmp_path / "td.prom"
    prom.write_text("stale\n")
    hang = str(scenario_path("x4-nvml-hang"))
    assert main(["check", "--replay", hang, "--timeout", "0.5", "-f", "line", "--metrics", str(prom)]) == 3
    got = _samples(prom.read_text())
    assert _status(got) == "unknown"
    assert got["topodoctor_exit_code"][0][1] == 3


def test_bandwidth_prometheus_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    saved = str(FIXTURES / "bandwidth" / "h200-x4.quick.json")
    assert main(["bandwidth", "--from", saved, "-f", "prometheus"]) == 0
    got = _samples(capsys.readouterr().out)
    assert _status(got) == "healthy"
    assert any(name.endswith("_bytes_per_second") for name in got)
