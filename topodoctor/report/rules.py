"""`topodoctor rules` output: one line per rule for people, a list of objects for machines."""

from __future__ import annotations

from typing import Any

from topodoctor.report.terminal import fold, text_width
from topodoctor.rules import REGISTRY


def rules_text(width: int | None = None) -> str:
    """``topodoctor rules``: one row per rule, code, name, default severity, then its title with
    its tags in brackets, folded under the title's column to fit ``width`` (on a terminal too
    narrow for that, under the name)."""
    width = width or text_width()
    rows = [REGISTRY[code] for code in sorted(REGISTRY)]
    name_w = max(len(r.name) for r in rows)
    out: list[str] = []
    for r in rows:
        head = f"{r.code}  {r.name:<{name_w}}  {r.severity:<8}  "
        tags = f" [{', '.join(sorted(r.tags))}]" if r.tags else ""
        out += fold(head + r.title + tags, width, len(head) if width - len(head) >= 30 else 7)
    return "\n".join(out)


def rules_json() -> list[dict[str, Any]]:
    """``topodoctor rules --format json``: every rule's code, name, severity, family, title and tags."""
    keys = ("code", "name", "severity", "family", "title")
    return [
        {**{k: getattr(r, k) for k in keys}, "tags": sorted(r.tags)} for r in (REGISTRY[c] for c in sorted(REGISTRY))
    ]
