"""The findings of a fleet's history (TD950 - TD956): what each means, why it matters, how to fix it.

They are not rules of a host (a rule reads one snapshot): `fleet --history` raises them from a
node's results over time, and `topodoctor explain TD950` reads them from here, as it reads the
explanations `nccl-log` gives. docs/fleet.md holds the same text (a test compares them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topodoctor.model import codes as table
from topodoctor.model.findings import Finding, Severity


@dataclass(frozen=True)
class HistoryCode:
    """One history finding: code, name, severity (and the other one it may carry), and its documentation."""

    code: str
    name: str
    severity: Severity
    title: str
    why: str
    fix: str
    also: Severity | None = None  # the other severity its findings may carry, and when (in ``title``)


CODES: dict[str, HistoryCode] = {
    c.code: c
    for c in (
        HistoryCode(
            "TD950",
            "history-drift",
            "error",
            "A figure of the node fell below its own baseline: the median of its last healthy results "
            "(for a latency: rose above it), by more than the drift tolerance and by more than the spread "
            "of those results",
            "A node that got slower without failing holds back every job placed on it; its own past is the "
            "one reference that knows what this node, with these GPUs and this cabling, can do.",
            "Look at what changed on the node since the date given (clocks, power capping, a replaced part, "
            "a firmware update, a noisy neighbour); `topodoctor check --level long` on it; drain it until "
            "its figures return.",
        ),
        HistoryCode(
            "TD951",
            "lemon-node",
            "error",
            "A node failed k of its last n checks, or failed again within D days of a repair (a healthy "
            "check after a failure)",
            "A node that keeps failing costs a restart of every job that lands on it; repairs that do not "
            "hold mean the cause was not found.",
            "Keep the node out until the cause is found (the failures' codes and dates are in the evidence); "
            "escalate to the vendor with that history rather than repairing the same symptom again.",
        ),
        HistoryCode(
            "TD952",
            "lemon-gpu",
            "error",
            "A GPU (by UUID, wherever it sat) failed k of its last n checks, or failed again within D days of a repair",
            "A GPU that fails again after being moved or reseated carries its fault with it: the next node "
            "it is put into will fail the same way.",
            "Take the GPU (the serial in the evidence) out of service and return it to the vendor with its history.",
        ),
        HistoryCode(
            "TD953",
            "finding-flapping",
            "error",
            "A finding appeared and cleared repeatedly on the node: present in some checks, gone in the next "
            "(a warning when the finding itself is below the fail level)",
            "An intermittent fault looks healthy whenever a prolog happens to look: a link that flaps fails "
            "jobs between the checks that pass.",
            "Treat it as present: drain the node and fix what the finding names (its own fix hint); an "
            "intermittent link or riser is replaced, not reseated again.",
            also="warning",
        ),
        HistoryCode(
            "TD954",
            "counter-rising",
            "warning",
            "A health counter (PCIe replays, NVLink CRC / replay / recovery, remapped rows, an RDMA port's "
            "errors) rose on several days of the window",
            "Counters that keep rising announce a failing link or memory before it fails a job; a single "
            "reading cannot tell a rising counter from an old count.",
            "Schedule the part the counter names (GPU, NVLink, riser, cable, transceiver) for service at the "
            "next drain; watch whether the daily rise grows.",
        ),
        HistoryCode(
            "TD955",
            "gpu-replaced",
            "info",
            "A GPU of the node has another UUID than before: it was replaced or the GPUs were renumbered",
            "A replaced GPU starts the node's own baseline afresh and counts as a repair; a history that did "
            "not notice would compare a new part with an old one.",
            "Nothing to do when the replacement was planned; otherwise find out who changed the node.",
        ),
        HistoryCode(
            "TD956",
            "node-silent",
            "warning",
            "The node's latest result is older than the stale limit: it stopped reporting",
            "A node that does not report is not judged: a broken health check or collector hides every fault on it.",
            "Check that the node's health check runs and writes its results where the collector reads them.",
        ),
    )
}
for _c in CODES.values():  # each in the one table of codes
    table.register(
        table.Code(_c.code, "fleet-history", _c.name, _c.severity, _c.title, frozenset([_c.also] if _c.also else []))
    )
del _c


def finding(
    code: str, subject: str, message: str, evidence: dict[str, Any], severity: Severity | None = None
) -> Finding:
    """A history finding of ``code`` (its own severity unless the code documents ``severity``)."""
    c = CODES[code]
    sev = c.severity if severity is None or severity not in (c.severity, c.also) else severity
    return Finding(c.code, c.name, sev, subject, message, c.fix, evidence)


def explanation_text(code: str) -> str | None:
    """``topodoctor explain`` for a history code (TD950) or its name; None for any other."""
    c = CODES.get(code.upper()) or next((x for x in CODES.values() if x.name == code), None)
    if c is None:
        return None
    also = f" ({c.also} for a finding below the fail level)" if c.also else ""
    return (
        f"### {c.code} {c.name}\n\n**{c.title}.**\n\n**Why it matters:** {c.why}\n\n**How to fix:** {c.fix}\n\n"
        f"- severity: {c.severity}{also}; raised by `topodoctor fleet --history`\n"
    )


def codes_markdown() -> str:
    """Every history code's section, as docs/fleet.md holds them."""
    return "\n".join(explanation_text(c) or "" for c in sorted(CODES))
