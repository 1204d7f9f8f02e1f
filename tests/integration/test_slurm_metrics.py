"""What the scripts write for node_exporter, read back by node_exporter, promtool and
prometheus_client's parser: one series in one file only, a job's file apart from the node's,
and a textfile directory that is full or read-only."""

# ruff: noqa: F811  (the fixtures imported from slurm_fixtures come back as the tests' parameters)

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from cluster import ROOT, Cluster, wait_for
from slurm_cases import (
    DERIVED,
    HEALTHY,
    NVLINK_DOWN,
    TD101,
    assert_each_series_once,
    fill,
    hold,
    lines_with,
    series,
    small_filesystem,
)
from slurm_fixtures import cluster, corrupt, fresh  # noqa: F401  (fixtures: the suite's one cluster)

pytestmark = pytest.mark.cluster
COLLECTED_TWICE = "was collected before with the same name and label values"


def _exporter_log(cluster: Cluster) -> str:
    return (cluster.base / "node_exporter.out").read_text()


def test_node_exporter_scrapes_every_metrics_file_and_promtool_passes(fresh: Cluster) -> None:
    """Every command's file in one textfile directory, as multinode.md names them."""
    td, out = str(fresh.topodoctor), fresh.textfile
    bw = ROOT / "fixtures/bandwidth/h200-x4.full.json"
    coll = ROOT / "fixtures/collectives/real/x2-four-simulated-nodes.json"
    fresh.run([td, "bandwidth", "--from", str(bw), "--metrics", str(out / "topodoctor-bandwidth.prom")])
    fresh.run([td, "collectives", "--from", str(coll), "--metrics", str(out / "topodoctor-collectives.prom")])
    fresh.run([td, "check", "--replay", "h200-x4", "--scope", "node", "--metrics", str(out / "topodoctor-check.prom")])
    sys.path.insert(0, str(ROOT / "fixtures" / "fleet"))
    import simulate  # type: ignore[import-not-found]

    simulate.build(fresh.base / "fleet")
    fleet = fresh.run(
        [td, "fleet", str(fresh.base / "fleet"), "-f", "prometheus", "-o", str(out / "topodoctor-fleet.prom")],
        check=False,
    )
    assert fleet.returncode in (0, 1), fleet.stderr
    ran, _ = fresh.job("--gres=gpu:2")  # the prolog's job-scope file
    assert ran
    files = sorted(out.glob("*.prom"))
    names = {f.name for f in files}
    assert {
        "topodoctor-check.prom",
        "topodoctor-check-job.prom",
        "topodoctor-bandwidth.prom",
        "topodoctor-collectives.prom",
        "topodoctor-fleet.prom",
    } <= names
    fresh.promtool(files)
    assert_each_series_once(files)
    text = fresh.scrape()
    assert re.search(r"^node_textfile_scrape_error 0$", text, re.M), text[-2000:]
    for f in files:
        assert re.search(rf'^node_textfile_mtime_seconds\{{file="[^"]*{re.escape(f.name)}"\}}', text, re.M), f.name
    status = [x for x in text.splitlines() if x.startswith("topodoctor_status{") and 'command="check"' in x]
    assert any('scope="job"' in x for x in status) and any('scope="node"' in x for x in status)
    assert re.search(r'^topodoctor_build_info\{[^}]*Hostname="[^"]+"', text, re.M)
    log = fresh.base / "node_exporter.out"
    assert "level=error" not in log.read_text(), log.read_text()[-2000:]
    assert COLLECTED_TWICE not in log.read_text()
    # The failure this guards against, for contrast: the same series in two files is an error
    # node_exporter only logs, while its scrape still says node_textfile_scrape_error 0.
    twin = out / "topodoctor-check-twin.prom"
    twin.write_text((out / "topodoctor-check.prom").read_text())
    try:
        assert re.search(r"^node_textfile_scrape_error 0$", fresh.scrape(), re.M)
        assert COLLECTED_TWICE in log.read_text()
    finally:
        twin.unlink()


@pytest.mark.parametrize("gres", [(), ("--gres=gpu:4",)], ids=["no-gres", "every-gpu"])
def test_a_jobs_file_never_masks_the_nodes_verdict(fresh: Cluster, gres: tuple[str, ...]) -> None:
    """A job without --gres (the whole node judged) or given every GPU passes its prolog; then the
    health check drains the node for TD101. node_exporter exports the node's "unhealthy" beside the
    job's "healthy", each under its own scope, and logs no clash."""
    ran, out = fresh.job(*gres)
    assert ran, out
    job_file = fresh.textfile / "topodoctor-check-job.prom"
    assert {dict(labels).get("scope") for _, labels in series(job_file.read_text())} == {"job"}
    before = len(_exporter_log(fresh))
    fresh.configure("health", TOPODOCTOR_ARGS=NVLINK_DOWN)
    wait_for("the health check to drain the node", fresh.drained, 30)
    assert fresh.reason().startswith(TD101)
    files = sorted(fresh.textfile.glob("topodoctor-check*.prom"))
    assert_each_series_once(files)
    fresh.promtool(files)
    text = fresh.scrape()
    status = {
        (m.group(1), m.group(2))
        for m in re.finditer(r'^topodoctor_status\{[^}]*scope="(\w+)"[^}]*status="(\w+)"\} 1(?:\.0)?$', text, re.M)
    }
    assert ("node", "unhealthy") in status and ("job", "healthy") in status, status
    assert COLLECTED_TWICE not in _exporter_log(fresh)[before:]


def test_findings_that_share_a_subject_are_one_series(fresh: Cluster, corrupt: str) -> None:
    """Two TD301 findings on ``host`` (P2P unavailable through the chipset and through the root
    complex), from the health check and from a job's prolog: each file holds the series once (its
    value counts them), node_exporter exports it, and nothing is dropped."""
    acs = f"--replay {DERIVED / 'pcie-2socket-acs.json'}"
    hold(fresh, corrupt)
    fresh.configure("prolog", TOPODOCTOR_ARGS=acs)
    before = len(_exporter_log(fresh))
    fresh.job("--gres=gpu:2")  # refused (TD304 is an error on this host): the file is written all the same
    fresh.configure("health", TOPODOCTOR_ARGS=acs)
    fresh.health_runs(2)
    files = [fresh.textfile / "topodoctor-check.prom", fresh.textfile / "topodoctor-check-job.prom"]
    fresh.promtool(files)
    assert_each_series_once(files)
    node = fresh.textfile / "topodoctor-check.prom"
    td301 = [s for s in series(node.read_text()) if dict(s[1]).get("code") == "TD301"]
    assert len(td301) == 1
    text = fresh.scrape()
    assert re.search(r'^topodoctor_finding\{[^}]*code="TD301"[^}]*scope="node"[^}]*\} 2(\.0)?$', text, re.M), text
    assert COLLECTED_TWICE not in _exporter_log(fresh)[before:]


@pytest.mark.parametrize("trouble", ["full", "read-only"])
def test_a_textfile_directory_that_refuses_the_file(fresh: Cluster, corrupt: str, trouble: str) -> None:
    """node_exporter's directory is full, or read-only: the verdict still decides (a healthy node
    is "misconfigured", exit 2, and changes nothing; a fault drains), the reason says which file
    could not be written and stays within 200 characters, the last file stays whole and nothing
    half-written is left beside it."""
    where = fresh.base / f"textfile-{trouble}"
    with small_filesystem(where, 64):
        old = where / "topodoctor-check.prom"
        fresh.run([str(fresh.topodoctor), "check", "--replay", "h200-x4", "--scope", "node", "--metrics", str(old)])
        before = old.read_bytes()
        if trouble == "full":
            fill(where)
            why = "No space left on device"
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
            why = "Read-only file system"
        start = len(fresh.log_lines())
        fresh.configure("health", TOPODOCTOR_ARGS=HEALTHY, TOPODOCTOR_METRICS_DIR=str(where))
        fresh.health_runs(2)
        assert fresh.state() == "IDLE"
        said = lines_with(fresh, start, "misconfigured (exit 2), nothing changed: topodoctor OK: ")
        assert said and all(f"/{old.name}: {why}" in x for x in said), fresh.log_lines(start)
        fresh.configure("health", TOPODOCTOR_ARGS=NVLINK_DOWN, TOPODOCTOR_METRICS_DIR=str(where))
        wait_for("the health check to drain the node", fresh.drained, 30)
        reason = fresh.reason()
        assert reason.startswith(TD101) and len(reason) <= 200 and "cannot write " in reason, reason
        hold(fresh, corrupt)
        fresh.resume()
        fresh.configure("prolog", TOPODOCTOR_ARGS=NVLINK_DOWN, TOPODOCTOR_METRICS_DIR=str(where))
        ran, out = fresh.job("--gres=gpu:4")
        assert not ran, out
        reason = fresh.reason()
        assert reason.startswith("topodoctor FAIL TD101 ") and len(reason) <= 200 and "cannot write " in reason
        assert old.read_bytes() == before
        left = sorted(p.name for p in where.iterdir())
        assert left == (["filler"] if trouble == "full" else []) + ["topodoctor-check.prom"], left


def test_two_prologs_at_once(fresh: Cluster, corrupt: str) -> None:
    """Two jobs start together, each with two GPUs, GPU1's link down: the prolog of the job on GPUs
    0,1 drains the node and refuses it, the one on 2,3 lets its job run; both say so, and the job
    file they both write is one whole file, each series once."""
    hold(fresh, corrupt)
    fresh.configure("prolog", TOPODOCTOR_ARGS=NVLINK_DOWN)
    start = len(fresh.log_lines())
    marks = [fresh.base / "jobs" / f"together-{time.monotonic_ns()}-{i}" for i in range(2)]
    jobs = [
        fresh.run(["sbatch", "--parsable", "--gres=gpu:2", "--time=1", "--wrap", f"touch {m}"]).stdout.strip()
        for m in marks
    ]
    wait_for("both prologs to finish", lambda: len(lines_with(fresh, start, "prolog[")) >= 2, 60)
    wait_for("one job to run", lambda: sum(m.exists() for m in marks) == 1, 30)
    lines = lines_with(fresh, start, "prolog[")
    by_job = {j: [x for x in lines if f" job={j}: " in x] for j in jobs}
    assert all(len(v) == 1 for v in by_job.values()), lines
    said = sorted(v[0].split(": ", 1)[1] for v in by_job.values())
    assert said[0].startswith("drained: " + TD101) and said[0].endswith("judged the job's 2 of 4 GPUs (0,1)")
    assert said[1].startswith("ok: topodoctor OK: job's 2 of 4 GPUs (2,3)")
    job_file = fresh.textfile / "topodoctor-check-job.prom"
    fresh.promtool([job_file])
    assert_each_series_once([job_file])
    assert not [p.name for p in fresh.textfile.iterdir() if not p.name.endswith(".prom")]
