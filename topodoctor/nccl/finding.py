"""A finding of `nccl-log`: its code's explanation, the evidence line, and how sure its cause is
(stated by the log, the usual cause, candidates ranked, or shown by the log's own line). Data in,
findings out."""

from __future__ import annotations

from collections.abc import Sequence

from topodoctor.model.findings import Finding
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.logfile import Event

# How sure the cause is: NCCL or CUDA states it in so many words, or it is the usual cause of that message
STATED = frozenset(
    (
        "TD040",
        "TD041",
        "TD042",
        "TD043",
        "TD044",
        "TD048",
        "TD054",
        "TD055",
        "TD058",
        "TD060",
        "TD061",
        "TD062",
        "TD070",
        "TD073",
        "TD077",
        "TD078",
        "TD079",
        "TD085",
        "TD086",
        "TD089",
        "TD096",
    )
)


def finding(code: str, subject: str, message: str, fix: str, ev: Event | None, **extra: object) -> Finding:
    """A finding of class ``code`` with its explanation, quoting the line ``ev`` (file, line, text, rank) as its
    evidence."""
    e = EXPLANATIONS[code]
    evidence: dict[str, object] = {}
    if ev is not None:
        evidence.update(file=ev.file, line=ev.line_no, text=ev.text)
        if ev.rank is not None:
            evidence["rank"] = ev.rank
    not_found = code in ("TD049", "TD052")  # a failure no class explains: its cause is not found
    confidence = "not found" if not_found else ("stated by the log" if code in STATED else "likely")
    if "candidates" in extra:  # a message of several causes: the finding ranks them
        confidence = "candidates"
    elif "narrowed_by" in extra:  # a class of several causes, and the log holds the line that singles one out
        confidence = "shown by the log"
    evidence["cause"] = {"what": e.title if not not_found else "not found", "confidence": confidence}
    evidence.update(extra)
    return Finding(code, e.name, e.severity, subject, message, fix, evidence)


def subject(evs: Sequence[Event]) -> str:
    """What a finding is about: the ranks of ``evs`` (the first eight), else the file they came from."""
    ranks = sorted({e.rank for e in evs if e.rank is not None})
    if ranks:
        return "rank" + ",".join(str(r) for r in ranks[:8]) + ("..." if len(ranks) > 8 else "")
    return evs[0].file.rsplit("/", 1)[-1]
