"""Generated files stay in step with their sources."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

from topodoctor.report.rule_docs import rules_markdown


def test_rules_md_is_current() -> None:
    assert (ROOT / "docs" / "rules.md").read_text() == rules_markdown(), (
        "run: topodoctor rules --markdown > docs/rules.md"
    )


@pytest.mark.slow
def test_derived_fixtures_are_reproducible() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "fixtures" / "derive.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_codec_round_trip_of_every_snapshot() -> None:
    from topodoctor.core.codec import to_jsonable
    from topodoctor.model.snapshot import snapshot_from_data
    from topodoctor.probe.sources import probe_host

    for name in ("h200-x4", "h200-x2", "h100-x1"):
        snap = probe_host(name).snapshot
        assert snapshot_from_data(to_jsonable(snap)) == snap


def test_example_scripts_are_valid_shell() -> None:
    """The Slurm scripts run verbatim under slurmd (tests/integration, -m cluster); here, cheaply,
    that bash can parse them at all."""
    for script in sorted((ROOT / "docs" / "examples").glob("*.sh")):
        r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert r.returncode == 0, f"{script.name}: {r.stderr}"
