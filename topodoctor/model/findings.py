"""Findings as they leave the rules: plain data that reports, metrics and the fleet roll-up read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, TypeVar, cast

Severity = Literal["info", "warning", "error", "critical"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "warning": 1, "error": 2, "critical": 3}
# How sure a cause is: high (NCCL or NVML showed it and it accounts for the shortfall), medium (shown,
# and in the direction of the symptom), low (circumstantial), none (no cause found).
Confidence = Literal["high", "medium", "low", "none"]
NOT_FOUND = "cause not found"


@dataclass(frozen=True)
class Cause:
    """Why a symptom (a slow or failed collective, a slow copy, low HBM) happened, as the evidence
    topodoctor gathered shows it: the best candidate, how much of the shortfall it explains, what
    else was looked at and ruled out. ``what`` is ``cause not found`` when nothing explains it."""

    what: str  # "NCCL_PROTO=LL forces the LL protocol", or NOT_FOUND
    confidence: Confidence
    fix: str
    evidence: dict[str, Any]  # the numbers and sources the cause rests on
    explains: float | None = None  # share of the shortfall it accounts for (0-1); None: not quantified
    ruled_out: tuple[str, ...] = ()  # what was examined and does not explain the symptom
    others: tuple[str, ...] = ()  # lesser candidates, best first

    @property
    def found(self) -> bool:
        """Whether a cause was named (not "cause not found")."""
        return self.confidence != "none"


@dataclass(frozen=True)
class Finding:
    """One thing a rule found: its stable code and name, how bad, about what, and what to do; a
    symptom also carries its cause (``diagnosis``), which its message and fix lead with."""

    code: str
    name: str
    severity: Severity
    subject: str
    message: str
    fix: str
    evidence: dict[str, Any]
    cause: Cause | None = None
    # The findings of the layer below that this one follows from, as ``ref`` names them
    # ("TD501 GPU0"): a pair's dead data path is the consequence of its GPU's fabric registration.
    caused_by: tuple[str, ...] = ()


def ref(f: Finding) -> str:
    """How one finding names another in ``caused_by``: its code and subject, ``TD501 GPU0``."""
    return f"{f.code} {f.subject}"


def ident(subject: str) -> str:
    """What names a subject in words: ``bridge:0000:04:00.0`` is ``0000:04:00.0``, ``GPU3`` itself."""
    kind, colon, rest = subject.partition(":")
    return rest if colon and kind.isalpha() and kind.islower() and rest else subject


def subject_once(message: str, subject: str) -> tuple[str, bool]:
    """The message a line carries after its code, and whether it names the subject itself: a
    message that starts ``GPU0-GPU1: ...`` loses that lead (the line's head names the pair); one
    that starts with its subject (``GPU3 is lost``) or names what it is about (``bridge:X`` in
    "ACS is on in bridge X", ``env:NCCL_P2P_DISABLE`` in "NCCL_P2P_DISABLE=1: ...") keeps it, and
    the head leaves it out."""
    lead = f"{subject}: "
    if message.startswith(lead) and len(message) > len(lead):
        return message[len(lead) :], False
    if not subject:
        return message, False
    named = ident(subject)
    return message, message.startswith(f"{subject} ") or (named != subject and named in message)


def headed(f: Finding) -> str:
    """``TD101 GPU1/nvlink5: GPU1 NVLink 5 is down``, the subject named once (``subject_once``):
    ``TD507: GPU3 is lost``, ``TD306 GPU0-GPU1: 18 NVLinks up, ...``."""
    message, named = subject_once(f.message, f.subject)
    return f"{f.code}: {message}" if named else f"{f.code} {f.subject}: {message}"


def finding_json(f: Finding) -> dict[str, Any]:
    """A finding as JSON documents carry it: its fields, with ``cause`` only where the finding is a
    symptom the diagnosis explained (or could not), ``caused_by`` only where it follows from another."""
    doc = asdict(f)
    if f.cause is None:
        doc.pop("cause")
    if not f.caused_by:
        doc.pop("caused_by")
    return doc


def grouped(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """``findings`` (worst first) with each consequence moved under its first cause: a cause is
    never behind what follows from it, whatever their severities. A consequence whose causes are
    not among ``findings`` keeps its place."""
    present = {ref(f) for f in findings}
    under: dict[str, list[Finding]] = {}
    top: list[Finding] = []
    for f in findings:
        first = next((c for c in f.caused_by if c in present and c != ref(f)), None)
        (under.setdefault(first, []) if first is not None else top).append(f)
    out: list[Finding] = []

    def place(f: Finding) -> None:
        out.append(f)
        for g in under.pop(ref(f), ()):
            place(g)

    for f in top:
        place(f)
    for rest in under.values():  # a cycle of causes: nothing is dropped
        out.extend(rest)
    return tuple(out)


def consequences(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """The findings that follow from another finding among ``findings``."""
    present = {ref(f) for f in findings}
    return tuple(f for f in findings if any(c in present and c != ref(f) for c in f.caused_by))


class HasSeverity(Protocol):
    """Anything with a severity: a rule's finding, a job's, an NCCL log's."""

    @property
    def severity(self) -> Severity:
        """How bad: info, warning, error or critical."""
        ...


J = TypeVar("J", bound=HasSeverity)


def fail_from(level: str, strict: bool) -> Severity:
    """The severity from which a finding fails a command (``--fail-level``, ``--strict``): every
    command decides it here."""
    return "warning" if strict else cast("Severity", level)


def failing(findings: Sequence[J], fail_level: str) -> tuple[J, ...]:
    """The findings at or above the fail level: the ones that make a command exit 1."""
    return tuple(f for f in findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[fail_level])
