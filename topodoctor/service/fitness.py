"""Fitness inside a check: the pass ``check --level quick|long`` runs in its budgeted child.

The kernel timer starts before the probe (its start-up overlaps it); the result lands in the
rules' context as ``ctx.fitness``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from topodoctor.measure.fitness.session import FitnessPlan, run, start_timer
from topodoctor.model.fitness_results import FITNESS_SCHEMA_VERSION, FitnessResult
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.environment import capture_process
from topodoctor.probe.sources import live_nvml
from topodoctor.service.passes import Pass
from topodoctor.topology.scope import resolve

if TYPE_CHECKING:
    from topodoctor.service.passes import Source


def fitness_pass(level: str, scope: str = "auto") -> Pass:
    """The fitness measurements of ``level`` (quick or long) on the GPUs of ``scope``."""
    plan = FitnessPlan.for_level(level)

    def measure(snap: HostSnapshot, source: Source, deadline: float, worker: Any) -> FitnessResult:

        if not source.live:
            if worker is not None:
                worker.stop()
            return unmeasured(snap, level, "a recorded host: fitness is measured on the live host only")
        where = resolve(snap, capture_process().environ, scope)  # type: ignore[arg-type]
        return run(snap, plan, live_nvml(), deadline, worker, where)

    def start(deadline: float) -> Any:
        return start_timer(plan)

    return Pass("fitness", measure, FitnessResult, start, lambda w: w.stop())


def unmeasured(snap: HostSnapshot, level: str, why: str) -> FitnessResult:
    """A result that measured nothing, and says why (the rules report could-not-check)."""
    return FitnessResult(
        "fitness", FITNESS_SCHEMA_VERSION, snap.host.hostname, level, "", (), (), (), (), (), 0.0, (why,)
    )
