"""The third round on a real Slurm (Debian's slurmctld and slurmd): a drain the fleet made waits for
a person, a --gres job's prolog line carries no warning of its own making, and the epilog's grace
is counted in seconds of wall time."""

# ruff: noqa: F811  (the fixtures imported from slurm_fixtures come back as the tests' parameters)

from __future__ import annotations

import subprocess
import time
from datetime import datetime

import pytest
from cluster import NODE, Cluster, wait_for
from slurm_cases import lines_with
from slurm_fixtures import cluster, fresh  # noqa: F401  (fixtures: the suite's one cluster)

pytestmark = pytest.mark.cluster

LEMON = "topodoctor: TD951 lemon-node node: unhealthy in 4 of its last 10 results"


def test_a_fleet_drain_is_never_resumed_by_a_passing_health_check(fresh: Cluster) -> None:
    start = len(fresh.log_lines())
    fresh.run(["scontrol", "update", f"nodename={NODE}", "state=drain", f"reason={LEMON}"])
    fresh.health_runs(2)  # healthy checks, both of them
    assert fresh.drained() and fresh.reason() == LEMON, fresh.node()
    kept = lines_with(fresh, start, "kept drained by the fleet")
    assert kept and "a person resumes it once its cause is found" in kept[-1], fresh.log_lines(start)
    assert not lines_with(fresh, start, "resumed:")


def test_a_gres_jobs_prolog_says_ok_without_a_warning(fresh: Cluster) -> None:
    start = len(fresh.log_lines())
    ran, out = fresh.job("--gres=gpu:2")
    assert ran, out
    (said,) = lines_with(fresh, start, "prolog[")
    # slurmd sets CUDA_VISIBLE_DEVICES for the prolog, without CUDA_DEVICE_ORDER: Slurm's own, not a fault
    assert "ok: topodoctor OK: job's 2 of 4 GPUs" in said and "warning" not in said, said


def _at(line: str) -> float:
    """The wall-clock time a log line was written (TOPODOCTOR_LOG's date +%FT%T.%N)."""
    stamp = line.split(" ", 1)[0]
    whole, _, nanos = stamp.partition(".")
    return datetime.fromisoformat(whole).timestamp() + float(f"0.{nanos or 0}")


def test_the_epilogs_grace_is_seconds_of_wall_time_whatever_the_process_count(fresh: Cluster) -> None:
    grace_s = 2
    fresh.configure("epilog", TOPODOCTOR_EPILOG_GRACE=grace_s)
    crowd = [subprocess.Popen(["sleep", "300"]) for _ in range(400)]  # a busy node: /proc is long to read
    try:
        tag = f"deaf-to-sigterm-{time.monotonic_ns()}"
        start = len(fresh.log_lines())
        leave = f"setsid bash -c \"trap '' TERM; exec -a {tag} sleep 300\" </dev/null >/dev/null 2>&1 &"
        fresh.run(["srun", "-N1", "-n1", "--time=1", "--gres=gpu:1", "bash", "-c", leave])
        ended = time.time()  # the job's end: the epilog starts now
        said = wait_for(
            "the epilog to end the leftover", lambda: lines_with(fresh, start, "ended what the job left"), 30
        )
        assert tag in said[0] and "SIGKILL for" in said[0], said  # it ignored SIGTERM: killed at the grace's end
        took = _at(said[0]) - ended
        assert grace_s <= took < grace_s + 1.5, f"the epilog took {took:.1f} s for a grace of {grace_s} s"
    finally:
        for p in crowd:
            p.kill()
            p.wait()
    assert subprocess.run(["pgrep", "-f", tag], capture_output=True).returncode == 1, "the leftover still runs"
