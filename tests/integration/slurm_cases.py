"""What the cases of the real-cluster suite share: the replayed hosts, holding the health check
still, reading the log, the metrics files and the processes, and starting a script as slurmd does."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster import NODE, ROOT, SUITE_MARK, Cluster
from prometheus_client.parser import text_string_to_metric_families

DERIVED = ROOT / "fixtures" / "derived"
HEALTHY = "--replay h200-x4"
NVLINK_DOWN = f"--replay {DERIVED / 'x4-nvlink-down.json'}"  # GPU1's link 5 down: TD101 on GPU1
HANG = f"--replay {DERIVED / 'x4-nvml-hang.json'}"  # the driver wedges in its first call
FOREIGN = f"--replay {DERIVED / 'x4-foreign-processes.json'}"  # a previous job's processes on GPU1 (TD511)
TD101 = "topodoctor FAIL TD101 GPU1/nvlink5: GPU1 NVLink 5 is down"
Series = tuple[str, tuple[tuple[str, str], ...]]


def hold(cluster: Cluster, corrupt: str) -> None:
    """Keep the health check from acting while a prolog case runs: a broken recording makes it
    answer "misconfigured" (exit 2), which neither drains nor resumes."""
    cluster.configure("health", TOPODOCTOR_ARGS=corrupt)
    cluster.health_runs(2)  # the second one started after the change: the lock serialises them


def lines_with(cluster: Cluster, start: int, text: str) -> list[str]:
    return [x for x in cluster.log_lines(start) if text in x]


def series(text: str) -> Counter[Series]:
    """Every sample of a metrics file by name and labels, counted, as prometheus_client parses it
    (promtool passes a file that holds one series twice; node_exporter drops its series)."""
    return Counter(
        (s.name, tuple(sorted(s.labels.items()))) for fam in text_string_to_metric_families(text) for s in fam.samples
    )


def assert_each_series_once(files: list[Path]) -> None:
    """No series twice in a file, nor in two files of one textfile directory."""
    seen: dict[Series, str] = {}
    for f in files:
        counted = series(f.read_text())
        twice = [s for s, n in counted.items() if n > 1]
        assert not twice, f"{f.name} holds a series twice: {twice[:3]}"
        for s in counted:
            assert s not in seen, f"{f.name} and {seen[s]} both hold {s}"
            seen[s] = f.name


def our_processes() -> list[str]:
    """Processes running this suite's topodoctor command (the scripts' checks and their probe and NVML
    children, which keep their parent's command line and environment), as ``pid command`` lines. The
    suite's mark in the environment leaves out other topodoctor processes of the same interpreter."""
    mine = f"{sys.executable} -m topodoctor"  # cluster.py's wrapper runs exactly this
    mark = f"{SUITE_MARK}={os.getpid()}".encode()
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            environ = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        text = " ".join(a.decode(errors="replace") for a in argv if a)
        if text.startswith(mine) and mark in environ:
            out.append(f"{d.name} {text}")
    return out


def run_script(cluster: Cluster, which: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start one of the installed scripts as slurmd does: a process group of its own, slurmd's
    few variables and nothing else."""
    script = {"prolog": cluster.prolog, "health": cluster.health, "epilog": cluster.epilog}[which]
    given = {"SLURMD_NODENAME": NODE, "SLURM_CONF": str(cluster.conf), **(env or {})}
    return subprocess.Popen(
        [str(script)], env=given, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def mtime_ns(path: Path) -> int:
    return path.stat().st_mtime_ns if path.exists() else 0


@contextlib.contextmanager
def small_filesystem(where: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of ``size_kib`` mounted at ``where`` for the case (a full or read-only textfile
    directory is a real filesystem's answer); the case is skipped where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(where)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def fill(directory: Path) -> None:
    """Fill the filesystem of ``directory`` to the last byte."""
    with (directory / "filler").open("wb", buffering=0) as f:
        for size in (4096, 1):  # what a page does not fill, a byte may
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
