"""SIGTERM, SIGHUP and SIGINT as an exception that unwinds the command (``Terminated``).

A prolog's timeout sends SIGTERM at any instruction, an import's included. Python can wrap an
exception raised there into another (a class being created reports ``RuntimeError: Error
calling __set_name__``), so the signal is also remembered: whatever ends the command, a
signal received means "terminated by SIGNAL", exit 128 + N, never a traceback or an internal
error."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

from topodoctor.core.errors import Terminated

STOPPING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
_PR_SET_PDEATHSIG = 1
_received: int | None = None


def _stop(signum: int, frame: Any) -> None:
    global _received
    _received = signum
    raise Terminated(signum)


def install() -> dict[int, Any]:
    """Make the stopping signals raise ``Terminated``; the handlers they had. A signal the caller
    ignores (nohup's SIGHUP, SIGINT for a shell's background job) stays ignored."""
    return {sig: signal.signal(sig, _stop) for sig in STOPPING if signal.getsignal(sig) != signal.SIG_IGN}


def received() -> Terminated | None:
    """The signal that stopped this process, as the exception it raised; None if none came."""
    return None if _received is None else Terminated(_received)


def ignore() -> None:
    """Ignore the stopping signals from now on: the process is ending and says why once."""
    for sig in STOPPING:
        signal.signal(sig, signal.SIG_IGN)


def die_with_parent(parent: int) -> None:
    """In a forked child: the kernel kills it (SIGKILL) when ``parent`` dies, and it ends now if
    its parent has died already. A parent killed outright (a prolog's timeout) leaves nothing."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
