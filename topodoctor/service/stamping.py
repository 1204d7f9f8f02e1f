"""Where results get their stamp (model/stamp.py): the one place that reads the node's name and
the clock for them. Every command's result is stamped through here as it is made."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from topodoctor.model import stamp as records
from topodoctor.model.stamp import Stamped, stamped, utc_iso

if TYPE_CHECKING:
    from topodoctor.model.snapshot import HostSnapshot

T = TypeVar("T")


def node_name(environ: Mapping[str, str] | None = None, snapshot: HostSnapshot | None = None) -> str:
    """The node as the prolog names it: ``SLURMD_NODENAME`` where Slurm set it (a node name need
    not be a host name), else the host name the probe read, else this host's."""
    env = os.environ if environ is None else environ
    named = records.node_name(env, snapshot.host.hostname if snapshot is not None else None)
    if named:
        return named
    import socket  # only a result without a host (a check that could not run) asks this host's name

    return socket.gethostname() or "localhost"


def stamp(result: T, snapshot: HostSnapshot | None, at_s: float | None = None, live: bool = True) -> T:
    """``result`` with its time (``at_s``, default now), node, GPUs and counters; anything that is
    not a result (a pass's plain answer) is returned as it is. A result judged from a recording
    (``live`` False) names no node: its ``host`` is the recording's, and no node measured it."""
    if not isinstance(result, Stamped):
        return result
    when = time.time() if at_s is None else at_s
    return stamped(result, snapshot, node_name(None, snapshot) if live else None, when)


def stamp_now(live: bool = True) -> dict[str, str]:
    """``measured_at`` (now) and, for the live host, ``node`` of a document without a host: a check
    that could not run."""
    return {"measured_at": utc_iso(time.time()), **({"node": node_name()} if live else {})}
