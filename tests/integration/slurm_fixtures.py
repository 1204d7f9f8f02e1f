"""The one cluster every case of the real-cluster suite runs on, as fixtures each test module
imports (a conftest.py here would share the module name ``conftest`` with tests/conftest.py, which
other test modules import by that name).

The cluster is started once for the whole run and stopped at its end, whichever module asks first.
Run with ``pytest -m cluster tests/integration``; where a daemon cannot start the suite is skipped
with the reason, never passed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster import ROOT, Cluster, Unavailable, missing_programs
from slurm_cases import HEALTHY

_started: dict[str, Cluster | str] = {}  # "cluster": the running cluster, or why it could not start


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    if "cluster" not in (request.config.getoption("-m") or ""):
        pytest.skip("the real-cluster suite runs with -m cluster (it starts Slurm daemons)")
    missing = missing_programs()
    if missing:
        pytest.skip(f"not installed here: {', '.join(missing)} (apt-get install slurmctld slurmd ...)")
    if "cluster" not in _started:
        c = Cluster(tmp_path_factory.mktemp("cluster"))
        request.config.add_cleanup(c.stop)  # by pid, whatever happened: nothing is left running
        try:
            c.start()
            _started["cluster"] = c
        except Unavailable as exc:
            _started["cluster"] = f"a daemon cannot run on this machine: {exc}"
    got = _started["cluster"]
    if isinstance(got, str):
        pytest.skip(got)
    return got


@pytest.fixture
def fresh(cluster: Cluster) -> Iterator[Cluster]:
    """Every case starts from a healthy, idle node with healthy settings on every script."""
    cluster.configure_common()
    for which in ("prolog", "health", "epilog"):
        cluster.configure(which, TOPODOCTOR_ARGS=HEALTHY)
    cluster.ensure_slurmctld()
    # A health check still running with the last case's settings would act after the resume: the
    # second run to end after the change started after it (the lock serialises them).
    cluster.health_runs(2)
    cluster.resume()
    yield cluster
    for job in cluster.run(["squeue", "-h", "-o", "%i"], check=False).stdout.split():
        cluster.run(["scancel", job], check=False)


@pytest.fixture(scope="module")
def corrupt(cluster: Cluster) -> str:
    """A recording cut in half: the check's own input is broken (exit 2), not the node."""
    path = cluster.base / "corrupt-recording.json"
    text = (ROOT / "topodoctor" / "probe" / "recordings" / "h200-x4.json").read_text()
    path.write_text(text[: len(text) // 2])
    return f"--replay {path}"
