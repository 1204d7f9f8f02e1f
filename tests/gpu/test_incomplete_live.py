"""Run on a GPU host only (pytest -m gpu tests/gpu): what `check` could not see, said out loud.

As root the host must pass (exit 0, no error-level finding, nothing incomplete). As an
unprivileged user (nobody, through setpriv) some reads are refused: the check must still pass
on a healthy host, and every field the probe could not read must come back as a could-not-check
(TD901) naming its GPU, link, pair or the host, never as a silent pass. Results go to $OUT when set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

if shutil.which("nvidia-smi") is None:
    pytest.skip("no nvidia-smi: not a GPU host", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
REPORT = """
import json, sys
from topodoctor.probe.sources import probe_host
from topodoctor.rules import Context, Environment, evaluate
from topodoctor.rules.probe import probe_failures
snap = probe_host().snapshot
ev = evaluate(Context(snap, Environment({}, {}, {}, (), None)))
json.dump({
    "failures": sorted({(s, f, e.error) for s, f, e in probe_failures(snap)}),
    "incomplete": [(f.subject, f.evidence["field"], f.severity, f.evidence["rules"]) for f in ev.incomplete],
    "findings": [(f.code, f.severity, f.subject, f.message) for f in ev.findings],
}, sys.stdout)
"""


def _save(name: str, data: Any) -> None:
    out = os.environ.get("OUT")
    if out:
        Path(out, name).write_text(json.dumps(data, indent=1) + "\n")


def _as_nobody(tmp_path: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    """Run with the project copied where nobody can read it (the checkout may sit under /root)."""
    if os.geteuid() != 0:
        prefix: list[str] = []
    elif shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    else:
        prefix = NOBODY
    # pytest's tmp_path sits under a 0700 directory of root's: nobody could not even reach it.
    home = Path(os.environ.get("TOPODOCTOR_NOBODY_DIR") or tempfile.mkdtemp(prefix="topodoctor-nobody-"))
    os.environ["TOPODOCTOR_NOBODY_DIR"] = str(home)
    home.chmod(0o755)
    tmp_path = home
    copy = tmp_path / "td"
    if not copy.exists():
        shutil.copytree(ROOT / "topodoctor", copy / "topodoctor")
        for p in [tmp_path, copy, *copy.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    env = dict(os.environ, PYTHONPATH=str(copy), HOME=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [*prefix, sys.executable, *cmd], capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=180
    )


def test_root_check_is_complete() -> None:
    out = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    _save("root-check.json", got)
    assert not [f for f in got["findings"] if f[1] in ("error", "critical")], got["findings"]
    if os.geteuid() == 0:
        assert got["incomplete"] == [], got["incomplete"]


def test_unprivileged_check_says_what_it_could_not_check(tmp_path: Path) -> None:
    check = _as_nobody(tmp_path, "-m", "topodoctor", "check", "-f", "json")
    _save("nobody-check.json", {"rc": check.returncode, "stdout": check.stdout, "stderr": check.stderr})
    if check.returncode == 3:
        # NVML itself refused: the whole check could not be made, and it says so.
        assert "could not" in (check.stdout + check.stderr).lower() or "permission" in check.stderr.lower()
        return
    assert check.returncode == 0, check.stdout + check.stderr
    doc = json.loads(check.stdout)
    assert not [f for f in doc["findings"] if f["severity"] in ("error", "critical")], doc["findings"]
    report = _as_nobody(tmp_path, "-c", REPORT)
    assert report.returncode == 0, report.stderr
    got = json.loads(report.stdout)
    _save("nobody-report.json", got)
    said = {(s, f) for s, f, _, _ in got["incomplete"]}
    unsaid = [(s, f, e) for s, f, e in got["failures"] if (s, f) not in said]
    # A failure may be reported under the name a rule gives it; the subject must be there.
    assert {s for s, _, _ in unsaid} <= {s for s, _ in said}, unsaid
