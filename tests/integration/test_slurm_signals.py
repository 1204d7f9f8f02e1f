"""The scripts under Slurm's own limits: PrologEpilogTimeout's kill, a SIGTERM in the middle of a
check, slurmctld down, and a GPU the node no longer has. Whatever stops a script stops its check
(the probe child included), and nothing is written after it."""

# ruff: noqa: F811  (the fixtures imported from slurm_fixtures come back as the tests' parameters)

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from cluster import Cluster, wait_for
from slurm_cases import (
    DERIVED,
    HANG,
    HEALTHY,
    NVLINK_DOWN,
    TD101,
    hold,
    lines_with,
    mtime_ns,
    our_processes,
    run_script,
)
from slurm_fixtures import cluster, corrupt, fresh  # noqa: F401  (fixtures: the suite's one cluster)

pytestmark = pytest.mark.cluster


def _no_check_left() -> None:
    wait_for("every check process to be gone", lambda: not our_processes(), 5, 0.1)


def test_prolog_epilog_timeout_kills_the_check_and_nothing_is_written_after(fresh: Cluster, corrupt: str) -> None:
    """Slurm kills the prolog at PrologEpilogTimeout (3 s) while its check waits on a wedged driver
    with a 12 s budget: the check and its probe child end with the script, and the job's metrics
    file is not rewritten when that budget would have run out."""
    hold(fresh, corrupt)
    ran, out = fresh.job()  # a healthy job writes the job file first
    assert ran, out
    job_file = fresh.textfile / "topodoctor-check-job.prom"
    before = mtime_ns(job_file)
    fresh.configure("prolog", TOPODOCTOR_ARGS=HANG, TOPODOCTOR_TIMEOUT=12)
    try:
        fresh.set_slurm(PrologEpilogTimeout=3)
        start, t0 = len(fresh.log_lines()), time.monotonic()
        ran, out = fresh.job()
        assert not ran and "Job prolog failed" in out, out
        _no_check_left()
        assert fresh.drained() and fresh.reason() == "Prolog error"
        time.sleep(max(0.0, t0 + 12 + 5 + 2 - time.monotonic()))  # past the check's budget and timeout(1)'s
        assert mtime_ns(job_file) == before, "the killed check wrote its file afterwards"
        assert not lines_with(fresh, start, "drained:"), fresh.log_lines(start)
    finally:
        fresh.set_slurm(PrologEpilogTimeout=60)


@pytest.mark.parametrize("how", ["the script", "its process group"])
def test_sigterm_mid_check_ends_the_check_with_the_script(fresh: Cluster, corrupt: str, how: str) -> None:
    """SIGTERM to the prolog alone (someone's kill PID) or to its process group (slurmd's kill)
    while its check waits on a wedged driver: the script ends at once, its check and probe child
    with it, it says so, and neither the node nor the metrics file changes afterwards."""
    hold(fresh, corrupt)
    fresh.configure("prolog", TOPODOCTOR_ARGS=HANG, TOPODOCTOR_TIMEOUT=8)
    job_file = fresh.textfile / "topodoctor-check-job.prom"
    before = mtime_ns(job_file)
    start = len(fresh.log_lines())
    p = run_script(fresh, "prolog", {"SLURM_JOB_ID": "990", "SLURM_JOB_GPUS": "0,1"})
    wait_for("the check to start", lambda: len(our_processes()) >= 2, 10, 0.05)  # the command and its probe child
    time.sleep(0.5)
    t0 = time.monotonic()
    if how == "the script":
        os.kill(p.pid, signal.SIGTERM)
    else:
        os.killpg(p.pid, signal.SIGTERM)
    p.wait(5)
    assert time.monotonic() - t0 < 3
    _no_check_left()
    assert lines_with(fresh, start, "prolog[") and all(
        "job=990: terminated" in x for x in lines_with(fresh, start, "prolog[")
    ), fresh.log_lines(start)
    time.sleep(8 + 2)  # past the budget the check had
    assert mtime_ns(job_file) == before
    assert fresh.state() == "IDLE"


def _parent(pid: int) -> int:
    """The script a check runs under: the parent of the check's command (timeout(1)'s parent)."""
    seen = pid
    for _ in range(4):  # the command, timeout(1), the script's process substitution, the script
        try:
            stat = Path(f"/proc/{seen}/stat").read_text()
            cmd = Path(f"/proc/{seen}/cmdline").read_bytes()
        except OSError:
            return -1
        if b"healthcheck-drain" in cmd or b"topodoctor-health.sh" in cmd:
            return seen
        seen = int(stat.rsplit(")", 1)[1].split()[1])
    return -1


def test_sigterm_to_slurmds_health_check(fresh: Cluster) -> None:
    """slurmd's own health check run, stopped by SIGTERM mid-check: its check ends with it."""
    fresh.configure("health", TOPODOCTOR_ARGS=HANG, TOPODOCTOR_TIMEOUT=15)
    start = len(fresh.log_lines())

    def running() -> str | None:
        """A run that logged its start since the change and whose check is running now."""
        lines = fresh.log_lines(start)
        begun = [x.split("healthcheck[")[1].split("]")[0] for x in lines if x.endswith(": start")]
        checking = {_parent(int(x.split()[0])) for x in our_processes()}
        return next((pid for pid in begun if int(pid) in checking), None)

    pid = wait_for("a health check to be checking", running, 30, 0.1)
    os.kill(int(pid), signal.SIGTERM)
    _no_check_left()
    # the script's trap logs after its check is gone: its line may follow the last check's exit by a moment
    said = f"healthcheck[{pid}]"
    wait_for("the stopped run's line", lambda: any(said in x and "terminated" in x for x in fresh.log_lines(start)), 10)
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)


def test_slurmctld_down(fresh: Cluster, corrupt: str) -> None:
    """With slurmctld down each scontrol call fails after about 30 s: the scripts still check the
    node (the health check's metrics say it is unhealthy), drain nothing they cannot, say why, and
    end within the budget docs/prolog.md sets out (the check's, plus one scontrol call)."""
    hold(fresh, corrupt)
    fresh.configure("health", TOPODOCTOR_ARGS=NVLINK_DOWN, TOPODOCTOR_TIMEOUT=5)
    fresh.configure("prolog", TOPODOCTOR_ARGS=NVLINK_DOWN, TOPODOCTOR_TIMEOUT=5)
    fresh.health_runs(1)  # the last run slurmctld asked for has released the lock
    fresh.stop_slurmctld()
    start, t0 = len(fresh.log_lines()), time.monotonic()
    health = run_script(fresh, "health")
    prolog = run_script(fresh, "prolog", {"SLURM_JOB_ID": "991", "SLURM_JOB_GPUS": "0,1"})
    assert prolog.wait(60) == 1 and health.wait(60) == 0
    took = time.monotonic() - t0
    assert took < 5 + 1 + 35, took
    said = fresh.log_lines(start)
    assert any("healthcheck[" in x and "cannot read gpu01 from slurmctld" in x for x in said), said
    assert any("prolog[" in x and "not drained by us, the job is refused: " + TD101 in x for x in said), said
    node = (fresh.textfile / "topodoctor-check.prom").read_text()
    assert 'scope="node",status="unhealthy"} 1.0' in node
    assert not [x for x in said if "drained:" in x], said
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)
    fresh.ensure_slurmctld()


def test_a_gpu_missing(fresh: Cluster, corrupt: str) -> None:
    """A GPU lost (NVML: GPU_IS_LOST) drains the node from the health check; a job Slurm gave four
    GPUs on a node that answers for two is refused by its prolog, which says which are missing."""
    fresh.configure("health", TOPODOCTOR_ARGS=f"--replay {DERIVED / 'x4-gpu-lost.json'}")
    wait_for("the health check to drain the node", fresh.drained, 30)
    assert fresh.reason().startswith("topodoctor FAIL TD507: GPU3 is lost"), fresh.reason()
    hold(fresh, corrupt)
    fresh.resume()
    fresh.configure("prolog", TOPODOCTOR_ARGS="--replay h200-x2")
    ran, out = fresh.job("--gres=gpu:4")
    assert not ran, out
    # Slurm sets CUDA_VISIBLE_DEVICES=0,1,2,3 for the prolog too: TD615 names the first GPU missing
    # (an error, which comes before could-not-check); without it the line would say which ones.
    reason = fresh.reason()
    assert reason.startswith("topodoctor FAIL TD615: CUDA_VISIBLE_DEVICES entry '2' names no GPU")
    assert reason.endswith("judged the job's 2 of 2 GPUs (0,1)"), reason
