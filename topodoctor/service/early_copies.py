"""The copy timer of a ``bandwidth`` command line, forked by the console entry point before
anything else loads (cli/start.py).

CUDA's start in the timer (the driver, a context per GPU, peer access, the kernels' JIT) takes
half a second on the GPU hosts, and a fresh interpreter for the timer a quarter more. Forked from
the bare entry point (measure/copies/forked.py) and given at once a hello that opens every GPU
where nothing narrows them (no job variable names GPUs, no ``--devices``), it starts the driver
while the command is still loading, and runs beside the command's start-up and the probe. The
probe's child, forked later, inherits it and adopts it (``adopt``, service/copies.py): it asks the
timer there to make the pass's buffers ahead (``prepare``), then lets it go when the pass is done;
the command kills and reaps whatever is left at its end (core/budget.py ``end_children``), and the
timer dies with the command in any case. Only a command line read for sure starts it: a saved
result (``--from``), a replay, a help request, ``--timeout 0`` (no child at all) or an option read
otherwise start nothing (service/request_bandwidth.py ``BandwidthRequest.early_timer``, from the options' spec),
and the pass spawns its timer as before.

Before the fork this module loads only what the entry point has loaded already: what loads before
it is on the timer's path to the driver.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from topodoctor.core.budget import reap_later
from topodoctor.measure.copies.forked import fork_timer
from topodoctor.measure.copies.hello import hello_extra, hello_task

if TYPE_CHECKING:
    from topodoctor.measure.copies.worker import Worker

SCOPE_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")  # topology/scope.py SOURCES
_HOST_ONLY = {"host", "h2d", "d2h"}
_early: Worker | None = None
_handed: list[Any] = []


def start_early_timer(modes: Sequence[str]) -> None:
    """Fork the copy timer for a ``bandwidth`` of ``modes`` (empty: the default ones) now, given its
    hello where nothing narrows the GPUs (the entry point reads which command lines may:
    service/request_bandwidth.py ``BandwidthRequest.early_timer``)."""
    global _early
    if _early is not None:
        return
    # The timer's modules load in the child, after the fork (the entry point's head start).

    peers = not modes or any(m not in _HOST_ONLY for m in modes)
    unscoped = not any(name in os.environ for name in SCOPE_VARIABLES)
    hello = hello_task(None, peers, hello_extra()) if unscoped else None
    try:
        proc = fork_timer(hello)
    except OSError:
        return  # the pass spawns its own and says why it cannot
    from topodoctor.measure.copies.worker import (  # after the fork: off its path
        START_TIMEOUT_S,
        Worker,
        default_worker_cmd,
    )

    reap_later(proc.pid)  # killed and reaped at the command's end, whatever happens before
    worker = Worker(default_worker_cmd(), START_TIMEOUT_S, extra=hello_extra())
    worker.peers = peers
    worker.took(proc, hello, proc.forked_at)
    _early = worker


def adopt() -> Worker | None:
    """The timer started early, in the probe's child that inherited it; None if none was."""
    global _early
    worker, _early = _early, None
    return worker


def hand_over() -> None:
    """In the command, once its probe's child has run: let go of the timer (that child adopted
    it); ``end_children`` still kills and reaps it at the command's end."""
    global _early
    worker, _early = _early, None
    if worker is not None and worker.proc is not None:
        _handed.append(worker.proc)  # held: a process object collected while it runs may complain
        for pipe in (worker.proc.stdin, worker.proc.stdout, worker.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
