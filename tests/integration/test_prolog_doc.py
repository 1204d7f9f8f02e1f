"""The lines docs/prolog.md quotes are what the bundled recordings really print.

Every inline quotation in the page that holds a verdict line (``topodoctor OK|FAIL|UNKNOWN ...``)
must match a line printed by one of the runs below, "..." standing for what the page leaves
out. A quotation no run prints fails: the page cannot drift from the program."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a dozen checks in processes of their own
ROOT = Path(__file__).resolve().parents[2]
DERIVED = ROOT / "fixtures" / "derived"
PAGES = [ROOT / "docs" / "prolog.md"]
VERDICT = re.compile(r"topodoctor (?:OK|FAIL|UNKNOWN)\b.*")

# (environment, arguments of `check --format line`, what the page says in place of what the run
# prints): the runs whose lines the page may quote.
RUNS: list[tuple[dict[str, str], list[str], dict[str, str]]] = [
    ({}, ["--replay", "h200-x1"], {}),
    ({}, ["--replay", "h200-x4"], {}),
    ({}, ["--replay", str(DERIVED / "x4-nvlink-down.json")], {}),
    ({"SLURM_JOB_ID": "12", "SLURM_JOB_GPUS": "2,3"}, ["--replay", "h200-x4"], {}),
    ({"SLURM_JOB_ID": "12", "SLURM_JOB_GPUS": "0,1"}, ["--replay", str(DERIVED / "x4-nvlink-down.json")], {}),
    ({"SLURM_JOB_ID": "12", "SLURM_JOB_GPUS": "0,1"}, ["--replay", str(DERIVED / "x4-foreign-processes.json")], {}),
    # the page's 20 s budget, run with half a second
    ({}, ["--replay", str(DERIVED / "x4-nvml-hang.json"), "--timeout", "0.5"], {"0.5 s budget": "20 s budget"}),
    ({}, ["--replay", "h200-x4", "--expect", "/etc/topodoctor/hgx-h200.json"], {}),
    ({}, ["--replay", str(DERIVED / "x4-nvlink-down.json"), "--expect", "/etc/topodoctor/hgx-h200.json"], {}),
    ({}, ["--replay", "h200-x4", "--timeout", "soon"], {}),
    # the page's /var/lib/... written as a relative path under an empty directory (nothing of the
    # machine's own is touched)
    (
        {},
        ["--replay", "h200-x4", "--metrics", "var/lib/node_exporter/textfile/topodoctor-check.prom"],
        {"cannot write var/": "cannot write /var/"},
    ),
]


def _quoted() -> list[str]:
    out = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # fenced blocks are commands
        for span in re.findall(r"`([^`]+)`", text):
            found = VERDICT.search(re.sub(r"\s*\n\s*", " ", span))
            if found:
                out.append(found.group(0))
    return out


def _printed(tmp_path: Path) -> list[str]:
    lines = []
    for env, args, said in RUNS:
        r = subprocess.run(
            [sys.executable, "-m", "topodoctor", "check", "--format", "line", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), **env},
            timeout=60,
        )
        line = r.stdout.strip()
        for printed, page in said.items():
            line = line.replace(printed, page)
        lines.append(line)
    # A SIGTERM in the middle of a check.
    p = subprocess.Popen(
        [sys.executable, "-m", "topodoctor", "check", "-f", "line", "--replay", str(DERIVED / "x4-nvml-hang.json")],
        stdout=subprocess.PIPE,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)},
    )
    time.sleep(1.5)
    p.send_signal(signal.SIGTERM)
    lines.append(p.communicate(timeout=10)[0].strip())
    return lines


def _matches(quoted: str, line: str) -> bool:
    return re.fullmatch(".*".join(re.escape(part) for part in quoted.split("...")), line) is not None


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return _printed(tmp_path_factory.mktemp("doc-lines"))


def test_every_verdict_line_the_page_quotes_is_printed(printed: list[str]) -> None:
    quoted = _quoted()
    assert len(quoted) > 10, "the page quotes its lines in backticks"
    unprinted = [q for q in quoted if not any(_matches(q, line) for line in printed)]
    assert not unprinted, f"quoted but printed by no run: {unprinted}\nprinted: {printed}"


def test_the_runs_print_what_they_are_listed_for(printed: list[str]) -> None:
    assert all(VERDICT.fullmatch(line) for line in printed), printed
    assert all(len(line) <= 200 for line in printed)
