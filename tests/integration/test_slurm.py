"""The docs' Slurm prolog and health check, against Debian's real slurmctld and slurmd, with
replayed recordings standing in for the GPUs; node_exporter and promtool on what they write.

Each case changes only the settings docs/prolog.md documents (topodoctor.conf beside each
script) and asserts what ``scontrol show node`` and ``sinfo -R`` show and whether the job ran.
Run with ``pytest -m cluster tests/integration``; where a daemon cannot start the suite is
skipped with the reason, never passed.
"""

# ruff: noqa: F811  (the fixtures imported from slurm_fixtures come back as the tests' parameters)

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

import pytest
from cluster import NODE, ROOT, Cluster, wait_for
from slurm_cases import HANG, HEALTHY, NVLINK_DOWN, TD101, hold, lines_with
from slurm_fixtures import cluster, corrupt, fresh  # noqa: F401  (fixtures: the suite's one cluster)

pytestmark = pytest.mark.cluster


def test_healthy_node_runs_the_job(fresh: Cluster) -> None:
    ran, out = fresh.job()
    assert ran, out
    fresh.health_runs(2)
    assert fresh.settled_state() == "IDLE" and fresh.sinfo_reasons() == ""
    config = fresh.run(["scontrol", "show", "config"]).stdout
    assert all(f"topodoctor-{x}.sh" in config for x in ("prolog", "health", "epilog"))


def test_nvlink_down_in_the_prolog_drains_refuses_the_job_and_a_passing_check_resumes(
    fresh: Cluster, corrupt: str
) -> None:
    hold(fresh, corrupt)
    fresh.configure("prolog", TOPODOCTOR_ARGS=NVLINK_DOWN)
    ran, out = fresh.job()
    assert not ran and "Job prolog failed" in out, out
    assert fresh.drained() and fresh.reason().startswith(TD101), fresh.node()
    assert fresh.sinfo_reasons() == f"{fresh.reason()}|{NODE}"  # one readable reason, Slurm's own kept out
    # NodeName gpu01 is not the host name: the health check resumes by $SLURMD_NODENAME.
    assert f"NodeHostName={fresh.hostname}" in fresh.node() and fresh.hostname != NODE
    fresh.configure("prolog", TOPODOCTOR_ARGS=HEALTHY)
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)
    wait_for("the health check to resume the node", lambda: fresh.state() == "IDLE", 30)
    assert fresh.sinfo_reasons() == ""
    ran, out = fresh.job()
    assert ran, out


def test_nvlink_down_in_the_health_check_drains_and_no_job_starts(fresh: Cluster) -> None:
    fresh.configure("health", TOPODOCTOR_ARGS=NVLINK_DOWN)
    wait_for("the health check to drain the node", fresh.drained, 30)
    assert fresh.reason().startswith(TD101) and len(fresh.reason()) <= 200
    ran, out = fresh.job("--immediate=3")
    assert not ran, out
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)
    wait_for("the health check to resume the node", lambda: fresh.state() == "IDLE", 30)


def test_budget_spent_drains_as_could_not_check(fresh: Cluster, corrupt: str) -> None:
    hold(fresh, corrupt)
    fresh.configure("prolog", TOPODOCTOR_ARGS=HANG, TOPODOCTOR_TIMEOUT=2)
    ran, out = fresh.job()
    assert not ran, out
    assert fresh.drained() and fresh.reason().startswith("topodoctor UNKNOWN: "), fresh.node()
    assert "budget" in fresh.reason()
    fresh.configure("health", TOPODOCTOR_ARGS=HANG, TOPODOCTOR_TIMEOUT=2)
    fresh.health_runs(2)
    assert fresh.drained() and "budget" in fresh.reason()


def test_corrupt_recording_is_misconfigured_not_a_drain(fresh: Cluster, corrupt: str) -> None:
    start = len(fresh.log_lines())
    fresh.configure("health", TOPODOCTOR_ARGS=corrupt)
    fresh.configure("prolog", TOPODOCTOR_ARGS=corrupt)
    fresh.health_runs(2)
    ran, out = fresh.job()
    assert ran, out
    assert fresh.settled_state() == "IDLE" and fresh.sinfo_reasons() == ""
    said = lines_with(fresh, start, "misconfigured")
    assert any("prolog[" in x for x in said) and any("healthcheck[" in x for x in said)
    assert all("topodoctor UNKNOWN: " in x and "not valid JSON" in x for x in said), said


def test_missing_and_corrupt_expectations(fresh: Cluster) -> None:
    good = fresh.base / "node-type.json"
    fresh.run([str(fresh.topodoctor), "expect", "--replay", "h200-x4", "-o", str(good)])
    bad = fresh.base / "node-type-corrupt.json"
    bad.write_text(good.read_text()[:40])
    fresh.configure("prolog", TOPODOCTOR_ARGS=HEALTHY, TOPODOCTOR_EXPECT=str(good))
    assert fresh.job()[0]
    start = len(fresh.log_lines())
    for expect in (str(fresh.base / "absent.json"), str(bad)):
        # The node is fine: the job runs and the trouble is logged, not drained.
        fresh.configure("prolog", TOPODOCTOR_ARGS=HEALTHY, TOPODOCTOR_EXPECT=expect)
        fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY, TOPODOCTOR_EXPECT=expect)
        ran, out = fresh.job()
        assert ran, out
        fresh.health_runs(2)
        assert fresh.settled_state() == "IDLE"
    said = lines_with(fresh, start, "misconfigured")
    assert any("not found" in x for x in said) and any("not valid JSON" in x for x in said), said
    # A real fault still drains: the file's trouble does not open the gate.
    fresh.configure("health", TOPODOCTOR_ARGS=NVLINK_DOWN, TOPODOCTOR_EXPECT=str(bad))
    wait_for("the health check to drain the node", fresh.drained, 30)
    assert fresh.reason().startswith(TD101) and fresh.reason().endswith("without the expectations file (unusable)")


def test_an_admins_drain_is_kept(fresh: Cluster) -> None:
    admin = "DIMM replacement pending"
    fresh.run(["scontrol", "update", f"nodename={NODE}", "state=drain", f"reason={admin}"])
    start = len(fresh.log_lines())
    fresh.configure("health", TOPODOCTOR_ARGS=NVLINK_DOWN)
    fresh.health_runs(2)
    assert fresh.drained() and fresh.reason() == admin
    assert lines_with(fresh, start, "already drained by someone else (DIMM replacement pending)")
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)
    fresh.health_runs(2)
    assert fresh.drained() and fresh.reason() == admin  # never resumed by us
    assert fresh.sinfo_reasons() == f"{admin}|{NODE}"


def _runs(lines: list[str]) -> list[tuple[str, str]]:
    """(start, end) times of each health check that ran, by its pid."""
    starts, ends = {}, {}
    for x in lines:
        m = re.match(r"(\S+) healthcheck\[(\d+)\] node=\S+ job=-: (start|end rc=)", x)
        if m:
            (starts if m.group(3) == "start" else ends)[m.group(2)] = m.group(1)
    return sorted((starts[p], ends[p]) for p in starts if p in ends)


def test_short_health_check_interval_runs_one_check_at_a_time(fresh: Cluster) -> None:
    # Each check takes its whole 4 s budget (a wedged driver), twice the 2 s HealthCheckInterval.
    start = len(fresh.log_lines())
    fresh.configure("health", TOPODOCTOR_ARGS=HANG, TOPODOCTOR_TIMEOUT=4)
    wait_for("the health check to drain the node", fresh.drained, 40)
    fresh.health_runs(2, timeout=60)
    fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY)
    wait_for("the health check to resume the node", lambda: fresh.state() == "IDLE", 40)
    resumed_at = len(fresh.log_lines())
    fresh.health_runs(3)
    assert fresh.state() == "IDLE", "a stale check drained the node again"
    assert not lines_with(fresh, resumed_at, "drained")
    lines = fresh.log_lines(start)
    assert any("skipped: the previous check is still running" in x for x in lines)
    runs = _runs(lines)
    assert len(runs) >= 3
    for (_, end), (begin, _) in itertools.pairwise(runs):
        assert end <= begin, f"two checks ran at once: {runs}"


def test_job_scope_judges_the_jobs_gpus_and_keeps_its_own_metrics_file(fresh: Cluster, corrupt: str) -> None:
    hold(fresh, corrupt)
    holder = fresh.run(["sbatch", "--parsable", "--gres=gpu:2", "--time=2", "--wrap", "sleep 120"]).stdout.strip()
    wait_for(
        "the holder job to run",
        lambda: fresh.run(["squeue", "-h", "-j", holder, "-o", "%T"]).stdout.strip() == "RUNNING",
        30,
    )
    job_file = fresh.textfile / "topodoctor-check-job.prom"
    # The holder has GPUs 0 and 1; GPU1's link is down, but the next job gets GPUs 2 and 3.
    fresh.configure("prolog", TOPODOCTOR_ARGS=NVLINK_DOWN)
    start = len(fresh.log_lines())
    ran, out = fresh.job("--gres=gpu:2")
    assert ran, out
    assert lines_with(fresh, start, "ok: topodoctor OK: job's 2 of 4 GPUs (2,3)")
    text = job_file.read_text()
    assert 'scope="job"' in text and 'gpus="2,3"' in text
    fresh.run(["scancel", holder])
    wait_for("the holder to end", lambda: not fresh.run(["squeue", "-h", "-j", holder], check=False).stdout.strip())
    ran, out = fresh.job("--gres=gpu:2")
    assert not ran, out
    assert fresh.reason().startswith(TD101) and fresh.reason().endswith("judged the job's 2 of 4 GPUs (0,1)")
    # srun reports the refused job as slurmd ends its prolog; the file is the check's, written before its line
    wait_for("the refused job's metrics", lambda: 'gpus="0,1"' in job_file.read_text(), 15)
    node_file = (fresh.textfile / "topodoctor-check.prom").read_text()
    assert 'scope="node"' in node_file and 'scope="job"' not in node_file


def test_slurm_timeouts_below_the_prologs_time_are_slurms_failures(fresh: Cluster, corrupt: str) -> None:
    """What prolog.md says happens when Slurm's limits sit below the prolog's time."""
    hold(fresh, corrupt)
    slow = fresh.base / "slow-topodoctor"  # a healthy check that takes 14 s, as a 20 s one would
    slow.write_text(f'#!/bin/sh\nsleep 14\nexec {fresh.topodoctor} "$@"\n')
    slow.chmod(0o755)
    fresh.configure("prolog", TOPODOCTOR_ARGS=HEALTHY, TOPODOCTOR=str(slow))
    try:
        # srun waits for the prolog while it launches the step, MessageTimeout + 10 s in Slurm 22.05:
        # past that it gives up on a healthy node, which stays up.
        fresh.set_slurm(MessageTimeout=2)
        ran, out = fresh.job()
        assert not ran and "Socket timed out on send/recv operation" in out, out
        wait_for("the prolog to end", lambda: fresh.state() == "IDLE", 30)
        # Past PrologEpilogTimeout Slurm kills the prolog and drains with its own reason, not ours.
        fresh.set_slurm(MessageTimeout=30, PrologEpilogTimeout=3)
        ran, out = fresh.job()
        assert not ran and "Job prolog failed" in out, out
        assert fresh.drained() and fresh.reason() == "Prolog error"
    finally:
        fresh.set_slurm(MessageTimeout=30, PrologEpilogTimeout=60)


def test_every_syslog_line_names_the_script_the_node_and_the_job(fresh: Cluster) -> None:
    """What the scripts send to syslog (tag topodoctor), read from the socket itself: each line
    names its script, the node and the job (``-`` for the health check, which has none)."""
    if not fresh.listening_to_syslog:
        pytest.skip("this machine has a syslog of its own on /dev/log: the lines are in its log")
    start = len(fresh.syslog)
    ran, out = fresh.job("--gres=gpu:1")
    assert ran, out
    fresh.health_runs(1)
    mine = [m for m in fresh.syslog[start:] if " topodoctor: " in m]
    for m in mine:
        assert re.search(rf" topodoctor: (prolog|healthcheck|epilog)\[\d+\] node={NODE} job=(\d+|-): \S", m), m
    assert any(re.search(rf"prolog\[\d+\] node={NODE} job=\d+: ok: topodoctor OK: ", m) for m in mine), mine
    assert any(re.search(rf"healthcheck\[\d+\] node={NODE} job=-: end rc=0", m) for m in mine), mine


def test_the_scripts_pass_shellcheck() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    scripts = sorted(str(p) for p in (ROOT / "docs" / "examples").glob("*.sh"))
    r = subprocess.run(["shellcheck", *scripts], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
