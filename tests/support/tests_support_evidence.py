"""The judgement of evidence as the diagnosis tests read it: the findings about the hardware, without
the per-piece account of what was read (TD980, TD981; test_evidence_read.py holds those)."""

from __future__ import annotations

from topodoctor.diagnosis import evidence
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding

READ = ("TD980", "TD981")


def judge(ev: Evidence) -> tuple[Finding, ...]:
    """``evidence.judge`` less what was read."""
    return tuple(f for f in evidence.judge(ev) if f.code not in READ)
