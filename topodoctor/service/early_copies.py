"""The copy timer of a ``bandwidth`` command line, forked by the console entry point before
anything else loads (cli/__init__.py).

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
otherwise start nothing, and the pass spawns its timer as before.

Before the fork this module loads only what the entry point has loaded already: what loads before
it is on the timer's path to the driver.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topodoctor.measure.copies.worker import Worker

# The options of `bandwidth` that change neither which GPUs nor how CUDA starts; any other one
# (--devices, --sm-kernel, --from, --replay, --help) means no early start.
_VALUE_OPTIONS = {"--mode", "-m", "--size", "--iters", "--samples", "--pair-timeout", "--output", "-o"}
_VALUE_OPTIONS |= {"--heatmap", "--format", "-f", "--metrics", "--fail-level", "--timeout"}
_FLAGS = {"--matrix", "--no-matrix", "--quick", "--strict"}
SCOPE_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")  # topology/scope.py SOURCES
_HOST_ONLY = {"host", "h2d", "d2h"}
_early: Worker | None = None
_handed: list[Any] = []


def read_modes(args: list[str]) -> list[str] | None:
    """The ``--mode`` values of ``bandwidth``'s arguments (empty: the default modes), or None when the
    command line holds anything that rules out an early start."""
    modes: list[str] = []
    words = iter(args)
    for word in words:
        name, attached, value = word.partition("=")
        if name in _FLAGS and not attached:
            continue
        if name not in _VALUE_OPTIONS:
            return None
        if not attached:
            following = next(words, None)
            if following is None:
                return None
            value = following
        if name == "--timeout" and value.strip() in ("0", "0.0", "0s"):
            return None  # no budget: nothing runs in a child, as --timeout 0 promises
        if name in ("--mode", "-m"):
            modes.append(value)
    return modes


def start_early_timer(args: list[str]) -> None:
    """Fork the copy timer for ``bandwidth ARGS`` now, given its hello where nothing narrows the
    GPUs; nothing for a command line that may do anything else."""
    global _early
    modes = read_modes(args)
    if modes is None or _early is not None:
        return
    # The timer's modules load in the child, after the fork (the entry point's head start).
    from topodoctor.measure.copies.forked import fork_timer
    from topodoctor.measure.copies.hello import hello_extra, hello_task

    peers = not modes or any(m not in _HOST_ONLY for m in modes)
    unscoped = not any(name in os.environ for name in SCOPE_VARIABLES)
    hello = hello_task(None, peers, hello_extra()) if unscoped else None
    try:
        proc = fork_timer(hello)
    except OSError:
        return  # the pass spawns its own and says why it cannot
    from topodoctor.core.budget import reap_later
    from topodoctor.measure.copies.worker import START_TIMEOUT_S, Worker, default_worker_cmd

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
