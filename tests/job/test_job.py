"""The job doctor on real flight recorders: gloo process groups that fail the ways jobs fail
(tests/support/job_ranks.py), each rank dumping its own recorder; NCCL dumps, RAS output and a GPU
sampling captured on a GPU host (fixtures/job, tests/gpu/job_capture.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, scenario_path

from topodoctor.cli.commands import main
from topodoctor.job import dumps as fr

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@pytest.fixture(scope="module")
def gloo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every scenario of tests/support/job_ranks.py, run once for the module (about 20 s: its tests are slow)."""
    out = tmp_path_factory.mktemp("gloo-jobs")
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "2000", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "job_ranks.py"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _job(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["job", *argv, "-f", "json"])
    out, err = capsys.readouterr()
    assert out, err
    return code, json.loads(out)


SCENARIOS = {
    # scenario: (kind, rank, host from the map)
    "sleep": ("not-enqueued", 1, "node01"),
    "exit": ("missing-dump", 2, "node02"),
    "op": ("op-mismatch", 2, "node02"),
    "size": ("size-mismatch", 1, "node01"),
    "late": ("straggler", 2, "node02"),
    "late-once": ("late-rank", 2, "node02"),
}


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_gloo_failure_names_rank_kind_and_host(scenario: str, gloo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kind, rank, host = SCENARIOS[scenario]
    d = gloo / scenario
    code, doc = _job([str(d), "--map", str(d / "ranks.map")], capsys)
    assert code == 1, doc["reason"]
    first = doc["findings"][0]
    assert (first["kind"], first["ranks"], first["hosts"]) == (kind, [rank], [host]), doc["reason"]
    assert doc["reason"].startswith(f"topodoctor JOB FAIL {kind} rank {rank} ({host}")
    assert [f for f in doc["findings"] if f["severity"] == "error"] == [first], "one culprit, not its echoes"


@pytest.mark.slow
@needs_torch
def test_missing_dump_of_a_healthy_job_is_named(gloo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Transform: the healthy run's dumps without rank 1's file (a rank whose dump never arrived).
    d = tmp_path / "missing"
    shutil.copytree(gloo / "healthy", d)
    (d / "nccl_trace_rank_1").unlink()
    shutil.rmtree(d / "json")
    code, doc = _job([str(d), "--map", str(d / "ranks.map")], capsys)
    assert code == 1
    assert [(f["kind"], f["ranks"], f["hosts"]) for f in doc["findings"]] == [("missing-dump", [1], ["node01"])]


@pytest.mark.slow
@needs_torch
def test_missing_dump_is_found_from_the_world_size_without_a_map(
    gloo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "missing"
    d.mkdir()
    for r in (0, 1):  # rank 2, the highest, left nothing: only --world-size can say it existed
        shutil.copy(gloo / "healthy" / f"nccl_trace_rank_{r}", d)
    code, doc = _job([str(d), "--world-size", "3"], capsys)
    assert code == 1 and doc["findings"][0]["ranks"] == [2]


@pytest.mark.slow
@needs_torch
def test_healthy_job_is_ok(gloo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = gloo / "healthy"
    code, doc = _job([str(d), "--map", str(d / "ranks.map")], capsys)
    assert (code, doc["verdict"], doc["findings"]) == (0, "ok", [])
    assert doc["ranks"] == [0, 1, 2]


@pytest.mark.slow
@needs_torch
def test_late_rank_below_the_threshold_is_no_straggler(gloo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _job([str(gloo / "late"), "--late-ms", "60"], capsys)  # rank 2 is 30 ms late
    assert code == 0 and doc["findings"] == []
    table = {r["rank"]: r for r in doc["lateness"][0]["ranks"]}
    assert 25 <= table[2]["median_ms"] <= 60 and table[0]["median_ms"] < 5
    assert not [f for f in doc["findings"] if f["kind"] == "late-rank"]  # 30 ms every time is no single event


@pytest.mark.slow
@needs_torch
def test_a_rank_once_past_its_peers_timeout_is_named_with_its_lateness(
    gloo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = _job([str(gloo / "late-once")], capsys)
    late = next(f for f in doc["findings"] if f["kind"] == "late-rank")
    assert code == 1 and late["severity"] == "error" and late["ranks"] == [2]
    assert "past its peers' 3 s timeout" in late["message"]
    table = {r["rank"]: r for r in doc["lateness"][0]["ranks"]}
    assert table[2]["median_ms"] < 5  # the median alone hides it


@pytest.mark.slow
@needs_torch
def test_json_form_of_the_dumps_reads_like_the_pickle(gloo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = gloo / "sleep"
    _, from_pickle = _job([str(d), "--map", str(d / "ranks.map")], capsys)
    _, from_json = _job([str(d / "json"), "--map", str(d / "ranks.map")], capsys)
    assert from_json["findings"][0]["kind"] == from_pickle["findings"][0]["kind"] == "not-enqueued"
    assert from_json["groups"][0]["enqueued"] == from_pickle["groups"][0]["enqueued"]


@pytest.mark.slow
@needs_torch
def test_culprit_joined_with_its_hosts_check_result(
    gloo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Transform: a derived unhealthy node's check result (one NVLink down) renamed to the
    # culprit's host; the other hosts' results come from the healthy bundled recording.
    results = tmp_path / "results"
    results.mkdir()
    for host, replay in (("node00", "h200-x4"), ("node01", str(scenario_path("x4-nvlink-down")))):
        main(["check", "--replay", replay, "-f", "json"])
        doc = json.loads(capsys.readouterr().out)
        doc["host"] = host
        (results / f"{host}.check.json").write_text(json.dumps(doc))
    d = gloo / "sleep"
    code, doc = _job([str(d), "--map", str(d / "ranks.map"), "--results", str(results)], capsys)
    assert code == 1
    assert "likely cause on node01: TD101" in doc["findings"][0]["why"]
    assert "likely cause on node01: TD101" in doc["reason"]
    # The same stall with the culprit on a healthy host: no cause is claimed.
    (results / "node01.check.json").write_text((results / "node00.check.json").read_text().replace("node00", "node01"))
    _, doc = _job([str(d), "--map", str(d / "ranks.map"), "--results", str(results)], capsys)
    assert doc["findings"][0]["why"] == "no health evidence on node01 (1 result, all healthy)"


class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch /tmp/topodoctor-pwned",))


def test_pickle_with_code_is_refused_without_running_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps({"version": "2.10", "entries": [_Boom()]}))
    code = main(["job", str(p)])
    err = capsys.readouterr().err
    assert code == 2
    assert "refers to posix.system" in err and err.count("\n") == 1
    assert not Path("/tmp/topodoctor-pwned").exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x80\x04garbage", "not a flight-recorder dump"),
        (pickle.dumps([1, 2, 3]), "no 'entries'"),
        (pickle.dumps({"entries": [{1, 2}]}), "holds a set"),
        (b'{"entries": [NaN]}', "not acceptable JSON"),
    ],
)
def test_corrupt_dumps_are_one_line_each(data: bytes, message: str, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=message):
        fr.parse_dump(data, "nccl_trace_rank_3")


def test_dump_ranks_come_from_torchs_file_names() -> None:
    assert [fr.rank_from_name(n) for n in ("nccl_trace_rank_12", "rank3.json", "trace_7.pkl", "notes.txt")] == [
        12,
        3,
        7,
        None,
    ]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        ([], 2, "nothing to judge"),
        (["/nonexistent/nccl_trace_rank_0"], 2, "no readable flight-recorder dump"),
        (["--ras-file", "/dev/zero"], 2, "not a regular file"),
        (["--ras", "127.0.0.1:1", "--timeout", "3"], 3, "nothing could be judged"),
    ],
)
def test_bad_input_is_one_line_and_its_code(
    argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    got = main(["job", *argv, "-f", "line"]) if code == 3 else main(["job", *argv])
    out, err = capsys.readouterr()
    assert got == code
    assert message in (out + err) and (out + err).count("\n") == 1


def test_bad_map_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = tmp_path / "ranks.map"
    m.write_text("0 node00 0\nnode01 1\n")
    dump = tmp_path / "nccl_trace_rank_0"
    dump.write_bytes(pickle.dumps({"version": "2.10", "entries": []}))
    assert main(["job", str(dump), "--map", str(m)]) == 2
    assert "line 2: expected 'RANK HOST" in capsys.readouterr().err
