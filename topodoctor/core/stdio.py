"""The standard streams as a command finds them: closed, a pipe that may close, a locale that
cannot encode what we print. Made safe once, before anything is forked or printed."""

from __future__ import annotations

import contextlib
import os
import sys

from topodoctor.core import fileio
from topodoctor.core.errors import InputError


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


def read_stdin(
    what: str, max_bytes: int = fileio.DEFAULT_MAX_BYTES, timeout_s: float = fileio.DEFAULT_TIMEOUT_S
) -> bytes:
    """Standard input (``-`` on a command line), bounded like ``read_bytes``: a pipe whose writer never
    closes it costs ``timeout_s``, more than ``max_bytes`` is refused."""

    def read() -> bytes:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            return (sys.stdin.read(max_bytes + 1) if sys.stdin is not None else "").encode("utf-8", "replace")
        data = stream.read(max_bytes + 1)
        return data if isinstance(data, bytes) else str(data).encode("utf-8", "replace")

    data, exc = fileio.within(timeout_s, "read standard input", read)
    if exc is fileio.TIMED_OUT:
        raise InputError(f"{what} on standard input: nothing ended it within {timeout_s:g} s (no pipe or file given?)")
    if exc is not None or data is None:
        raise InputError(f"cannot read {what} from standard input: {type(exc).__name__}")
    if len(data) > max_bytes:
        cap = f"{max_bytes // fileio.MiB} MiB" if max_bytes >= fileio.MiB else f"{max_bytes} B"
        raise InputError(f"{what} on standard input is larger than {cap}")
    return data
