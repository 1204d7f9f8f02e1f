"""`topodoctor diagnose` through typer's CliRunner: what it reads, its three formats, standard input,
directories, and the one-line error and exit 2 on inputs of no kind it reads; `collectives --from` on
nccl-tests' text, `bandwidth --from` on another tool's copy matrices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

import topodoctor
from topodoctor.cli.commands import app, main
from topodoctor.service import diagnose as service

runner = CliRunner()
EVIDENCE = FIXTURES / "evidence"


def test_text_lists_every_piece_with_what_was_cut() -> None:
    r = runner.invoke(
        app, ["diagnose", str(EVIDENCE / "h200-x4" / "host.txt"), str(EVIDENCE / "p2pbw-rtx4090-pair.txt")]
    )
    assert r.exit_code == 0, r.output
    assert "topo-matrix" in r.output and "smi-summary 580.159.04" in r.output
    assert "cut: 4 of the 6 matrices (the output is cut)" in r.output


def test_json_holds_the_evidence_and_a_finding_per_piece() -> None:
    r = runner.invoke(app, ["diagnose", str(EVIDENCE / "nccl-tests-rtx4090-tree-cut.txt"), "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["kind"] == "diagnose" and doc["exit_code"] == 0
    assert [p["kind"] for p in doc["evidence"]["pieces"]] == ["command-line", "nccl-tests"]
    assert doc["evidence"]["collectives"][0]["nranks"] == 8
    read = [f for f in doc["findings"] if f["code"] == "TD980"]
    assert len(read) == 2 and read[1]["evidence"]["cut"] == "the table ends inside the row of 8 B"


def test_one_line_and_standard_input() -> None:
    text = (EVIDENCE / "xid-journal-h100.txt").read_text()
    r = runner.invoke(app, ["diagnose", "-", "-f", "line"], input=text)
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "topodoctor OK: no findings; read kernel-xid"


def test_a_directory_reads_every_file_whatever_its_name(tmp_path: Path) -> None:
    for k, name in enumerate(["topo-h100-nv6-nics.txt", "nvlink-status-gb200.txt"]):
        (tmp_path / f"paste{k}.data").write_text((EVIDENCE / name).read_text())
    r = runner.invoke(app, ["diagnose", str(tmp_path), "-f", "json"])
    doc = json.loads(r.output)
    assert sorted(p["kind"] for p in doc["evidence"]["pieces"]) == ["nvlink-status", "topo-matrix"]


def test_no_input_of_a_known_kind_is_exit_2_naming_what_it_reads(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("the job was slow yesterday\n")
    r = runner.invoke(app, ["diagnose", str(other)])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "holds no kind of text diagnose reads" in lines[0]
    assert "nccl-tests output" in lines[0] and "nvidia-smi" in lines[0] and "Traceback" not in r.output


def test_json_asked_gets_a_json_answer_on_an_input_error_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("the job was slow yesterday\n")
    assert main(["diagnose", str(other), "-f", "json"]) == 2
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["kind"] == "diagnose" and doc["verdict"] == "unknown" and doc["exit_code"] == 2
    assert doc["findings"] == [] and "holds no kind of text diagnose reads" in doc["reason"]
    assert err.count("\n") == 1 and err.startswith("topodoctor: error: ")


def test_a_question_asked_in_sentences_is_read_and_judged(tmp_path: Path) -> None:
    """nccl#1442 as its reporter wrote it (fixtures/diagnose/holdout4/e-04): exit 0, normal, on their words."""
    r = runner.invoke(app, ["diagnose", str(FIXTURES / "diagnose" / "holdout4" / "e-04"), "-f", "line"])
    assert r.exit_code == 0 and r.output.strip() == "topodoctor OK: 1 info; read prose", r.output
    words = tmp_path / "question.txt"
    words.write_text("Our all_reduce on the cluster is slower than it should be. Is this expected? Any advice?\n")
    r = runner.invoke(app, ["diagnose", str(words)])  # sentences with no figure and no hardware: nothing read
    assert r.exit_code == 2 and "holds no kind of text diagnose reads" in r.output.strip().splitlines()[0]


def test_one_unreadable_input_beside_readable_ones_is_exit_2_and_says_which(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("nothing here\n")
    r = runner.invoke(app, ["diagnose", str(EVIDENCE / "topo-h100-nv6-nics.txt"), str(other), "-f", "line"])
    assert r.exit_code == 2
    assert r.output.startswith("topodoctor UNKNOWN: ") and "notes.txt" in r.output


def test_a_missing_file_is_exit_2() -> None:
    r = runner.invoke(app, ["diagnose", str(EVIDENCE / "no-such-paste.txt")])
    assert r.exit_code == 2 and "not found" in r.output


def test_collectives_from_reads_nccl_tests_text_like_its_json() -> None:
    text = FIXTURES / "nccl-tests" / "h200-x2" / "all_reduce.txt"
    a = runner.invoke(app, ["collectives", "--from", str(text), "--replay", "h200-x2", "-f", "json"])
    b = runner.invoke(
        app, ["collectives", "--from", str(text.with_suffix(".json")), "--replay", "h200-x2", "-f", "json"]
    )
    assert a.exit_code == b.exit_code, a.output
    assert a.stdout.startswith("{"), (a.stdout[:200], a.exception)
    doc_a, doc_b = json.loads(a.stdout), json.loads(b.stdout)
    assert [r["size_bytes"] for r in doc_a["rows"]] == [r["size_bytes"] for r in doc_b["rows"]]
    assert doc_a["source"] == doc_b["source"] == "nccl-tests" and doc_a["world_size"] == doc_b["world_size"] == 2


def test_bandwidth_from_another_tools_matrix_points_to_diagnose() -> None:
    r = runner.invoke(app, ["bandwidth", "--from", str(EVIDENCE / "h200-x4" / "p2pbw.txt")])
    assert r.exit_code == 2
    assert "p2pBandwidthLatencyTest output" in r.output and "topodoctor diagnose" in r.output


def test_the_python_api_reads_as_the_command_does() -> None:
    d = topodoctor.diagnose([EVIDENCE / "topo-h100-nv6-nics.txt"])
    assert d.exit_code == 0 and [p.kind for p in d.evidence.pieces] == ["topo-matrix"]
    assert d.to_json()["evidence"]["pieces"][0]["source"].endswith("topo-h100-nv6-nics.txt")


def test_an_internal_error_is_exit_3_in_one_line_never_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(ev: object) -> tuple[()]:
        raise RuntimeError("a bug")

    monkeypatch.setattr(service, "judge", broken)
    code = main(["diagnose", str(EVIDENCE / "topo-h100-nv6-nics.txt")])
    err = capsys.readouterr().err
    assert code == 3 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_directorys_other_files_are_said_but_are_no_error(tmp_path: Path) -> None:
    (tmp_path / "topo.txt").write_text((EVIDENCE / "topo-h100-nv6-nics.txt").read_text())
    (tmp_path / "screenshot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    r = runner.invoke(app, ["diagnose", str(tmp_path), "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["evidence"]["unreadable"] == [f"{tmp_path / 'screenshot.png'}: a PNG image, not text"]
    assert {f["severity"] for f in doc["findings"]} == {"info"}
