"""The bundled recordings render exactly as they did before the package moved to its stage layout:
`scan -f json` and `check -f json`, byte for byte (tests/golden holds the outputs of that time).

A change of output that is meant (a new probed field, a new rule) regenerates them with
`python tests/cli/test_golden.py --write` and says why in its commit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CASES = [(cmd, host) for host in ("h100-x1", "h200-x2", "h200-x4") for cmd in ("scan", "check")]
# The one field that measures this run rather than the host.
ELAPSED = re.compile(r'"elapsed_s": [0-9.]+')


def render(cmd: str, host: str, cwd: Path) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(cwd)}
    out = subprocess.run(
        [sys.executable, "-m", "topodoctor", cmd, "--replay", host, "-f", "json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return ELAPSED.sub('"elapsed_s": 0', out.stdout)


@pytest.mark.parametrize(("cmd", "host"), CASES)
def test_bundled_recording_renders_as_before(cmd: str, host: str, tmp_path: Path) -> None:
    expected = ELAPSED.sub('"elapsed_s": 0', (GOLDEN / f"{cmd}-{host}.json").read_text())
    assert render(cmd, host, tmp_path) == expected


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for cmd, host in CASES:
            (GOLDEN / f"{cmd}-{host}.json").write_text(render(cmd, host, Path(d)))
