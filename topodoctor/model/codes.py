"""The one table of topodoctor's codes: every code a finding can carry, whichever part raises it.

Four origins raise codes: the rules of a host (``rules.registry.rule``, TD001 - TD9xx; the diagnoses of
a user's evidence among them), the failure classes `nccl-log` names (``nccl.explanation.explained``),
the findings of a fleet's history (``fleet.codes``) and `diagnose`'s account of what it read
(``diagnosis.evidence_read``). Each registers its codes here as it declares them, so a code added the way its
origin adds codes is listed by `topodoctor rules`, shown by `topodoctor explain` and documented in
docs/rules.md without a second list. A code belongs to one origin: registering it from two fails
at import, loudly. The documentation itself stays with its origin (a rule's docstring, a class's
text); the table holds what every origin has alike. Data only."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from topodoctor.model.findings import Severity

Origin = Literal["rule", "nccl-log", "fleet-history", "diagnose"]
# The order `rules` lists them in, and the heading each origin's group carries.
ORIGINS: dict[Origin, str] = {
    "rule": "rules of a host (`topodoctor check`)",
    "nccl-log": "what an NCCL log says (`topodoctor nccl-log`)",
    "fleet-history": "a fleet's history (`topodoctor fleet --history`)",
    "diagnose": "what `topodoctor diagnose` read of a user's evidence",
}
_CODE = re.compile(r"^TD(?!000)\d\d\d$")


@dataclass(frozen=True)
class Code:
    """One code: who raises it, its stable name, its severity (and the others its findings may
    carry), and its one-line title."""

    code: str
    origin: Origin
    name: str
    severity: Severity
    title: str
    also: frozenset[Severity] = frozenset()


TABLE: dict[str, Code] = {}


def register(entry: Code) -> Code:
    """Add ``entry`` to the table. The same entry twice is one entry (a module read again); a code
    or a name another entry holds is refused."""
    if not _CODE.match(entry.code):
        raise ValueError(f"code {entry.code!r} is not TD + 3 digits")
    held = TABLE.get(entry.code)
    if held is not None and held != entry:
        raise ValueError(
            f"code {entry.code} registered twice ({held.origin} {held.name} and {entry.origin} {entry.name})"
        )
    if any(c.name == entry.name and c.code != entry.code for c in TABLE.values()):
        raise ValueError(f"code name {entry.name!r} registered twice")
    TABLE[entry.code] = entry
    return entry


def unregister(code: str) -> None:
    """Take ``code`` out of the table (a rule registered for a test, taken out again)."""
    TABLE.pop(code, None)


def by_origin() -> Iterator[tuple[Origin, list[Code]]]:
    """Every origin that registered codes, in ``ORIGINS``' order, with its codes in order."""
    for origin in ORIGINS:
        codes = [TABLE[c] for c in sorted(TABLE) if TABLE[c].origin == origin]
        if codes:
            yield origin, codes


def lookup(code_or_name: str) -> Code | None:
    """The entry of a code (any case) or of a name; None for neither."""
    return TABLE.get(code_or_name.upper()) or next((c for c in TABLE.values() if c.name == code_or_name), None)
