"""Finding the processes a test started, by a variable put in their environment: a command and the
probe child it forked inherit it, so a test can see that both ran and that neither is left; and
waiting for a child of the test's own to be gone."""

from __future__ import annotations

import os
import time
from pathlib import Path


def gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether ``pid`` has ended within ``within_s``: reaped here if it is this process's child, else
    gone from /proc or a zombie (its parent reaps it). A kill at a command's end is not waited for."""
    end = time.monotonic() + within_s
    while True:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return True
        except ChildProcessError:
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
            except OSError:
                return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.005)


def marked_processes(mark: str) -> list[int]:
    """The pids whose environment holds ``mark``."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            if mark.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found
