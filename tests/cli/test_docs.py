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


# ----------------------------------------------------------------------------- README.md
README = ROOT / "README.md"


def _blocks(text: str) -> list[str]:
    return text.split("```bash\n")[1:]


def test_readme_s_try_it_commands_are_plain_and_the_replayed_check_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from topodoctor.cli.commands import main

    text = README.read_text()
    assert "$(" not in text, "a command whose substitution hides what it runs"
    first = _blocks(text)[0].split("```")[0].strip().splitlines()
    assert first == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install .",
        "topodoctor check --replay h100-x2",
    ]
    assert main(first[1].split()[1:]) == 0
    assert "HEALTHY: no findings" in capsys.readouterr().out


def test_readme_links_every_page_of_docs() -> None:
    text = README.read_text()
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"](docs/{p.name})" not in text]
    assert not unlinked, f"README.md links no {unlinked}"


def test_readme_s_rule_count_is_true() -> None:
    from topodoctor.rules import REGISTRY

    assert "over 100 rules" in README.read_text() and len(REGISTRY) > 100


def test_the_run_times_are_one_table_that_readme_prolog_and_check_help_quote() -> None:
    from topodoctor.service.run_times import RUN_TIMES, run_times_markdown, took

    assert run_times_markdown() in README.read_text(), "paste topodoctor.service.run_times.run_times_markdown()"
    prolog = " ".join((ROOT / "docs" / "prolog.md").read_text().split())
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    shown = subprocess.run(
        [sys.executable, "-m", "topodoctor", "check", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    shown = " ".join(shown.split())
    for r in RUN_TIMES:
        assert f"{r.wall} on {r.host}" in took(r.command)
        assert r.wall.split()[0] in bench and f"## {r.section}" in bench, r  # the figure and where it was measured
        if r.command != "check":
            assert f"{r.wall} on {r.host}" in prolog, r
        assert f"{r.wall} on {r.host}" in shown, r


def test_the_torch_readme_installs_is_the_one_ci_installs() -> None:
    readme, ci = README.read_text(), (ROOT / ".ci" / "run").read_text()
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in readme
    assert "'torch==2.13.0+cpu'" in ci and "--index-url https://download.pytorch.org/whl/cpu" in ci
    assert "torch" not in (ROOT / "pyproject.toml").read_text().split("test = [")[1].split("]")[0]
