"""How a child process ended, said in words: a budgeted child that closed its pipe without an
answer is named by its signal or its exit status, so that a crash below Python (a driver
library's, or a bug of ours) is told apart from a child that gave up."""

from __future__ import annotations

import os
import signal
import time

END_WAIT_S = 1.0  # a child that closed its pipe unanswered is ending: how, said if it is known this soon
# A child killed by one of these crashed below Python; the fault handler then shows where.
_CRASHES = ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT")


def how_it_ended(pid: int, wait_s: float) -> str | None:
    """How child ``pid`` ended ("died of SIGSEGV", "exited with status 9"), reaped within
    ``wait_s``; "died" when it was reaped elsewhere, None when it has not ended by then."""
    until = time.monotonic() + wait_s
    while True:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: its status is gone
            return "died"
        if got:
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                name = signal.Signals(sig).name if sig in signal.valid_signals() else f"signal {sig}"
                return f"died of {name}"
            return f"exited with status {os.waitstatus_to_exitcode(status)}"
        if time.monotonic() >= until:
            return None
        time.sleep(0.005)


def hint(how: str) -> str:
    """What to do about a child that ended so: for a crash, how to see where it happened."""
    if how.removeprefix("died of ") in _CRASHES:
        return " (a crash; run again with PYTHONFAULTHANDLER=1 set to see where, and report it)"
    return ""
