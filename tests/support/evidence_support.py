"""What the readers' tests share: the fixtures' folder and one call that reads a file as diagnose does."""

from __future__ import annotations

from pathlib import Path

from topodoctor.evidence.inputs import Read, read_input

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "fixtures" / "evidence"


def read(path: Path) -> Read:
    """A fixture read as ``diagnose`` reads it (the service only adds the bounded file read)."""
    return read_input(path.name, path.read_text())


def kinds(got: Read) -> list[str]:
    """The kinds of the pieces read, in order."""
    return [p.kind for p in got.pieces]


def only(got: Read, kind: str) -> int:
    """The index of the one piece of ``kind`` (the test fails when there is not exactly one)."""
    found = [k for k, p in enumerate(got.pieces) if p.kind == kind]
    assert len(found) == 1, [p.kind for p in got.pieces]
    return found[0]
