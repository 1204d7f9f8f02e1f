"""The bundled recordings render exactly as they did before the package moved to its stage layout:
`scan -f json` and `check -f json`, byte for byte (tests/golden holds the outputs of that time).
The text scan too, as it printed before its child set the text out (report/scan_text.py): the
recordings on a pipe's width, and two derived hosts (a lost GPU on 80 columns, eight GPUs and
their NICs).

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
CASES = [(cmd, host) for host in ("h100-x1", "h100-x2", "h200-x2", "h200-x4") for cmd in ("scan", "check")]
DERIVED = ROOT / "fixtures" / "derived"
# (golden file stem, --replay, COLUMNS or None for a pipe's width)
TEXT_CASES = [(f"scan-{h}", h, None) for h in ("h100-x1", "h100-x2", "h200-x2", "h200-x4")] + [
    ("scan-x4-gpu-lost-80", str(DERIVED / "x4-gpu-lost.json"), "80"),
    ("scan-hgx-8gpu-2socket", str(DERIVED / "hgx-8gpu-2socket.json"), None),
]
# The fields that measure this run rather than the host: how long it took and when it ran.
ELAPSED = re.compile(r'"elapsed_s": [0-9.]+|"measured_at": "[^"]*"')


def render(cmd: str, host: str, cwd: Path, fmt: str = "json", columns: str | None = None) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(cwd)}
    if columns is not None:
        env["COLUMNS"] = columns
    out = subprocess.run(
        [sys.executable, "-m", "topodoctor", cmd, "--replay", host, "-f", fmt],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return _of_the_host(out.stdout)


def _of_the_host(text: str) -> str:
    return ELAPSED.sub(lambda m: '"elapsed_s": 0' if m.group().startswith('"elapsed') else '"measured_at": ""', text)


@pytest.mark.parametrize(("cmd", "host"), CASES)
def test_bundled_recording_renders_as_before(cmd: str, host: str, tmp_path: Path) -> None:
    expected = _of_the_host((GOLDEN / f"{cmd}-{host}.json").read_text())
    assert render(cmd, host, tmp_path) == expected


@pytest.mark.parametrize(("stem", "host", "columns"), TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_the_text_scan_prints_as_before(stem: str, host: str, columns: str | None, tmp_path: Path) -> None:
    assert render("scan", host, tmp_path, "text", columns) == (GOLDEN / f"{stem}.txt").read_text()


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for cmd, host in CASES:
            (GOLDEN / f"{cmd}-{host}.json").write_text(render(cmd, host, Path(d)))
        for stem, host, columns in TEXT_CASES:
            (GOLDEN / f"{stem}.txt").write_text(render("scan", host, Path(d), "text", columns))
