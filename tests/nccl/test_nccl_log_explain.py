"""`topodoctor nccl-log` on real NCCL output recorded on the one-GPU H200 host under each fault
(fixtures/nccl-logs/failures/<case>/<NCCL_DEBUG level>/, tests/gpu/nccl_failures.py), on the
synthetic cases the host cannot produce (fixtures/nccl-logs/synthetic/), and on healthy logs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.nccl.explain import EXPLANATIONS, explain
from topodoctor.nccl.parse import LogFile, parse_file

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs"
FAILURES = LOGS / "failures"
SYNTHETIC = LOGS / "synthetic"


def _files(path: Path) -> list[LogFile]:
    paths = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.suffix in (".txt", ".log"))
    return [parse_file(str(p), p.read_text(errors="replace")) for p in paths]


REAL = {
    "net-ib": "TD040",
    "socket-ifname": "TD041",
    "duplicate-gpu": "TD042",
    "peer-died": "TD046",
    "watchdog": "TD047",
}
# The second recording (tests/gpu/nccl_failures2.sh, placed by fixtures/nccl_failures_import.py only
# where NCCL did fail): each class is tested at every level once its recording is in place.
SECOND = {"shm-small": "TD043", "version-mismatch": "TD048"}
REAL.update({case: code for case, code in SECOND.items() if (FAILURES / case).is_dir()})


@pytest.mark.parametrize("level", ["unset", "warn", "info"])
@pytest.mark.parametrize("case", sorted(REAL))
def test_real_failure_explained_at_every_level(case: str, level: str) -> None:
    files = _files(FAILURES / case / level)
    findings = explain(files)
    assert findings, f"{case}/{level}: nothing explained"
    first = findings[0]
    assert first.code == REAL[case]
    assert first.severity == "error"
    ev = first.evidence
    line = Path(ev["file"]).read_text(errors="replace").splitlines()[ev["line"] - 1]
    assert ev["text"] in line.strip()  # the evidence is the file's own line
    if "candidates" in ev:  # a message of several causes: the fix lists them, most likely first
        assert all(str(c) in first.fix for c in ev["candidates"])
    else:
        assert first.fix == EXPLANATIONS[first.code].fix
    expected_level = {"unset": "unset", "warn": "WARN", "info": "INFO"}[level]
    assert files[0].level in (expected_level, "VERSION")


def test_watchdog_names_op_sequence_and_timeout_and_not_the_teardown() -> None:
    findings = explain(_files(FAILURES / "watchdog" / "warn"))
    assert [f.code for f in findings] == ["TD047"]  # the socket closing afterwards is no second cause
    assert findings[0].evidence["op"] == "ALLREDUCE" and findings[0].evidence["timeout_ms"] == 5000


def test_peer_died_is_a_peer_lost_on_the_surviving_rank() -> None:
    (f,) = [f for f in explain(_files(FAILURES / "peer-died" / "unset")) if f.code == "TD046"]
    assert f.subject == "rank0"


def test_ib_hca_with_no_device_is_a_fallback_warning_at_info() -> None:
    findings = explain(_files(FAILURES / "ib-hca" / "info"))
    assert [(f.code, f.severity) for f in findings] == [("TD050", "warning")]
    assert explain(_files(FAILURES / "ib-hca" / "warn")) == []  # nothing in the log says so


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("shm-small.txt", "TD043"),
        ("cuda-driver.txt", "TD044"),
        ("ib-completion.txt", "TD045"),
        ("no-reason.txt", "TD049"),
        ("version-mismatch", "TD048"),
    ],
)
def test_synthetic_failure_explained(name: str, code: str) -> None:
    findings = explain(_files(SYNTHETIC / name))
    assert [f.code for f in findings][:1] == [code]


def test_shm_lines_of_nccl_2_28_name_the_segment_its_size_and_the_error() -> None:
    """misc/shmutils.cc (2.26 - 2.29) warns of the fallocate that failed before the segment's summary."""
    text = (
        "vm:1:2 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab12Cd to 20971524 bytes, "
        "error: No space left on device (28)\n"
        "vm:1:2 [0] misc/shmutils.cc:128 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Ab12Cd "
        "(size 20971520), error: No space left on device (28)\n"
        "vm:1:1 [0] misc/shmutils.cc:74 NCCL WARN Error: failed to create shared memory file /dev/shm/nccl-XXXXXX, "
        "error No space left on device (28)\n"
    )
    (f,) = explain([parse_file("rank0.txt", text)])
    assert f.code == "TD043" and f.evidence["line"] == 1 and f.evidence["events"] == 3
    assert f.message == (
        "shared memory segment /dev/shm/nccl-Ab12Cd of 20971524 bytes could not be created: No space left on device"
    )
    (g,) = explain([parse_file("rank1.txt", text.splitlines(keepends=True)[2])])
    assert g.message == "shared memory segment /dev/shm/nccl-XXXXXX could not be created: No space left on device"


def test_ib_completion_status_is_named_and_the_remote_error_is_not_a_second_cause() -> None:
    findings = explain(_files(SYNTHETIC / "ib-completion.txt"))
    assert [f.code for f in findings] == ["TD045"]
    assert findings[0].evidence["status"] == 12
    assert "retry counter exceeded" in findings[0].message


def test_no_reason_names_likely_causes_and_the_variable_to_set() -> None:
    (f,) = explain(_files(SYNTHETIC / "no-reason.txt"))
    assert "NCCL_NET" in f.message and "NCCL_SOCKET_IFNAME" in f.message
    assert "NCCL_DEBUG=WARN" in f.fix


def test_versions_differing_between_files_are_a_mismatch() -> None:
    a = parse_file("rank0.log", "h:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n")
    b = parse_file("rank1.log", "h:2:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    assert [f.code for f in explain([a, b])] == ["TD048"]
    c = parse_file("rank1.log", "h:2:2 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n")
    assert explain([a, c]) == []


@pytest.mark.parametrize("variant", ["healthy/info", "algo-ring/info", "algo-tree/info"])
def test_healthy_real_logs_have_no_finding(variant: str) -> None:
    assert explain(_files(FAILURES / variant)) == []


def test_healthy_log_tuning_parsed_end_to_end() -> None:
    (rank0, _) = _files(FAILURES / "healthy" / "info")
    c = rank0.choices
    assert c is not None
    # the cost table of two emulated nodes over sockets: 1.2 GB/s per channel assumed for lo
    ring = c.cost("all_reduce", "Ring", "Simple")
    assert ring is not None and ring.algbw_gbps == pytest.approx(1.2) and ring.latency_us == pytest.approx(36.4)
    assert c.cost("all_reduce", "Tree", "Simple") is not None
    assert [g.pattern for g in c.graphs][:2] == ["ring", "tree"]
    big = c.chosen("all_reduce", 1 << 26)
    assert big is not None and (big.algorithm, big.protocol, big.channels) == ("Ring", "Simple", 2)
    small = c.chosen("all_reduce", 4096)
    assert small is not None and small.protocol == "LL"
    assert rank0.account is not None and rank0.account.nodes == 2


def test_forced_tree_is_what_nccl_chose() -> None:
    (rank0, _) = _files(FAILURES / "algo-tree" / "info")
    assert rank0.choices is not None
    assert {c.algorithm for c in rank0.choices.calls} == {"Tree"}


def test_older_per_call_forms() -> None:
    text = (
        "h:1:1 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo 1 proto 2 time 36.400000\n"
        "h:1:1 [0] NCCL INFO 4096 Bytes -> Algo 0 proto 0 time 8.000000\n"
    )
    f = parse_file("old.log", text)
    assert f.choices is not None
    got = {(c.op, c.size_bytes, c.algorithm, c.protocol, c.channels) for c in f.choices.calls}
    assert got == {("all_reduce", 1048576, "Ring", "Simple", None), ("?", 4096, "Tree", "LL", None)}


def test_nccl_tests_output_version_and_ranks() -> None:
    (f,) = _files(LOGS.parent / "nccl-tests" / "h200-x2" / "all_reduce.txt")
    assert f.versions == ("2.28.3",) and f.ranks == (0, 1)
    assert explain([f]) == []


runner = CliRunner()


def test_cli_failure_exit_1_with_code_and_evidence() -> None:
    r = runner.invoke(app, ["nccl-log", str(FAILURES / "net-ib" / "unset")])
    assert r.exit_code == 1, r.output
    assert "TD040 error" in r.stdout and "evidence:" in r.stdout and "Failed to initialize any NET plugin" in r.stdout


def test_cli_healthy_exit_0_json() -> None:
    r = runner.invoke(app, ["nccl-log", "-f", "json", str(FAILURES / "healthy" / "info")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["findings"] == []
    s = doc["summary"]
    assert s["ranks"] == 2 and s["nodes"] == 2 and list(s["versions"]) == ["2.28.9+cuda13.0"]
    assert {(c["op"], c["size_bytes"]): c["algorithm"] for c in s["choices"]}[("all_reduce", 1 << 26)] == "Ring"
    assert {t["via"] for t in s["transports"]} == {"NET/Socket"}


def test_cli_bad_inputs_exit_2(tmp_path: Path) -> None:
    r = runner.invoke(app, ["nccl-log", str(tmp_path / "absent.log")])
    assert r.exit_code == 2 and "not found" in r.output
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    r = runner.invoke(app, ["nccl-log", str(empty)])
    assert r.exit_code == 2 and "holds no" in r.output
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    r = runner.invoke(app, ["nccl-log", str(fifo)])
    assert r.exit_code == 2 and "not a regular file" in r.output
    r = runner.invoke(app, ["nccl-log"])
    assert r.exit_code == 2


def test_cli_undecodable_bytes_are_read(tmp_path: Path) -> None:
    p = tmp_path / "job.err"
    warn = b"node:1:1 [0] misc/socket.cc:72 NCCL WARN socketProgress: Connection closed by remote peer x<1>\n"
    p.write_bytes(b"\xff\xfe garbage\n" + warn)
    r = runner.invoke(app, ["nccl-log", str(p)])
    assert r.exit_code == 1 and "TD046" in r.stdout


@pytest.mark.parametrize(("case", "code"), [("td-net-ib", "TD040"), ("td-socket-ifname", "TD041")])
def test_topodoctor_ranks_own_logs_explained(case: str, code: str) -> None:
    # each rank was `topodoctor collectives` joined to the world; its NCCL log and its stderr together
    d = FAILURES / case / "info"
    files = _files(d) + [parse_file(str(p), p.read_text()) for p in sorted(d.glob("logs*/nccl.*.log"))]
    assert [f.code for f in explain(files)][:1] == [code]


def test_topodoctor_healthy_run_over_emulated_nodes() -> None:
    d = FAILURES / "td-healthy" / "info"
    files = [parse_file(str(p), p.read_text()) for p in sorted(d.glob("logs*/nccl.*.log"))]
    assert explain(files) == []
    (rank0, _) = files
    assert rank0.choices is not None and rank0.choices.chosen("all_reduce", 64 << 20) is not None


def test_explain_knows_the_log_codes() -> None:
    r = runner.invoke(app, ["explain", "TD041"])
    assert r.exit_code == 0 and "nccl-log-no-socket-interface" in r.stdout and "NCCL_SOCKET_IFNAME" in r.stdout
    assert runner.invoke(app, ["explain", "nccl-log-peer-lost"]).exit_code == 0
    assert runner.invoke(app, ["explain", "TD999"]).exit_code == 2


def test_nccl_tests_failure_lines() -> None:
    # nccl-tests' NCCLCHECK (src/common.h, NCCL >= 2.13): "host: Test NCCL failure FILE:LINE 'class / last error'"
    head = "node3: Test NCCL failure common.cu:1005 'invalid usage (run with NCCL_DEBUG=WARN for details) / "
    (known,) = explain([parse_file("a.txt", head + "Bootstrap : no socket interface found'\n")])
    assert known.code == "TD041"
    (other,) = explain([parse_file("b.txt", head + "something new went wrong'\n")])
    assert (other.code, other.evidence["reason"]) == ("TD052", "something new went wrong")
    (bare,) = explain([parse_file("c.txt", head + "'\n")])
    assert bare.code == "TD049" and "invalid usage" in bare.message
