"""The standard streams as a command finds them: closed, a pipe that may close, a locale that
cannot encode what we print. Made safe once, before anything is forked or printed."""

from __future__ import annotations

import contextlib
import os
import sys


def prepare_stdio() -> None:
    """Make the standard streams safe to use whatever state the caller left them in.

    A closed descriptor 0-2 is reopened on /dev/null (or the probe's pipe could land on
    fd 1 and our output in the pipe); text that the locale cannot encode (``±`` on an ASCII
    terminal, a lone surrogate) is written as backslash escapes instead of raising.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115  (lives as long as the process)
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
