"""Generated files stay in step with their sources."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

from topodoctor.rules.docs import rules_markdown


def test_rules_md_is_current() -> None:
    assert (ROOT / "docs" / "rules.md").read_text() == rules_markdown(), (
        "run: topodoctor rules --markdown > docs/rules.md"
    )


def test_derived_fixtures_are_reproducible() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "fixtures" / "derive.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_codec_round_trip_of_every_snapshot() -> None:
    from topodoctor.core.codec import to_jsonable
    from topodoctor.model.snapshot import snapshot_from_data
    from topodoctor.probe import probe_host

    for name in ("h200-x4", "h200-x2", "h100-x1"):
        snap = probe_host(name).snapshot
        assert snapshot_from_data(to_jsonable(snap)) == snap
