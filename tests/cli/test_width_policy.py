"""One width policy for text, every command alike (topodoctor/core/text.py ``text_width``): COLUMNS
where set, the terminal's width on a terminal, one fixed width in a pipe or a file."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from topodoctor.cli.io import Env
from topodoctor.core.text import PIPE_WIDTH, text_width
from topodoctor.report import collectives, terminal

PACKAGE = Path(__file__).resolve().parents[2] / "topodoctor"


def test_every_renderer_takes_the_one_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert text_width(io.StringIO()) == terminal.text_width(io.StringIO()) == PIPE_WIDTH
    assert collectives.text_width() == PIPE_WIDTH  # a pipe: nccl-tests' table stays whole
    monkeypatch.setenv("COLUMNS", "90")
    assert text_width() == terminal.text_width() == collectives.text_width() == 90


def test_a_line_for_people_on_stderr_wraps_at_the_same_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    err = io.StringIO()
    Env(stderr=err).say("word " * 60)
    assert max(len(line) for line in err.getvalue().splitlines()) <= PIPE_WIDTH < len("word " * 60)


def test_only_the_policy_reads_the_terminal_s_width() -> None:
    readers = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if re.search(r"get_terminal_size|environ\.get\(\"COLUMNS\"", p.read_text())
    )
    assert readers == ["core/text.py", "report/terminal.py"]  # the policy, and rich's console made to it
