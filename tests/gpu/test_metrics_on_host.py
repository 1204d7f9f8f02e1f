"""Run on a GPU host only (pytest -m gpu tests/gpu): metrics and the fleet roll-up on live results.

The join labels must be exactly what dcgm-exporter writes for this host's GPUs; nvidia-smi
prints the same UUID and bus id forms, so the test compares with it. Results and the
rendered metrics are kept under $OUT when it is set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

if shutil.which("nvidia-smi") is None:
    pytest.skip("no nvidia-smi: not a GPU host", allow_module_level=True)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = os.environ.get("OUT")
    d = Path(base) / "metrics" if base else tmp_path_factory.mktemp("metrics")
    d.mkdir(parents=True, exist_ok=True)
    return d


def td(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "topodoctor", *args], capture_output=True, text=True, timeout=180)


def smi_gpus() -> dict[str, tuple[str, str]]:
    q = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [[c.strip() for c in line.split(",")] for line in q.splitlines() if line.strip()]
    return {i: (uuid, bus) for i, uuid, bus in rows}


def test_check_and_bandwidth_metrics_join_dcgm_labels(out: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from topodoctor.model.copies import load_result
    from topodoctor.model.findings import Finding
    from topodoctor.probe.sources import probe_host
    from topodoctor.report.prometheus import check_metrics, write_textfile
    from topodoctor.report.prometheus_copies import bandwidth_metrics

    host = os.uname().nodename.split(".")[0]
    r = td("check", "-f", "json")
    (out / f"{host}.check.json").write_text(r.stdout)
    doc = json.loads(r.stdout)
    findings = [Finding(**f) for f in doc["findings"]]
    snap = probe_host().snapshot
    text = check_metrics(findings, [f for f in findings if f.code == "TD901"], r.returncode, snap, doc["elapsed_s"])
    write_textfile(out / "topodoctor-check.prom", text)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    smi = smi_gpus()
    seen = {s.labels["gpu"]: (s.labels["UUID"], s.labels["pci_bus_id"]) for s in fams["topodoctor_gpu_info"].samples}
    assert seen == smi

    b = td("bandwidth", "--quick", "-f", "json", "-o", str(out.parent / "bw-result.json"))
    assert b.returncode in (0, 1), b.stderr
    (out / f"{host}.bandwidth.json").write_text(b.stdout)
    result = load_result(out.parent / "bw-result.json")
    bw_text = bandwidth_metrics(result, [], b.returncode)
    write_textfile(out / "topodoctor-bandwidth.prom", bw_text)
    pairs = [
        s
        for f in text_string_to_metric_families(bw_text)
        if f.name == "topodoctor_bandwidth_pair_bytes_per_second"
        for s in f.samples
    ]
    if len(smi) > 1:
        assert pairs and all(s.value > 1e10 for s in pairs)
        assert {(s.labels["UUID"], s.labels["pci_bus_id"]) for s in pairs} <= set(smi.values())


def test_fleet_reads_this_hosts_results(out: Path) -> None:
    r = td("fleet", str(out), "-f", "json")
    assert r.returncode in (0, 3), r.stdout + r.stderr  # one node: nothing to compare, nothing to drain
    doc = json.loads(r.stdout)
    assert doc["summary"]["nodes"] == 1 and doc["drain"] == []
