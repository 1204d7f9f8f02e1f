"""A finding's cause as text for people: how sure, how much of the shortfall it explains, the other
candidates and what was ruled out (the message already leads with the cause itself)."""

from __future__ import annotations

from topodoctor.model.findings import Finding

RULED_SHOWN = 4  # ruled-out items a line names; the JSON carries them all


def cause_line(f: Finding) -> str | None:
    """``why: high confidence, explains 90 % of the shortfall; ruled out: ...``, or None without a cause."""
    c = f.cause
    if c is None:
        return None
    parts = []
    if c.found:
        share = f", explains {c.explains:.0%} of the shortfall" if c.explains is not None else ""
        parts.append(f"{c.confidence} confidence{share}")
        if c.others:
            parts.append("also: " + "; ".join(c.others))
    else:
        parts.append("cause not found")
    if c.ruled_out:
        more = len(c.ruled_out) - RULED_SHOWN
        parts.append("ruled out: " + "; ".join(c.ruled_out[:RULED_SHOWN]) + (f" (+{more} more)" if more > 0 else ""))
    return "why: " + "; ".join(parts)
