"""A previous job's processes on the GPUs of the next one (TD511): an error in a prolog or a job's
scope, information on a whole node. The probe lists them through NVML and reads who runs them
from /proc, recorded and replayed; what it cannot read is "unknown", never a failure."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import scenario_path
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.core.probed import ProbeError
from topodoctor.probe.collect import collect
from topodoctor.probe.processes import MAX_CMDLINE_BYTES
from topodoctor.probe.replay import FakeNvml, ReplaySysfs
from topodoctor.probe.sources import probe_host

runner = CliRunner()
SCENARIO = str(scenario_path("x4-foreign-processes"))


def _check(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    r = runner.invoke(app, ["check", "--replay", SCENARIO, "-f", "json", *args], env=env)
    return r.exit_code, json.loads(r.stdout)


def _td511(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["code"] == "TD511"]


def test_the_probe_names_pid_memory_user_and_command() -> None:
    gpu = probe_host(SCENARIO).snapshot.gpu(1)
    assert isinstance(gpu.compute_processes, tuple)
    first, second = gpu.compute_processes
    assert (first.pid, first.used_memory_bytes, first.uid, first.parent_pid) == (48213, 72 << 30, 1001, 48190)
    assert first.cmdline == "python train.py --config llama-70b.yaml" and not first.ours
    assert first.slurm_job == "4711"  # from its cgroup; the prolog's own runs under slurmd, in no job
    # an unreadable /proc entry is unknown, not a failed probe
    assert (second.pid, second.used_memory_bytes) == (48290, 1 << 30)
    assert isinstance(second.uid, ProbeError) and second.uid.error == "EACCES" and not second.ours
    assert second.slurm_job is None
    assert probe_host(SCENARIO).snapshot.gpu(0).compute_processes == ()


def test_in_a_prolog_they_fail_the_check_naming_each_process() -> None:
    code, doc = _check("--prolog")
    (f,) = _td511(doc)
    assert (code, f["severity"], f["subject"]) == (1, "error", "GPU1")
    assert "pid 48213 (uid 1001, Slurm job 4711, 72.0 GiB, python train.py --config llama-70b.yaml)" in f["message"]
    assert "pid 48290 (user unknown, 1.0 GiB, command unknown)" in f["message"]
    assert [p["pid"] for p in f["evidence"]["processes"]] == [48213, 48290]
    line = runner.invoke(app, ["check", "--replay", SCENARIO, "--prolog", "-f", "line"]).stdout
    assert line.startswith("topodoctor FAIL TD511: GPU1 runs 2 compute processes of another job: pid 48213")


def test_in_a_job_scope_on_its_gpus_they_fail_the_check() -> None:
    code, doc = _check(env={"CUDA_VISIBLE_DEVICES": "1,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert code == 1 and [f["severity"] for f in _td511(doc)] == ["error"]
    code, doc = _check("--scope", "job", env={"SLURM_JOB_GPUS": "1"})
    assert code == 1 and [f["severity"] for f in _td511(doc)] == ["error"]


def test_near_misses_other_gpus_and_a_whole_node() -> None:
    code, doc = _check(env={"CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert code == 0 and _td511(doc) == []  # another job's GPU: not this job's business
    code, doc = _check()
    assert code == 0 and [f["severity"] for f in _td511(doc)] == ["info"]  # a node shared by jobs
    code, doc = _check("--scope", "node", "--prolog")
    assert code == 1  # a prolog gates a job whatever the scope


def _recording() -> dict[str, Any]:
    rec: dict[str, Any] = json.loads(scenario_path("x4-foreign-processes").read_text())
    return rec


def _snapshot(rec: dict[str, Any]) -> Any:
    return collect(FakeNvml(rec["nvml"], "t"), ReplaySysfs(rec["sysfs"], "t"))


def test_the_checks_own_children_are_not_foreign() -> None:
    rec = _recording()
    for r in rec["sysfs"]:
        if r["path"] == "/proc/self":
            r["result"] = "/proc/48190"  # the probe is the parent of 48213
    (mine, other) = _snapshot(rec).gpu(1).compute_processes
    assert mine.ours and not other.ours


def test_processes_of_the_job_the_check_runs_in_are_not_foreign() -> None:
    """A check inside job 4711 (a step's health check) sees that job's ranks as its own; a
    process whose cgroup it cannot read stays someone else's."""
    rec = _recording()
    for r in rec["sysfs"]:
        if r["path"] == "/proc/self/cgroup":
            r["result"] = "0::/system.slice/slurmstepd.scope/job_4711/step_1/user/task_0"
    (same, unknown) = _snapshot(rec).gpu(1).compute_processes
    assert same.ours and not unknown.ours


def test_the_command_line_is_read_within_its_bound() -> None:
    rec = _recording()
    long = ("python\x00" + "x" * 10_000 + "\x00").encode()
    for r in rec["sysfs"]:
        if r["path"] == "/proc/48213/cmdline":
            r["result"] = long.hex()
    (first, _) = _snapshot(rec).gpu(1).compute_processes
    assert first.cmdline.startswith("python x") and len(first.cmdline) == MAX_CMDLINE_BYTES


def test_a_process_list_nvml_refuses_is_could_not_check() -> None:
    rec = _recording()
    for c in rec["nvml"]:
        if c["fn"] == "nvmlDeviceGetComputeRunningProcesses" and c["args"] == ["gpu:1"]:
            c.pop("result")
            c["error"] = 4
    from topodoctor.rules import Context, Environment, evaluate

    ev = evaluate(Context(_snapshot(rec), Environment({}, {}, {}, (), None)))
    # (the recording's calls an older topodoctor never made are their own, "recording", finding)
    judged = [f for f in ev.incomplete if f.subject != "recording"]
    assert [(f.code, f.subject, f.evidence["field"]) for f in judged] == [("TD901", "GPU1", "compute_processes")]
    assert "TD511" in ev.incomplete[0].evidence["rules"]


@pytest.mark.parametrize("used", [5 << 30, None])
def test_the_live_binding_turns_pynvmls_process_objects_into_plain_data(used: int | None) -> None:
    from topodoctor.probe.nvml import plain

    class nvmlFriendlyObject:  # pynvml's own name, which plain() knows it by
        def __init__(self, d: dict[str, Any]) -> None:
            self.__dict__.update(d)

    got = plain([nvmlFriendlyObject({"pid": 7, "usedGpuMemory": used, "gpuInstanceId": 1})])
    assert got == [{"pid": 7, "usedGpuMemory": used, "gpuInstanceId": 1}]


def test_a_scrubbed_recording_keeps_no_command_line() -> None:
    from topodoctor.core.codec import to_jsonable
    from topodoctor.probe.record import scrub

    rec = _recording()
    rec["snapshot"] = to_jsonable(probe_host(SCENARIO).snapshot)
    rec["meta"] = {}
    out = scrub(rec)
    assert "llama" not in json.dumps(out) and "train.py" not in json.dumps(out)
    (first, _) = _snapshot(out).gpu(1).compute_processes
    assert (first.pid, first.uid, first.cmdline) == (48213, 1001, "scrubbed")


@pytest.mark.parametrize("error", ["EACCES", "EIO", "ESRCH"])
def test_every_proc_read_refused_leaves_the_process_named(error: str) -> None:
    """A process that hides its /proc entry, or ends while the probe looks: still listed by
    NVML, its unreadable parts unknown, and never a failed probe."""
    base = _recording()
    proc_reads = [i for i, r in enumerate(base["sysfs"]) if re.match(r"/proc/(self|\d+)(/|$)", r["path"])]
    assert len(proc_reads) == 8
    for i in proc_reads:
        rec = _recording()
        rec["sysfs"][i] = {k: v for k, v in rec["sysfs"][i].items() if k != "result"} | {"error": error}
        procs = _snapshot(rec).gpu(1).compute_processes
        assert [p.pid for p in procs] == [48213, 48290] and not any(p.ours for p in procs)
