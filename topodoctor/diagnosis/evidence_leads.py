"""What the causes of a user's evidence hand the judge: a symptom (a figure short of its expectation),
and for it leads (a candidate cause with its code and the lines that show it), what was ruled out and
which output would decide what the evidence cannot."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.findings import Severity


@dataclass(frozen=True)
class Symptom:
    """A figure the evidence measured against what the hardware should give."""

    kind: Literal["collective", "copy"]
    subject: str  # all_reduce, GPU0-GPU1
    measured_gbps: float
    expected_gbps: float
    basis: str
    size_bytes: int
    nodes: int
    quote: Quote
    ranks: int = 0
    gpus: tuple[int, ...] = ()  # the run's GPUs by nvidia-smi's index (one node), where known


@dataclass(frozen=True)
class Lead:
    """One candidate cause: the code it is reported under, the candidate, and the lines that show it."""

    code: str
    candidate: Candidate
    lines: tuple[Quote, ...] = ()
    subject: str = ""  # where it stands on its own (a log without figures): GPU0-GPU1, host:node2
    severity: Severity | None = None  # one of the code's documented severities other than its own


@dataclass
class Leads:
    """What the causes found for one symptom (or for none: the evidence alone)."""

    leads: list[Lead] = field(default_factory=list)
    ruled_out: list[str] = field(default_factory=list)
    decide: list[str] = field(default_factory=list)  # outputs that would tell the candidates apart

    def add(
        self,
        code: str,
        cand: Candidate,
        lines: tuple[Quote, ...] = (),
        subject: str = "",
        severity: Severity | None = None,
    ) -> None:
        """One more candidate."""
        self.leads.append(Lead(code, cand, lines, subject, severity))

    def rule_out(self, why: str) -> None:
        """Something examined that does not explain the symptom."""
        self.ruled_out.append(why)

    def ask(self, output: str) -> None:
        """An output that would decide."""
        if output not in self.decide:
            self.decide.append(output)
