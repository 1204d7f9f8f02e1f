"""check's answers to a cluster: the one line (shortened by words, naming a job's GPUs), the
policy for an expectations file it cannot use, and options given twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import scenario_path

from tests.cli.test_cli import one_line_error
from topodoctor.cli.commands import main


@pytest.mark.slow
def test_unusable_expectations_judge_without_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing or corrupt --expect file: the node is still judged (a fault fails, exit 1), and a
    node without one is not passed as healthy (exit 2, "misconfigured"), each saying why."""
    corrupt = tmp_path / "node-type.json"
    corrupt.write_text('{"kind": "expectations", "schema_')
    for path, why in (("/nonexistent.json", "not found"), (str(corrupt), "not valid JSON")):
        err = one_line_error(capsys, ["check", "--expect", path, "--replay", "h200-x4", "-f", "json"], 2)
        assert why in err and "judged without it" in err
        assert main(["check", "--expect", path, "--replay", "h200-x4", "-f", "line"]) == 2
        line = capsys.readouterr().out.strip()
        assert line.startswith("topodoctor UNKNOWN: expectations not used") and line.endswith(
            "4 GPUs, 1 info; 1 check incomplete"
        )
        down = str(scenario_path("x4-nvlink-down"))
        assert main(["check", "--expect", path, "--replay", down, "-f", "line"]) == 1
        line = capsys.readouterr().out.strip()
        assert line.startswith("topodoctor FAIL TD101") and line.endswith("without the expectations file (unusable)")


def test_repeated_single_value_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert "'--replay': given more than once" in one_line_error(
        capsys, ["check", "--replay", "h200-x4", "--replay=h200-x2"], 2
    )
    assert main(["check", "--replay", "h200-x2", "--select", "TD1", "--select", "TD2", "-f", "line"]) == 0


def test_drain_reason_is_shortened_by_words_and_keeps_its_counts() -> None:
    from topodoctor.model.findings import Finding
    from topodoctor.model.outcome import CheckOutcome, Meta
    from topodoctor.report.check import could_not_check_json, one_line

    words = " ".join(f"word{i}" for i in range(60))
    bad = tuple(Finding("TD101", "nvlink-down", "error", f"GPU{i}/nvlink5", words, "fix", {}) for i in range(3))
    meta = Meta("replay", "h", 4, 0.1, (), "job", (0, 1), 0, None, "job")
    line = one_line(CheckOutcome(bad, (), meta, "error", 1))
    assert len(line) <= 200 and line.startswith("topodoctor FAIL TD101 GPU0/nvlink5: word0 word1")
    assert line.endswith("... (+2 more: 2 errors); judged the job's 2 of 4 GPUs (0,1)")
    cut = line.split("...")[0].split(": ", 1)[1].split()
    assert cut == words.split()[: len(cut)]  # whole words only
    assert could_not_check_json(words, 3)["reason"].endswith("word59")  # JSON has room for all of it


def test_job_scope_line_names_the_judged_gpus(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("SLURM_JOB_GPUS", "2,3")
    assert main(["check", "--replay", str(scenario_path("x4-nvlink-down")), "-f", "line"]) == 0
    assert capsys.readouterr().out.strip() == "topodoctor OK: job's 2 of 4 GPUs (2,3), 1 info; 1 check incomplete"


@pytest.mark.slow
def test_a_failed_write_ends_the_line_within_its_200_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A long verdict and "; cannot write FILE: reason" after it: one line of at most 200
    characters, the verdict's code and counts and the write's failure both kept."""
    missing = tmp_path / ("a-directory-that-is-not-there-" * 3) / "topodoctor-check.prom"
    down = str(scenario_path("x4-nvlink-down"))
    assert main(["check", "--replay", down, "-f", "line", "--metrics", str(missing)]) == 1
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and len(line.strip()) <= 200, (len(line), line)
    assert line.startswith("topodoctor FAIL TD101 GPU1/nvlink5: ") and "(+3 more: 3 errors)" in line
    assert "; cannot write " in line and line.strip().endswith("/topodoctor-check.prom: no such directory")
    hang = str(scenario_path("x4-nvml-hang"))
    assert main(["check", "--replay", hang, "--timeout", "0.5", "-f", "line", "--metrics", str(missing)]) == 3
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and len(line.strip()) <= 200 and line.startswith("topodoctor UNKNOWN: ")
    assert "; cannot write " in line and "budget" in line


@pytest.mark.slow
def test_a_slurm_job_given_every_gpu_is_refused_for_another_jobs_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The prolog of a job Slurm gave all four GPUs judges them as the job's: a previous job's
    process on one of them fails it (TD511), as it does for a job given two."""
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0,1,2,3")
    assert main(["check", "--replay", str(scenario_path("x4-foreign-processes")), "-f", "line"]) == 1
    line = capsys.readouterr().out.strip()
    assert line.startswith("topodoctor FAIL TD511: GPU1 runs 2 compute processes")
    assert line.endswith("judged the job's 4 of 4 GPUs (0,1,2,3)")


@pytest.mark.slow
def test_a_gpu_slurm_gave_the_job_that_the_node_lacks_is_not_a_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slurm gave the job GPUs 0-3 and the node answers for two: the job's GPUs cannot all be
    judged (exit 3, the prolog drains), where GPUs it does have pass."""
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0,1,2,3")
    assert main(["check", "--replay", "h200-x2", "-f", "line"]) == 3
    line = capsys.readouterr().out.strip()
    assert line.startswith(
        "topodoctor UNKNOWN: the job's GPUs 2,3 (SLURM_JOB_GPUS=0,1,2,3) are not among the node's 2 GPUs"
    )
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    assert main(["check", "--replay", "h200-x2", "-f", "line"]) == 0
