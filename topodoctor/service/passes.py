"""What every command's service starts from: where the host comes from, and the measurements that
run after the probe in its budgeted child."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Source:
    """Where the host comes from: the live host (``replay`` None) or a recording / snapshot, and
    whether its topology alone is read (a picture of it), or every reading the rules judge."""

    replay: str | None = None
    sysfs_root: str = "/"
    topology_only: bool = False

    @property
    def live(self) -> bool:
        """Whether the live host is probed (no recording or snapshot named)."""
        return self.replay is None


@dataclass(frozen=True)
class Pass:
    """A measurement run after the probe, in the budgeted child (copies, collectives...).

    ``run(snapshot, source, deadline, started)`` (and ``interim=`` where ``interim`` says so)
    returns a plain dataclass of type ``result``;
    it travels to the parent as JSON and lands in the rules' Context, in the
    field of its name (``Context.bandwidth``, ``Context.fitness``, ``Context.collectives``). ``start(deadline)``
    (optional) runs before the probe, so a worker's start-up overlaps it; what it returns is
    ``started``, and ``stop(started)`` releases it when the probe fails. ``missed(result)``
    (optional) says why the measurement did not happen, or None when it did: a check the user
    asked for that did not happen can never end as a pass.
    """

    name: str
    run: Callable[..., Any]
    result: type
    start: Callable[[float], Any] | None = None
    stop: Callable[[Any], None] | None = None
    missed: Callable[[Any], str | None] | None = None
    # ``run`` also takes ``interim=``: a callable it hands its result to once measured, before the
    # last readings that could take the child down; the parent judges that result if they do.
    interim: bool = False
