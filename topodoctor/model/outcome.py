"""A command's outcome: findings, what was judged, and the one exit code, as the renderers read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_UNHEALTHY, EXIT_USAGE
from topodoctor.model.findings import Finding, Severity, failing

if TYPE_CHECKING:
    from topodoctor.model.snapshot import HostSnapshot


@dataclass(frozen=True)
class Meta:
    """What a command judged and how: where the host came from, which GPUs, what was measured."""

    origin: str
    host: str
    gpus: int
    elapsed_s: float
    measured: tuple[str, ...]  # names of the passes that ran
    scope: str = ""  # which GPUs were judged, and why
    scope_gpus: tuple[int, ...] = ()
    findings_outside_scope: int = 0  # findings about GPUs of other jobs, left out
    bandwidth_timings: dict[str, float] | None = None  # where the copy pass spent its time, by phase
    scope_kind: str = "node"  # "node" or "job"
    expectations_unused: str | None = None  # why a --expect file could not be used (judged without it)
    slurm_job: str | None = None  # the Slurm job the check ran for (SLURM_JOB_ID), if any
    scope_label: str = "node"  # whose check it was, for the metrics: "job" (a job's, whatever it judged) or "node"


@dataclass(frozen=True)
class Outcome:
    """A command's answer: its findings, what it could not check, and the exit code decided once."""

    findings: tuple[Finding, ...]  # worst first
    incomplete: tuple[Finding, ...]  # checks that could not read their input, whatever the selection
    meta: Meta
    fail_level: Severity
    exit_code: int
    snapshot: HostSnapshot | None = None  # what was judged (metrics label GPUs from it)
    not_measured: tuple[str, ...] = ()  # measurements asked for that did not happen, with why
    fitness: Any = None  # the fitness pass's result (topodoctor.model.fitness_results), where it ran
    # When the check began (UTC, ISO 8601) and the node it judged (None for a replay): the fields
    # every result carries (model/stamp.py); its GPUs and counters are read from ``snapshot`` when
    # the JSON is written.
    measured_at: str | None = None
    node: str | None = None

    @property
    def failing(self) -> tuple[Finding, ...]:
        """The findings at or above the fail level: the ones that made the check unhealthy."""
        return failing(self.findings, self.fail_level)

    @property
    def verdict(self) -> Literal["healthy", "unhealthy", "unknown"]:
        """The exit code in one word, for reports and metrics: unhealthy, unknown (could not check, bad
        input) or healthy."""
        if self.exit_code == EXIT_UNHEALTHY:
            return "unhealthy"
        return "unknown" if self.exit_code in (EXIT_CANNOT_CHECK, EXIT_USAGE) else "healthy"
