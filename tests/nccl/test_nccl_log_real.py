"""`topodoctor nccl-log` on real NCCL output from public issue threads
(fixtures/nccl-logs/real/, its README holds each file's source, what the thread settled and
what `nccl-log` must answer). Every file is held to the table: the first finding's code and
severity, the exit code, and the fix naming what settled the thread; the share of failed
logs named with the right fix is printed and must stay at or above 90 %."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.model.findings import Finding, failing
from topodoctor.nccl.explain import explain
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.parse import parse_file

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "real"
runner = CliRunner()


def _rows() -> dict[str, dict[str, str]]:
    """The README's table: file -> column -> cell (``\\|`` is a pipe inside a cell)."""
    rows: dict[str, dict[str, str]] = {}
    head: list[str] = []
    for line in (REAL / "README.md").read_text().splitlines():
        if not line.startswith("|") or line.startswith("| ---"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if not head:
            head = cells
            continue
        row = dict(zip(head, cells, strict=True))
        rows[row["file"].strip("`")] = row
    return rows


ROWS = _rows()


def _expected(row: dict[str, str]) -> tuple[str | None, str | None, int]:
    """(code, severity, exit code) from the ``expected`` cell: ``TD053 error``, ``none, exit 0``."""
    cell = row["expected"]
    if cell.startswith("none"):
        return None, None, 0
    code, severity = cell.split(",")[0].split()[:2]
    return code, severity, 1 if severity == "error" else 0


def _run(name: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    r = runner.invoke(app, ["nccl-log", "-f", "json", str(REAL / name)])
    return r.exit_code, json.loads(r.stdout)


def test_the_table_and_the_files_agree() -> None:
    files = {p.name for p in REAL.iterdir() if p.suffix == ".log"}
    assert files == set(ROWS)
    assert len(files) >= 40
    for name, row in ROWS.items():
        code, severity, _ = _expected(row)
        assert row["source"].startswith("https://github.com/"), name
        if code is not None:
            assert code in EXPLANATIONS and EXPLANATIONS[code].severity == severity, name
        if row["settled"] == "no":  # an open thread may only expect "cause not found"
            assert code in ("TD052", "TD049"), name


@pytest.mark.parametrize("name", sorted(ROWS))
def test_real_log_named_as_the_thread_settled(name: str) -> None:
    row = ROWS[name]
    code, severity, exit_code = _expected(row)
    rc, doc = _run(name)
    findings = doc["findings"]
    assert rc == exit_code, (name, rc, findings[:1])
    if code is None:
        assert findings == []
        return
    first = findings[0]
    assert (first["code"], first["severity"]) == (code, severity), first
    said = first["fix"] + " " + first["message"]
    assert row["names"] in said, (row["names"], said)
    text = (REAL / name).read_text(errors="replace").splitlines()
    if "line" in first["evidence"]:  # the evidence is the file's own line
        assert first["evidence"]["text"] in text[first["evidence"]["line"] - 1].strip()


def _first(name: str) -> tuple[int, Finding | None]:
    """The exit code `nccl-log` gives the file (1: a finding at error level) and its first finding."""
    findings = explain([parse_file(str(REAL / name), (REAL / name).read_text(errors="replace"))])
    return (1 if failing(findings, "error") else 0), (findings[0] if findings else None)


def test_share_named_with_the_right_fix(capsys: pytest.CaptureFixture[str]) -> None:
    failed = {n: r for n, r in ROWS.items() if _expected(r)[2] == 1 and r["settled"] != "no"}
    named = 0
    for name, row in failed.items():
        rc, first = _first(name)
        if rc == 1 and first and first.code == _expected(row)[0] and row["names"] in first.fix + first.message:
            named += 1
    share = named / len(failed)
    with capsys.disabled():
        print(
            f"\nnccl-log on {len(ROWS)} real logs: {named} of {len(failed)} failed jobs with a settled cause "
            f"named at error level with the right fix ({share:.0%})"
        )
    assert share >= 0.9
    never_zero = [n for n, r in ROWS.items() if _expected(r)[1] == "error" and _first(n)[0] != 1]
    assert never_zero == []  # a log of a failed job never exits 0


@pytest.mark.parametrize("name", sorted(ROWS))
def test_text_fits_100_columns(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    r = runner.invoke(app, ["nccl-log", str(REAL / name)])
    assert r.exit_code in (0, 1)
    assert max(len(line) for line in r.stdout.splitlines()) <= 100, r.stdout
