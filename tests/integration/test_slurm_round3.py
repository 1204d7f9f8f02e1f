"""The third round on a real Slurm (Debian's slurmctld and slurmd): a drain the fleet made waits for
a person, a --gres job's prolog line carries no warning of its own making, and the epilog's grace
is counted in seconds of wall time."""

# ruff: noqa: F811  (the fixtures imported from slurm_fixtures come back as the tests' parameters)

from __future__ import annotations

import pytest
from cluster import NODE, Cluster
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
