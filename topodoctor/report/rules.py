"""`topodoctor rules` output: every code of the one table (``model.codes``), grouped by origin: one
line per code for people, a list of objects for machines."""

from __future__ import annotations

from typing import Any

from topodoctor.model import codes
from topodoctor.report import rule_docs  # noqa: F401  (loads every origin's codes into the table)
from topodoctor.report.terminal import fold, text_width
from topodoctor.rules.registry import FAMILIES, REGISTRY


def rules_text(width: int | None = None) -> str:
    """``topodoctor rules``: the rules of a host, then each other origin's codes under its heading;
    one row per code, code, name, default severity, then its title with a rule's tags in brackets,
    folded under the title's column to fit ``width`` (on a terminal too narrow for that, under the
    name)."""
    width = width or text_width()
    out: list[str] = []
    for origin, group in codes.by_origin():
        if origin != "rule":
            out += ["", codes.ORIGINS[origin].replace("`", "") + ":"]
        name_w = max(len(c.name) for c in group)
        for c in group:
            head = f"{c.code}  {c.name:<{name_w}}  {c.severity:<8}  "
            tags = REGISTRY[c.code].tags if origin == "rule" else frozenset()
            title = c.title + (f" [{', '.join(sorted(tags))}]" if tags else "")
            out += fold(head + title, width, len(head) if width - len(head) >= 30 else 7)
    return "\n".join(out)


def rules_json() -> list[dict[str, Any]]:
    """``topodoctor rules --format json``: every code's code, origin, name, severity, family (a
    rule's family, else its origin), title and tags."""
    return [
        {
            "code": c.code,
            "origin": c.origin,
            "name": c.name,
            "severity": c.severity,
            "family": FAMILIES[c.code[2]] if origin == "rule" else origin,
            "title": c.title,
            "tags": sorted(REGISTRY[c.code].tags) if origin == "rule" else [],
        }
        for origin, group in codes.by_origin()
        for c in group
    ]
