"""The probe's child as the console entry point forks it, before the command line is parsed: a
``check`` or ``scan`` whose host the entry point read by its options spec has its probe started
first of all, and the command adopts it (``take``) when it asks for the same host, or kills it
(``drop``). Light on purpose: loaded before the fork, it loads nothing the child's work needs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from topodoctor.core.budget import FOREVER_S, Child, cancel, fork_work
from topodoctor.service.passes import Pass, Source


def child_work(source: Source, passes: Sequence[Pass] = ()) -> Callable[[float], dict[str, Any]]:
    """What a probe's child does by its deadline (service/gather.py ``work``), loaded in the child."""

    def work(deadline: float) -> dict[str, Any]:
        # The driver's first answers begin before the child's imports, beside them; where a pass
        # follows, its timer's CUDA start comes first (service/copies.py ``wait_started``).
        if source.live and not passes:
            from topodoctor.probe.warm_up import begin  # the child's entry: loaded after the fork

            begin()
        from topodoctor.service.gather import work as gathered  # the child's entry, as above

        return gathered(source, passes, deadline)

    return work


_early: tuple[Source, Child] | None = None


def start(source: Source | None) -> None:
    """Fork the probe of ``source`` now; None starts nothing."""
    global _early
    if source is not None:
        _early = (source, fork_work(child_work(source), FOREVER_S))


def take(source: Source) -> Child | None:
    """The early probe's child if it probes ``source``, else None (and it is killed)."""
    global _early
    if _early is not None and _early[0] == source:
        child, _early = _early[1], None
        return child
    drop()
    return None


def drop() -> None:
    """Kill an early probe nobody adopted (a usage error, a help request, another command)."""
    global _early
    started, _early = _early, None
    if started is not None:
        cancel(started[1])
