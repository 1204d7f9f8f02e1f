"""The one cluster every case of the real-cluster suite runs on (fixtures; the helpers the cases
share are in cases.py).

Run with ``pytest -m cluster tests/integration``; where a daemon cannot start the suite is
skipped with the reason, never passed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cases import HEALTHY
from cluster import ROOT, Cluster, Unavailable, missing_programs


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if "cluster" not in (request.config.getoption("-m") or ""):
        pytest.skip("the real-cluster suite runs with -m cluster (it starts Slurm daemons)")
    missing = missing_programs()
    if missing:
        pytest.skip(f"not installed here: {', '.join(missing)} (apt-get install slurmctld slurmd ...)")
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        try:
            c.start()
        except Unavailable as exc:
            pytest.skip(f"a daemon cannot run on this machine: {exc}")
        yield c
    finally:
        c.stop()  # by pid, whatever happened: nothing is left running


@pytest.fixture
def fresh(cluster: Cluster) -> Iterator[Cluster]:
    """Every case starts from a healthy, idle node with healthy settings on every script."""
    cluster.configure_common()
    for which in ("prolog", "health", "epilog"):
        cluster.configure(which, TOPODOCTOR_ARGS=HEALTHY)
    cluster.ensure_slurmctld()
    cluster.resume()
    yield cluster
    for job in cluster.run(["squeue", "-h", "-o", "%i"], check=False).stdout.split():
        cluster.run(["scancel", job], check=False)


@pytest.fixture(scope="session")
def corrupt(cluster: Cluster) -> str:
    """A recording cut in half: the check's own input is broken (exit 2), not the node."""
    path = cluster.base / "corrupt-recording.json"
    text = (ROOT / "topodoctor" / "probe" / "recordings" / "h200-x4.json").read_text()
    path.write_text(text[: len(text) // 2])
    return f"--replay {path}"
