"""`nccl-log`'s answer on a pasted text, as the development tests of the scored sets read it: every finding, and
the lead (the first at error or above)."""

from __future__ import annotations

from pathlib import Path

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file


def explained(text: str, name: str = "/x/rank0.log") -> list[Finding]:
    """The findings of one file holding ``text``."""
    return list(explain([parse_file(name, text)]))


def lead_of(text: str, name: str = "/x/rank0.log") -> Finding:
    """The first finding at error or above."""
    return next(f for f in explained(text, name) if f.severity in ("error", "critical"))


def explained_with(path: Path, *replace: tuple[str, str]) -> list[Finding]:
    """The findings of a fixture log read alone, after each (old, new) replacement: a near miss of the same log."""
    text = path.read_text()
    for old, new in replace:
        text = text.replace(old, new)
    return explained(text, str(path))
