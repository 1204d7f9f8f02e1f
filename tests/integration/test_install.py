"""docs/prolog.md's install, run as written by a root user with nothing but ``PATH``: a virtual
environment under /opt, the command linked into /usr/local/bin, the scripts into /etc/slurm; then
the installed command and the installed prolog run with no ``PATH`` at all, as slurmd runs them.

A clean CI machine (``TOPODOCTOR_INSTALL_FOR_REAL=1``, set by .ci/run) installs into those very
places; anywhere else the same commands are run with /opt, /usr/local/bin and /etc/slurm moved
under a temporary directory, so a shared machine keeps its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cluster import ROOT

pytestmark = pytest.mark.cluster
PAGE = ROOT / "docs" / "prolog.md"
DISTRO_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # what a fresh Debian's root has, less the empty /usr/local


def _block(marker: str) -> str:
    found = re.search(rf"<!-- install: {marker} -->\s*```bash\n(.*?)```", PAGE.read_text(), re.S)
    assert found, f"docs/prolog.md has no '{marker}' install block"
    return found.group(1)


def _scripts_block() -> str:
    found = re.search(r"```bash\n(install -m 0755 .*?)```", PAGE.read_text(), re.S)
    assert found, "docs/prolog.md has no block installing the scripts"
    return found.group(1)


def test_the_documented_install_on_debian(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None or not Path("/usr/bin/python3").exists():
        pytest.skip("the documented install is for root on Debian or Ubuntu, with the distribution's python3")
    real = os.environ.get("TOPODOCTOR_INSTALL_FOR_REAL") == "1"
    top = Path("/") if real else tmp_path / "root"
    commands = _block("debian") + _scripts_block()
    # The page installs from a checkout named topodoctor beside the shell: this one.
    commands = commands.replace("topodoctor/docs/examples", f"{ROOT}/docs/examples").replace("./topodoctor", str(ROOT))
    if not real:
        for place in ("/opt/", "/usr/local/bin/", "/etc/slurm/"):
            commands = commands.replace(place, f"{top}{place}")
            (top / place.strip("/")).mkdir(parents=True, exist_ok=True)
    else:
        Path("/etc/slurm").mkdir(parents=True, exist_ok=True)
    built = ROOT / "build"  # pip builds the checkout in place: what it leaves must not feed a later build
    had_build = built.exists()
    bin_dir = top / "usr" / "local" / "bin"
    path = f"{bin_dir}:{DISTRO_PATH}" if not real else f"/usr/local/sbin:/usr/local/bin:{DISTRO_PATH}"
    try:
        r = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", commands],
            env={"PATH": path, "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
    finally:
        if not had_build:
            shutil.rmtree(built, ignore_errors=True)
    assert r.returncode == 0, f"the documented install failed:\n{commands}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    assert re.search(r"\d+\.\d+", r.stdout.strip().splitlines()[-1]), r.stdout  # topodoctor --version
    installed = bin_dir / "topodoctor"
    assert installed.is_symlink() and Path(os.path.realpath(installed)).is_relative_to(top / "opt" / "topodoctor")

    # As slurmd runs it: no PATH at all.
    r = subprocess.run([str(installed), "check", "--replay", "h200-x4", "-f", "line"], env={}, capture_output=True)
    assert r.returncode == 0 and r.stdout.decode().startswith("topodoctor OK: 4 GPUs"), r

    # The installed prolog, with the installed command (by the default path on a real install).
    etc = top / "etc" / "slurm"
    log = tmp_path / "topodoctor.log"
    conf = f"TOPODOCTOR_ARGS='--replay h200-x4'\nTOPODOCTOR_LOG={log}\n"
    (etc / "topodoctor-prolog.conf").write_text(conf + ("" if real else f"TOPODOCTOR={installed}\n"))
    try:
        r = subprocess.run(
            [str(etc / "topodoctor-prolog.sh")],
            env={"SLURMD_NODENAME": "gpu01", "SLURM_JOB_ID": "7"},
            capture_output=True,
            timeout=60,
        )
        assert r.returncode == 0, r
        assert "prolog[" in log.read_text() and " node=gpu01 job=7: ok: topodoctor OK: 4 GPUs" in log.read_text()
    finally:
        (etc / "topodoctor-prolog.conf").unlink()
