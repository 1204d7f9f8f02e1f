"""``nccl-topo --lint`` as the service runs it: an existing NCCL_TOPO_FILE checked against the
probed host as NCCL would read it, in one outcome."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.model.findings import failing
from topodoctor.model.outcome import CommandOutcome
from topodoctor.service.host import ProbedHost
from topodoctor.topology.nccl_topo_lint import TopoProblem, lint_topo_file


@dataclass(frozen=True)
class LintOutcome(CommandOutcome):
    """``nccl-topo --lint``'s answer: what NCCL would get wrong in the file, on this host."""

    problems: tuple[TopoProblem, ...]
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()

    @property
    def failing(self) -> tuple[TopoProblem, ...]:
        """The errors (a warning does not fail the file)."""
        return failing(self.problems, "error")


def lint_nccl_topo(host: ProbedHost, text: str) -> LintOutcome:
    """An existing NCCL_TOPO_FILE's text, checked against the probed host as NCCL would read it."""
    return LintOutcome(tuple(lint_topo_file(text, host.snapshot, host.view.graph)))
