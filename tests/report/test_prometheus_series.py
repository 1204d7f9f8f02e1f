"""Each series once: in one metrics file, and between a job's check file and the node's.

promtool passes a file that holds one series twice, and node_exporter keeps the first file's
series when two files of its textfile directory hold the same one (it only logs the clash): both
are read here with prometheus_client's own parser, on every recording and derived scenario."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES, scenario_path
from prometheus_client.parser import text_string_to_metric_families

from topodoctor.cli.commands import main
from topodoctor.core.errors import WriteError
from topodoctor.model.findings import Finding
from topodoctor.probe.sources import probe_host
from topodoctor.report.prometheus import _Metrics, check_metrics

RECORDINGS = ("h200-x4", "h200-x2", "h200-x1", "h100-x1")
# Every derived scenario but the driver hang, which never answers (below: it writes "unknown").
SCENARIOS = [e["name"] for e in json.loads((FIXTURES / "derived" / "index.json").read_text())]
SCENARIOS.remove("x4-nvml-hang")
Series = tuple[str, tuple[tuple[str, str], ...]]


def series(text: str) -> Counter[Series]:
    """Every sample of a metrics text by name and labels, counted."""
    return Counter(
        (s.name, tuple(sorted(s.labels.items()))) for fam in text_string_to_metric_families(text) for s in fam.samples
    )


def _prometheus(capsys: pytest.CaptureFixture[str], source: str) -> str:
    code = main(["check", "--replay", source, "-f", "prometheus", "--timeout", "0"])
    out = capsys.readouterr().out
    assert code in (0, 1), (source, code)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("source", [*RECORDINGS, *SCENARIOS])
def test_a_check_file_holds_each_series_once(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = source if source in RECORDINGS else str(scenario_path(source))
    twice = [s for s, n in series(_prometheus(capsys, path)).items() if n > 1]
    assert not twice, twice


@pytest.mark.slow
def test_findings_that_share_a_subject_are_one_series_counting_them(capsys: pytest.CaptureFixture[str]) -> None:
    """Two TD301 findings on ``host`` (P2P unavailable through the chipset, and through the root
    complex): one series of value 2, not the same series twice."""
    text = _prometheus(capsys, str(scenario_path("pcie-2socket-acs")))
    td301 = [(labels, v) for (name, labels), v in _values(text).items() if dict(labels).get("code") == "TD301"]
    assert [(dict(labels)["subject"], v) for labels, v in td301] == [("host", 2.0)]
    assert sum(v for (name, _), v in _values(text).items() if name == "topodoctor_findings") == sum(
        v for (name, _), v in _values(text).items() if name == "topodoctor_finding"
    )


def _values(text: str) -> dict[Series, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_a_clash_in_any_other_family_is_a_bug_not_a_file() -> None:
    """Told as the metrics file not written: the verdict still stands (cli_io.Outputs)."""
    m = _Metrics()
    m.add("topodoctor_gpus", 4, Hostname="h", scope="node")
    with pytest.raises(WriteError, match="a second topodoctor_gpus series"):
        m.add("topodoctor_gpus", 4, Hostname="h", scope="node")
    m.add("topodoctor_finding", 1, code="TD301", subject="host")
    m.add("topodoctor_finding", 1, code="TD301", subject="host")  # counted, not repeated


def test_a_family_without_the_files_scope_cannot_be_written_to_a_check_file() -> None:
    with pytest.raises(ValueError, match="scope"):
        _Metrics({"scope": "job"}).add("topodoctor_fleet_node_drain", 1, Hostname="h")


@pytest.mark.parametrize("recording", RECORDINGS)
def test_a_jobs_check_file_and_the_nodes_share_no_series(recording: str) -> None:
    """Whatever the job judged (its GPUs, or all of them for a job Slurm gave no GPU list), its
    file's series differ from the node's, the per-GPU readings (clocks, power) included."""
    snap = probe_host(recording).snapshot
    every = tuple(g.index for g in snap.gpus)
    f = Finding("TD901", "check-incomplete", "info", "recording", "m", "fix", {})
    node = series(check_metrics([f], [], 0, snap, run_time=1.0))
    for judged in {every, every[-1:]}:
        job = series(check_metrics([f], [], 0, snap, run_time=1.0, scope="job", scope_gpus=judged))
        assert not set(job) & set(node)
        gpus_named = {dict(labels).get("gpu") for name, labels in job if name.startswith("topodoctor_gpu_")}
        assert gpus_named <= {str(i) for i in judged} | {None}, gpus_named


@pytest.mark.slow
def test_a_prolog_of_a_job_without_gpus_is_labelled_the_jobs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A Slurm prolog of a job without --gres: the whole node judged (the verdict as before), the
    file labelled the job's; the node's health check (--scope node) writes the node's."""
    job_file, node_file = tmp_path / "job.prom", tmp_path / "node.prom"
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    # h200-x4 was recorded before recordings held their process: the replaying process is judged.
    assert main(["check", "--replay", "h200-x4", "-f", "line", "--metrics", str(job_file)]) == 0
    assert capsys.readouterr().out.startswith("topodoctor OK: 4 GPUs, ")
    assert main(["check", "--replay", "h200-x4", "-f", "line", "--scope", "node", "--metrics", str(node_file)]) == 0
    job, node = series(job_file.read_text()), series(node_file.read_text())
    assert not set(job) & set(node)
    assert {dict(labels)["scope"] for _, labels in job} == {"job"}
    assert {dict(labels)["scope"] for name, labels in node if "scope" in dict(labels)} == {"node"}
    # Could not check: the job's file still says so under the job's labels.
    hang = str(scenario_path("x4-nvml-hang"))
    assert main(["check", "--replay", hang, "--timeout", "0.5", "-f", "line", "--metrics", str(job_file)]) == 3
    assert {dict(labels).get("scope") for _, labels in series(job_file.read_text())} == {"job"}


@pytest.mark.slow
def test_prometheus_on_stdout_says_unknown_when_the_node_cannot_be_checked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hang = str(scenario_path("x4-nvml-hang"))
    assert main(["check", "--replay", hang, "--timeout", "0.5", "-f", "prometheus"]) == 3
    out = capsys.readouterr()
    got = _values(out.out)
    status = {dict(labels)["status"]: v for (name, labels), v in got.items() if name == "topodoctor_status"}
    assert status == {"healthy": 0.0, "unhealthy": 0.0, "unknown": 1.0}
    assert out.err.startswith("topodoctor: error: ") and out.err.count("\n") == 1
