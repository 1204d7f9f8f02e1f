"""The job doctor on what a GPU host recorded (fixtures/job, made by tests/gpu/job_capture.py on
an H200 with torch 2.11 and NCCL 2.28.9): NCCL flight-recorder dumps of three-rank jobs, NCCL
RAS's answers during a live hang, and NVML samplings of the hung GPU and of the idle one."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, scenario_path

from topodoctor.cli.commands import main
from topodoctor.job import ras
from topodoctor.probe.sampler import replay_activity

JOB = FIXTURES / "job"
NCCL = JOB / "nccl"
BUS = "00000000:00:06.0"


def _job(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["job", *argv, "-f", "json"])
    out, err = capsys.readouterr()
    assert out, err
    return code, json.loads(out)


@pytest.mark.parametrize(
    ("scenario", "kind", "rank"),
    [
        ("sleep", "not-enqueued", 1),
        ("exit", "missing-dump", 2),
        ("op", "op-mismatch", 2),
        ("size", "size-mismatch", 1),
        ("late", "straggler", 2),
    ],
)
def test_nccl_failure_names_rank_kind_host_and_gpu(
    scenario: str, kind: str, rank: int, capsys: pytest.CaptureFixture[str]
) -> None:
    d = NCCL / scenario
    code, doc = _job([str(d), "--map", str(d / "ranks.map")], capsys)
    assert code == 1
    first = doc["findings"][0]
    assert (first["kind"], first["ranks"], first["hosts"]) == (kind, [rank], [f"node{rank}"])
    assert first["places"][0]["gpu"] == BUS
    assert [f for f in doc["findings"] if f["severity"] == "error"] == [first]


def test_nccl_straggler_is_ranked_on_gpu_time(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = _job([str(NCCL / "late")], capsys)
    (late,) = doc["lateness"]
    assert late["basis"] == "gpu-time"
    table = {r["rank"]: r for r in late["ranks"]}
    assert 28 <= table[2]["median_ms"] <= 40  # the rank slept 30 ms before each collective
    assert table[0]["median_ms"] < 3 and table[1]["median_ms"] < 3


def test_nccl_healthy_job_and_its_missing_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = NCCL / "healthy"
    assert _job([str(d), "--map", str(d / "ranks.map")], capsys)[0] == 0
    # Transform: the healthy job's dumps without rank 1's.
    m = tmp_path / "missing"
    shutil.copytree(d, m)
    (m / "nccl_trace_rank_1").unlink()
    code, doc = _job([str(m), "--map", str(m / "ranks.map")], capsys)
    assert code == 1
    assert [(f["kind"], f["ranks"], f["hosts"]) for f in doc["findings"]] == [("missing-dump", [1], ["node1"])]


def test_nccl_culprit_joined_with_a_derived_unhealthy_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Transform: the check result of a derived node with one NVLink down, named node1 (the rank
    # that never entered the collective), beside node0's healthy result.
    results = tmp_path / "results"
    results.mkdir()
    for host, replay in (("node0", "h200-x4"), ("node1", str(scenario_path("x4-nvlink-down")))):
        assert main(["check", "--replay", replay, "-f", "json"]) in (0, 1)
        doc = json.loads(capsys.readouterr().out)
        doc["host"] = host
        (results / f"{host}.check.json").write_text(json.dumps(doc))
    d = NCCL / "sleep"
    assert main(["job", str(d), "--map", str(d / "ranks.map"), "--results", str(results), "-f", "line"]) == 1
    line = capsys.readouterr().out
    assert line.startswith("topodoctor JOB FAIL not-enqueued rank 1 (node1, local rank 0, GPU 00000000:00:06.0)")
    assert "likely cause on node1: TD101 error GPU1/nvlink5: GPU1 NVLink 5 is down" in line
    assert line.count("\n") == 1


def test_ras_text_of_a_live_hang_names_the_rank_behind() -> None:
    report = ras.parse((JOB / "ras" / "hang.txt").read_text())
    assert report.nccl_version == "2.28.9"
    (issue,) = report.issues
    assert (issue.kind, issue.comm_size) == ("MISMATCH", 3)
    assert [(r.rank, r.launched, r.gpu, r.pid, r.host) for r in issue.culprits] == [(1, 3, "0", 1089, "127.0.0.1")]


def test_ras_json_of_the_same_hang_agrees_with_its_text() -> None:
    text = ras.parse((JOB / "ras" / "hang.txt").read_text())
    doc = ras.parse((JOB / "ras" / "hang.json").read_text())
    assert [(i.kind, [(r.rank, r.launched, r.pid) for r in i.culprits]) for i in doc.issues] == [
        (i.kind, [(r.rank, r.launched, r.pid) for r in i.culprits]) for i in text.issues
    ]


def test_ras_agrees_with_the_dumps(capsys: pytest.CaptureFixture[str]) -> None:
    d = NCCL / "sleep"
    code, doc = _job([str(d), "--map", str(d / "ranks.map"), "--ras-file", str(JOB / "ras" / "hang.txt")], capsys)
    assert code == 1
    kinds = [(f["kind"], f["ranks"]) for f in doc["findings"]]
    assert kinds == [("not-enqueued", [1]), ("ras-mismatch", [1])]
    assert "; NCCL RAS agrees;" in doc["reason"] and "more)" not in doc["reason"]


def test_ras_without_dumps_names_rank_process_and_node(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _job(["--ras-file", str(JOB / "ras" / "hang.json")], capsys)
    assert code == 1
    (f,) = doc["findings"]
    assert f["kind"] == "ras-mismatch" and f["hosts"] == ["127.0.0.1"]
    assert "rank 1 GPU 0 process 1089 on 127.0.0.1 launched 3 ops" in f["message"]


class _FakeRas:
    """A RAS service on a local port answering the captured verbose status, or never answering."""

    def __init__(self, answer: str | None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        self.heard: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            buf = b""
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, _, buf = buf.partition(b"\n")
                    cmd = line.decode()
                    self.heard.append(cmd)
                    if self.answer is None:
                        continue  # a wedged service: accepts, never answers
                    if cmd.startswith("CLIENT PROTOCOL"):
                        conn.sendall(b"SERVER PROTOCOL 2\n")
                    elif cmd.startswith(("TIMEOUT", "SET FORMAT")):
                        conn.sendall(b"OK\n")
                    elif cmd == "VERBOSE STATUS":
                        conn.sendall(self.answer.encode())
                        return


def test_live_ras_query_speaks_the_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    fake = _FakeRas((JOB / "ras" / "hang.txt").read_text())
    code, doc = _job(["--ras", f"127.0.0.1:{fake.port}"], capsys)
    assert code == 1 and doc["findings"][0]["kind"] == "ras-mismatch"
    assert fake.heard[0] == "CLIENT PROTOCOL 2" and fake.heard[-1] == "VERBOSE STATUS"


@pytest.mark.slow
def test_wedged_ras_service_costs_the_timeout_not_a_hang(capsys: pytest.CaptureFixture[str]) -> None:
    fake = _FakeRas(None)
    t0 = time.monotonic()
    code = main(["job", "--ras", f"127.0.0.1:{fake.port}", "--timeout", "2", "-f", "line"])
    out = capsys.readouterr().out
    assert time.monotonic() - t0 < 5
    assert code == 3 and out.startswith("topodoctor JOB UNKNOWN: nothing could be judged (NCCL RAS at 127.0.0.1:")


def test_hung_gpu_spins_in_its_collective(capsys: pytest.CaptureFixture[str]) -> None:
    sampled = replay_activity(json.loads((JOB / "activity" / "hang.json").read_text()), "hang")
    (gpu,) = sampled.gpus
    assert gpu.median_util == 100 and gpu.median_power_w is not None and gpu.median_power_w < 130
    assert len(gpu.processes) == 3  # the job's three ranks
    code, doc = _job(["--replay-live", str(JOB / "activity" / "hang.json"), "--host", "gpu-host"], capsys)
    assert code == 0  # every GPU of the job here waits: the culprit is elsewhere (a warning)
    assert [(f["kind"], f["severity"]) for f in doc["findings"]] == [("gpus-spinning", "warning")]
    assert doc["gpus"][0]["state"] == "spinning"


@pytest.mark.parametrize(("flags", "code"), [([], 0), (["--strict"], 1), (["--fail-level", "warning"], 1)])
def test_the_fail_level_decides_whether_a_warning_fails(
    flags: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """--fail-level and --strict mean in `job` what they mean in every command."""
    hang = str(JOB / "activity" / "hang.json")
    assert main(["job", "--replay-live", hang, "-f", "line", *flags]) == code
    line = capsys.readouterr().out
    assert line.startswith("topodoctor JOB FAIL gpus-spinning: " if code else "topodoctor JOB OK: gpus-spinning: ")


def test_idle_gpu_after_the_job_is_no_finding(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _job(["--replay-live", str(JOB / "activity" / "idle.json")], capsys)
    assert (code, doc["findings"], doc["gpus"][0]["state"]) == (0, [], "idle")


def _two_gpus(tmp_path: Path) -> Path:
    """Transform: the hung host's recording with a second GPU whose answers are the idle
    recording's (utilisation 0) and which runs the job's third process."""
    hang = json.loads((JOB / "activity" / "hang.json").read_text())
    idle = json.loads((JOB / "activity" / "idle.json").read_text())
    calls = []
    for c in hang["nvml"]:
        if c["fn"] == "nvmlDeviceGetCount":
            c = {**c, "result": 2}
        calls.append(c)
        if c["args"] == ["gpu:0"] or c["args"] == [0]:
            twin = next(i for i in idle["nvml"] if i["fn"] == c["fn"] and i["args"] == c["args"])
            args = ["gpu:1"] if c["args"] == ["gpu:0"] else [1]
            result = twin.get("result")
            if c["fn"] == "nvmlDeviceGetHandleByIndex":
                result = "gpu:1"
            if c["fn"] == "nvmlDeviceGetComputeRunningProcesses":
                result = [dict(twin["result"][0], pid=4242)] if twin["result"] else [{"pid": 4242, "usedGpuMemory": 1}]
            calls.append({**twin, "args": args, "result": result})
    p = tmp_path / "two-gpus.json"
    p.write_text(json.dumps({**hang, "nvml": calls}))
    return p


def test_the_one_gpu_that_does_not_spin_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _job(["--replay-live", str(_two_gpus(tmp_path)), "--host", "node7"], capsys)
    assert code == 1
    (f,) = doc["findings"]
    assert f["kind"] == "gpu-not-spinning" and f["hosts"] == ["node7"]
    assert "GPU 1 idle" in f["message"] and "pids 4242" in f["message"]


def _as_format_2_2(src: Path, dst: Path) -> None:
    """Transform: a dump as torch 2.5 wrote it (format "2.2"): no pg_status (the counters came
    later), no thread fields, the NCCL communicator's state under nccl_comm_state."""
    import pickle

    doc = pickle.loads(src.read_bytes())
    doc.pop("pg_status", None)
    doc.pop("comm_lib_version", None)
    doc["version"] = "2.2"
    doc["nccl_comm_state"] = {}
    for e in doc["entries"]:
        e.pop("thread_id", None)
        e.pop("thread_name", None)
    dst.write_bytes(pickle.dumps(doc, protocol=2))


@pytest.mark.parametrize(("scenario", "kind", "rank"), [("sleep", "not-enqueued", 1), ("size", "size-mismatch", 1)])
def test_dumps_of_an_older_format_are_judged_alike(
    scenario: str, kind: str, rank: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for src in (NCCL / scenario).glob("nccl_trace_rank_*"):
        _as_format_2_2(src, tmp_path / src.name)
    code, doc = _job([str(tmp_path)], capsys)
    assert code == 1 and (doc["findings"][0]["kind"], doc["findings"][0]["ranks"]) == (kind, [rank])


def test_hosts_from_the_directories_dumps_were_collected_into(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Transform: each rank's dump collected into a directory named after its node.
    for r in range(3):
        (tmp_path / f"gpu-node-{r}").mkdir()
        shutil.copy(NCCL / "sleep" / f"nccl_trace_rank_{r}", tmp_path / f"gpu-node-{r}")
    code, doc = _job([str(tmp_path), "--host-from-dir"], capsys)
    assert code == 1 and doc["findings"][0]["hosts"] == ["gpu-node-1"]


def test_live_sampling_without_nvml_is_a_note_beside_dumps(capsys: pytest.CaptureFixture[str]) -> None:
    d = NCCL / "sleep"  # conftest refuses the real NVML: the sampling child fails as on a host without it
    code, doc = _job([str(d), "--live", "--live-seconds", "0.5"], capsys)
    assert code == 1 and doc["findings"][0]["kind"] == "not-enqueued"
    assert any(n.startswith("--live: ") for n in doc["notes"])
    assert main(["job", "--live", "--live-seconds", "0.5"]) == 3  # alone, it could not analyse anything
    assert capsys.readouterr().err.count("\n") == 1
