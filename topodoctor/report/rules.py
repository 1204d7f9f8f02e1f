"""`topodoctor rules` output: one line per rule for people, a list of objects for machines."""

from __future__ import annotations

from typing import Any

from topodoctor.rules import REGISTRY


def rules_text() -> str:
    """``topodoctor rules``: one line per rule, code, name, severity, tags and title."""
    rows = [REGISTRY[code] for code in sorted(REGISTRY)]
    return "\n".join(
        f"{r.code}  {r.name:<32} {r.severity:<8} {','.join(sorted(r.tags)) or '-':<8} {r.title}" for r in rows
    )


def rules_json() -> list[dict[str, Any]]:
    """``topodoctor rules --format json``: every rule's code, name, severity, family, title and tags."""
    keys = ("code", "name", "severity", "family", "title")
    return [
        {**{k: getattr(r, k) for k in keys}, "tags": sorted(r.tags)} for r in (REGISTRY[c] for c in sorted(REGISTRY))
    ]
