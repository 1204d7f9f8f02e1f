"""``record`` as the service runs it: the live host recorded under the budget, and the recordings
topodoctor ships (``--replay NAME``)."""

from __future__ import annotations

from typing import Any

from topodoctor.core.budget import Budget, run_with_budget
from topodoctor.probe.replay import bundled_names
from topodoctor.probe.sources import record_host


def record(label: str, scrub: bool, sysfs_root: str, budget: Budget) -> tuple[dict[str, Any], int]:
    """Record the live host under the budget; (recording document, GPU count)."""

    def work(deadline: float) -> dict[str, Any]:
        doc, snap = record_host(label, do_scrub=scrub, sysfs_root=sysfs_root)
        return {"doc": doc, "gpus": len(snap.gpus)}

    data = work(budget.deadline) if not budget.limited else run_with_budget(work, budget)
    return data["doc"], int(data["gpus"])


def bundled_recordings() -> list[str]:
    """The names of the recordings shipped with topodoctor (``--replay NAME``)."""
    return bundled_names()
