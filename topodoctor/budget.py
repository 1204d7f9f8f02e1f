"""Running work under a hard wall-clock budget, for prolog checks that must never hang.

The work runs in a forked child that sends its JSON answer through a pipe. A thread cannot
be stopped while it sits in a driver call, and a process with such a thread cannot even
exit; a child can be killed and left behind, so the parent always answers on time.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any

from topodoctor.errors import BudgetExceeded, TopodoctorError


def run_with_budget(
    work: Callable[[float], dict[str, Any]], timeout_s: float, meanwhile: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Run ``work(deadline)`` in a child; its JSON-able answer, or BudgetExceeded.

    ``meanwhile`` runs in the parent right after the fork (never before: forking a process
    that has threads is unsafe), e.g. to start imports the parent will need next.
    A TopodoctorError raised in the child is raised again here with its message and kind.
    """
    deadline = time.monotonic() + timeout_s
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        code = 0
        try:
            answer: dict[str, Any] = {"ok": work(deadline)}
        except TopodoctorError as exc:
            answer = {"error": str(exc), "exit_code": exc.exit_code}
        except BaseException as exc:  # the parent reports it; a child must never unwind into the CLI
            tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
            answer = {"error": f"the check crashed: {type(exc).__name__}: {exc} ({tail})", "exit_code": 3}
        try:
            with os.fdopen(write_fd, "w", encoding="utf-8") as pipe:
                pipe.write(json.dumps(answer))
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_fd)
    if meanwhile is not None:
        meanwhile()
    chunks: list[bytes] = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BudgetExceeded(f"could not check: not finished within the {timeout_s:g} s budget (killed)")
            ready, _, _ = select.select([read_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except BaseException:
        _kill(pid)
        raise
    finally:
        os.close(read_fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    if not chunks:
        raise BudgetExceeded("could not check: the check process died without an answer")
    answer = json.loads(b"".join(chunks))
    if "error" in answer:
        err = TopodoctorError(answer["error"])
        err.exit_code = int(answer.get("exit_code", 3))
        raise err
    result: dict[str, Any] = answer["ok"]
    return result


def _kill(pid: int) -> None:
    """Kill the child and reap it if it is gone; never block on one stuck in the kernel."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(20):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.01)
