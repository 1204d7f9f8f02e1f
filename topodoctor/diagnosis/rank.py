"""Candidate causes, and how they are ranked into the one a finding leads with.

A candidate says what the busbw (or copy rate, or HBM figure) would be were it the only thing wrong
(``expected``); against the healthy reference and the measured value that is the share of the
shortfall it explains. Candidates that cannot be quantified rank as explaining half, behind any that
explains more and ahead of any that explains less; ties go to the stronger evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from topodoctor.model.findings import NOT_FOUND, Cause, Confidence

UNQUANTIFIED = 0.5  # where an unquantified candidate ranks among quantified ones
EXPLAINS_HIGH = 0.7  # a quantified candidate that explains this much, on direct evidence, is high
EXPLAINS_SOME = 0.2  # less than this of the shortfall is not a cause worth leading with
_WEIGHT = {"high": 3, "medium": 2, "low": 1, "none": 0}


@dataclass(frozen=True)
class Candidate:
    """One possible cause: what it is, the fix, the evidence, and what it leaves of the healthy figure."""

    what: str
    fix: str
    evidence: dict[str, Any]
    expected: float | None = None  # the figure were this the only cause; None: not quantified
    direct: bool = True  # NCCL or NVML showed it (a logged setting, a named process), not inferred
    confidence: Confidence | None = None  # set where the kind of evidence decides it (a failure's)
    also_ruled_out: tuple[str, ...] = field(default=())


def explained(c: Candidate, reference: float | None, measured: float | None) -> float | None:
    """The share of ``reference - measured`` that ``c`` accounts for (0-1), or None."""
    if c.expected is None or reference is None or measured is None or measured >= reference:
        return None
    return max(0.0, min(1.0, (reference - c.expected) / (reference - measured)))


def _confidence(c: Candidate, share: float | None) -> Confidence:
    if c.confidence is not None:
        return c.confidence
    if share is None:
        return "medium" if c.direct else "low"
    if share >= EXPLAINS_HIGH:
        return "high" if c.direct else "medium"
    return "medium" if share >= 0.4 else "low"


def best_cause(
    candidates: Iterable[Candidate],
    reference: float | None,
    measured: float | None,
    ruled_out: Iterable[str],
    fallback_fix: str,
    symptom: dict[str, Any],
) -> Cause:
    """The candidates ranked by the share of the shortfall each explains; the best becomes the
    cause, the rest its ``others``. Candidates that explain almost nothing are ruled out instead.
    With none left: "cause not found", with everything that was ruled out."""
    ruled = list(ruled_out)
    scored: list[tuple[float, int, Candidate, float | None, Confidence]] = []
    for c in candidates:
        ruled.extend(c.also_ruled_out)
        share = explained(c, reference, measured)
        if c.expected is not None and reference is not None and share is not None and share < EXPLAINS_SOME:
            ruled.append(f"{c.what}: would leave {c.expected:.0f} of {reference:.0f}, explains little")
            continue
        conf = _confidence(c, share)
        scored.append((share if share is not None else UNQUANTIFIED, _WEIGHT[conf], c, share, conf))
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    base = {k: v for k, v in symptom.items() if v is not None}
    if not scored:
        return Cause(NOT_FOUND, "none", fallback_fix, base, None, tuple(dict.fromkeys(ruled)))
    _, _, top, share, conf = scored[0]
    evidence = {**base, **top.evidence}
    if top.expected is not None:
        evidence["expected_under_cause"] = round(top.expected, 1)
    others = tuple(f"{c.what}" + (f" (explains {s:.0%})" if s is not None else "") for _, _, c, s, _ in scored[1:4])
    return Cause(
        top.what,
        conf,
        top.fix,
        evidence,
        None if share is None else round(share, 2),
        tuple(dict.fromkeys(ruled)),
        others,
    )
