"""A previous job's process on a GPU (TD511): what keeps the node out, the same in the prolog,
the health check and the epilog, and the epilog that ends what a job leaves running."""

# ruff: noqa: F811  (the fixtures imported from slurm_fixtures come back as the tests' parameters)

from __future__ import annotations

import subprocess
import time

import pytest
from cluster import Cluster, wait_for
from slurm_cases import FOREIGN, HEALTHY, hold, lines_with
from slurm_fixtures import cluster, corrupt, fresh  # noqa: F401  (fixtures: the suite's one cluster)

pytestmark = pytest.mark.cluster
TD511 = "topodoctor FAIL TD511: GPU1 runs 2 compute processes of another job"


def _resumes(cluster: Cluster, start: int) -> list[str]:
    return lines_with(cluster, start, ": resumed: ")


def test_a_leftover_keeps_the_node_drained_until_it_is_gone(fresh: Cluster, corrupt: str) -> None:
    """The prolog of a job given every GPU drains the node for a previous job's processes on GPU1;
    the health check, on the idle node, judges them as the prolog does and keeps it drained run
    after run (no resume, no flapping); once they are gone it resumes the node."""
    hold(fresh, corrupt)
    fresh.configure("prolog", TOPODOCTOR_ARGS=FOREIGN)
    ran, out = fresh.job("--gres=gpu:4")
    assert not ran, out
    assert fresh.reason().startswith(TD511), fresh.reason()
    start = len(fresh.log_lines())
    fresh.configure("health", TOPODOCTOR_ARGS=FOREIGN)
    fresh.health_runs(4)
    assert fresh.drained() and fresh.reason().startswith(TD511)
    assert not _resumes(fresh, start)
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)  # the processes are gone
    fresh.configure("prolog", TOPODOCTOR_ARGS=HEALTHY)
    wait_for("the health check to resume the node", lambda: fresh.state() == "IDLE", 30)
    ran, out = fresh.job("--gres=gpu:4")
    assert ran, out


def test_the_health_check_drains_an_idle_node_for_a_leftover_and_not_a_busy_one(fresh: Cluster) -> None:
    """An idle node with a process on a GPU is out, as the next job's prolog would put it; on a node
    running a job the processes may be that job's, so the health check leaves it in service."""
    holder = fresh.run(["sbatch", "--parsable", "--gres=gpu:1", "--time=2", "--wrap", "sleep 120"]).stdout.strip()
    wait_for("the holder to run", lambda: "ALLOC" in fresh.state() or "MIXED" in fresh.state(), 30)
    start = len(fresh.log_lines())
    fresh.configure("health", TOPODOCTOR_ARGS=FOREIGN)
    fresh.health_runs(3)
    assert not fresh.drained() and not lines_with(fresh, start, "drained:")
    fresh.run(["scancel", holder])
    wait_for("the health check to drain the idle node", fresh.drained, 40)
    assert fresh.reason().startswith(TD511), fresh.reason()


def test_a_drain_for_a_leftover_waits_for_the_nodes_jobs_to_end(fresh: Cluster, corrupt: str) -> None:
    """Drained for TD511 while another job runs on the node: the health check does not resume it
    while that job runs (its processes would hide a leftover), and does once the node is idle and
    no process is left."""
    hold(fresh, corrupt)
    holder = fresh.run(["sbatch", "--parsable", "--gres=gpu:2", "--time=2", "--wrap", "sleep 120"]).stdout.strip()
    wait_for("the holder to run", lambda: "MIXED" in fresh.state() or "ALLOC" in fresh.state(), 30)
    fresh.configure("prolog", TOPODOCTOR_ARGS=FOREIGN)
    ran, out = fresh.job("--gres=gpu:2")  # GPUs 2,3: the job's own GPUs hold nothing
    assert ran, out
    fresh.run(["scontrol", "update", "nodename=gpu01", "state=drain", f"reason={TD511}: pid 48213"])
    start = len(fresh.log_lines())
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)
    fresh.health_runs(3)
    assert fresh.drained() and not _resumes(fresh, start)
    assert lines_with(fresh, start, "kept drained until its jobs end and no process is left on its GPUs")
    fresh.run(["scancel", holder])
    wait_for("the health check to resume the node", lambda: fresh.state() == "IDLE", 40)
    assert _resumes(fresh, start)


def test_the_epilog_ends_what_a_job_left_running(fresh: Cluster) -> None:
    """A job starts a process that leaves the job's process tree (setsid): the epilog ends it
    (SIGTERM) and says so, naming it."""
    tag = f"left-by-job-{time.monotonic_ns()}"
    start = len(fresh.log_lines())
    leave = f"setsid bash -c 'exec -a {tag} sleep 300' </dev/null >/dev/null 2>&1 &"
    fresh.run(["srun", "-N1", "-n1", "--time=1", "--gres=gpu:1", "bash", "-c", leave])
    said = wait_for("the epilog to end the leftover", lambda: lines_with(fresh, start, "ended what the job left"), 30)
    assert tag in said[0] and "epilog[" in said[0] and "SIGKILL" not in said[0], said  # it was running
    assert subprocess.run(["pgrep", "-f", tag], capture_output=True).returncode == 1, "the leftover still runs"


def test_a_process_the_epilog_could_not_end_drains_the_node(fresh: Cluster, corrupt: str) -> None:
    """After the job's end a process still on one of its GPUs (stuck in the driver, or of no job):
    the epilog drains the node with TD511's line, as the next prolog would, and the health check
    keeps it drained until no process is left."""
    hold(fresh, corrupt)
    fresh.configure("epilog", TOPODOCTOR_ARGS=FOREIGN)
    ran, out = fresh.job("--gres=gpu:2")
    assert ran, out
    wait_for("the epilog to drain the node", fresh.drained, 30)
    assert fresh.reason().startswith(TD511) and "judged the job's 2 of 4 GPUs (0,1)" in fresh.reason()
    fresh.configure("epilog", TOPODOCTOR_ARGS=HEALTHY)
    start = len(fresh.log_lines())
    fresh.configure("health", TOPODOCTOR_ARGS=FOREIGN)
    fresh.health_runs(3)
    assert fresh.drained() and not _resumes(fresh, start)
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)
    wait_for("the health check to resume the node", lambda: fresh.state() == "IDLE", 30)
