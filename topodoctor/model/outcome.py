"""What every command's service answers, and the one function that turns it into the exit code.

Every service returns one result object that says three things: what it found at or above the
fail level (``failing``), what was asked for and could not be measured or judged
(``not_measured``), and what was given and could not be used (``unusable``). ``exit_code`` is
the only place that maps them to a code, for every command: a fault found is 1 whatever else
happened (a measurement that could not run never hides it), then 3, then 2, then 0. Errors that
stop a command before it has a result carry their own code (core/errors.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_OK, EXIT_UNHEALTHY, EXIT_USAGE
from topodoctor.model.findings import Finding, Severity, failing

if TYPE_CHECKING:
    from topodoctor.model.snapshot import HostSnapshot


class Judgement(Protocol):
    """What an exit code is made of; every service's result has these three."""

    @property
    def failing(self) -> Sequence[object]:
        """What was found at or above the fail level."""
        ...

    @property
    def not_measured(self) -> Sequence[str]:
        """What was asked for and could not be measured or judged, each with why."""
        ...

    @property
    def unusable(self) -> Sequence[str]:
        """What was given (a file, an output path) and could not be used, each with why."""
        ...


def exit_code(judged: Judgement, unwritten: Sequence[str] = ()) -> int:
    """The exit code of every command: 1 when something failed; else 3 when something asked for
    could not be made; else 2 when something given (or a file to write, ``unwritten``) could not
    be used; else 0."""
    if judged.failing:
        return EXIT_UNHEALTHY
    if judged.not_measured:
        return EXIT_CANNOT_CHECK
    if judged.unusable or unwritten:
        return EXIT_USAGE
    return EXIT_OK


class CommandOutcome:
    """What every command's service answers: each ``<Command>Outcome`` derives from it (a frozen
    dataclass of its own fields). By default what fails is ``findings`` at ``fail_level``; an
    outcome whose failures are not findings (a sweep's failed runs, a topology file's problems)
    says what fails itself (``failing``). The exit code is always the one function's. (Annotations
    only: a dataclass would take a default here as its own.)"""

    findings: tuple[Finding, ...]
    fail_level: Severity
    not_measured: tuple[str, ...]
    unusable: tuple[str, ...]

    @property
    def failing(self) -> tuple[Any, ...]:
        """What fails the command: the findings at or above the fail level."""
        return failing(self.findings, self.fail_level)

    @property
    def exit_code(self) -> int:
        """0 fine, 1 something failed, then 3 and 2 (``exit_code``)."""
        return exit_code(self)


@dataclass(frozen=True)
class PlainOutcome(CommandOutcome):
    """A result that is only its judgement: a command with nothing to judge (``scan``), or one
    whose failures are not findings."""

    failing: tuple[object, ...] = ()
    not_measured: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()


DONE = PlainOutcome()  # nothing judged, nothing missing: exit 0 unless a file could not be written


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
class CheckOutcome(CommandOutcome):
    """``check``'s answer: its findings, what it could not check, and what it judged."""

    findings: tuple[Finding, ...]  # worst first
    incomplete: tuple[Finding, ...]  # checks that could not read their input, whatever the selection
    meta: Meta
    fail_level: Severity
    snapshot: HostSnapshot | None = None  # what was judged (metrics label GPUs from it)
    not_measured: tuple[str, ...] = ()  # measurements asked for that did not happen, with why
    fitness: Any = None  # the fitness pass's result (topodoctor.model.fitness_results), where it ran
    # When the check began (UTC, ISO 8601) and the node it judged (None for a replay): the fields
    # every result carries (model/stamp.py); its GPUs and counters are read from ``snapshot`` when
    # the JSON is written.
    measured_at: str | None = None
    node: str | None = None

    @property
    def unusable(self) -> tuple[str, ...]:  # type: ignore[override]
        """An expectations file that could not be used (the host was judged without it)."""
        unused = self.meta.expectations_unused
        return () if unused is None else (unused,)

    @property
    def verdict(self) -> Literal["healthy", "unhealthy", "unknown"]:
        """The exit code in one word, for reports and metrics: unhealthy, unknown (could not check, bad
        input) or healthy."""
        if self.exit_code == EXIT_UNHEALTHY:
            return "unhealthy"
        return "unknown" if self.exit_code in (EXIT_CANNOT_CHECK, EXIT_USAGE) else "healthy"
