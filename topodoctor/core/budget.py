"""Running work under a hard wall-clock budget, for prolog checks that must never hang.

The work runs in a forked child that sends its JSON answer through a pipe. A thread cannot
be stopped while it sits in a driver call, and a process with such a thread cannot even
exit; a child can be killed and left behind, so the parent always answers on time.

The child leads its own process group, so killing the group takes whatever it started (the
copy timer's torch process) with it; it also asks the kernel to kill it when the parent dies,
so a parent killed outright (SIGKILL from a prolog timeout) leaves nothing running.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from topodoctor.core import answers, ending
from topodoctor.core.answers import send_part as send_part  # re-exported: a budgeted child's first word
from topodoctor.core.errors import BudgetExceeded, InputError, TopodoctorError, error_class
from topodoctor.core.signals import die_with_parent

# Longer than any job lives: "no limit" without infinite arithmetic in select() or deadlines.
FOREVER_S = 1e7
# How long the parent waits for a killed child to be reaped. A child stuck in the kernel
# (an uninterruptible driver call) dies only when the call returns; we do not wait for that.
REAP_WAIT_S = 0.1
_HELD = {signal.SIGALRM, signal.SIGTERM, signal.SIGHUP, signal.SIGINT}


def parse_timeout(value: float) -> float:
    """A --timeout value: seconds > 0, 0 (no budget), or inf (no limit, still killable)."""
    if math.isnan(value):
        raise InputError("--timeout must be a number of seconds, not nan")
    if value < 0:
        raise InputError(f"--timeout must be 0 (no budget) or positive, not {value:g}")
    return min(value, FOREVER_S)


def process_age_s() -> float:
    """Seconds since this process was started (the interpreter's start-up included).

    The budget a prolog gives is wall time from exec; counting it from when our code first
    runs would overrun it by the import time. Linux only; 0 where unknown.
    """
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in ticks since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return age if 0.0 <= age < 60.0 else 0.0


_command_start: float | None = None


def mark_command_start() -> None:
    """Count budgets from this process's exec (the console entry point calls this): a prolog's
    timeout covers the interpreter's start-up and our imports too. In-process callers (tests,
    a library user) leave it unset and count from when the budget is made."""
    global _command_start
    _command_start = time.monotonic() - process_age_s()


def command_start() -> float | None:
    """When the command was exec'd, on the monotonic clock (``mark_command_start``); None where
    the console entry point did not mark it (tests, a library user). Forked children share it."""
    return _command_start


_forked_at: float | None = None


def forked_at() -> float | None:
    """In a budgeted child (``fork_work``): when it was forked, on the monotonic clock; else None."""
    return _forked_at


@dataclass(frozen=True)
class Budget:
    """A deadline on the monotonic clock; ``None`` timeout means no budget at all."""

    timeout_s: float | None
    deadline: float

    @staticmethod
    def start(timeout_s: float) -> Budget:
        """``timeout_s`` from the start of the command (see ``mark_command_start``); 0: no budget."""
        if timeout_s <= 0:
            return Budget(None, time.monotonic() + FOREVER_S)
        origin = _command_start if _command_start is not None else time.monotonic()
        return Budget(timeout_s, origin + min(timeout_s, FOREVER_S))

    @property
    def limited(self) -> bool:
        """Whether there is a deadline at all (``--timeout 0`` sets none)."""
        return self.timeout_s is not None

    def left(self) -> float:
        """Seconds left before the deadline, never negative."""
        return max(0.0, self.deadline - time.monotonic())

    def exceeded(self, what: str = "") -> BudgetExceeded:
        """The error to raise when the budget ran out; ``what`` ends its message (`` (killed)``)."""
        shown = f"{self.timeout_s:g}" if self.timeout_s is not None else "?"
        return BudgetExceeded(f"could not check: not finished within the {shown} s budget{what}")

    def spent_at_start(self) -> BudgetExceeded:
        """The budget ran out before any work began: it is shorter than starting the
        interpreter and loading topodoctor takes here, and no budget below that can be kept."""
        if _command_start is None:
            return self.exceeded()
        took = time.monotonic() - _command_start
        return BudgetExceeded(
            f"could not check: the {self.timeout_s:g} s budget was spent before the check could start "
            f"(start-up took {took:.2f} s here; the floor is in docs/prolog.md)"
        )

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Raise BudgetExceeded in this thread if the block runs past the deadline.

        For Python work in the parent (imports, decoding, rules, waiting on the child): an
        interval timer interrupts it between bytecodes. Nested guards share the outermost
        timer. Only the main thread can take signals; elsewhere this is a no-op.
        """
        global _guarding
        if not self.limited or _guarding or not _main_thread():
            yield
            return

        def expire(signum: int, frame: Any) -> None:
            raise self.exceeded(" (killed)")

        left = self.left()
        if left <= 0:
            raise self.spent_at_start()
        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, left)
        _guarding = True
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            _guarding = False


_guarding = False


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


_forked_from: int | None = None  # in a budgeted child: the command that forked it


def command_pid() -> int:
    """The topodoctor command this process works for: the parent that forked it as a budgeted
    child, else this process. Its other children (a copy timer started early) are topodoctor's."""
    return _forked_from if _forked_from is not None else os.getpid()


def _become_group_leader_child(parent: int, quiet: bool) -> None:
    """In the child: own process group, die with the parent, default signal handling."""
    global _forked_from
    _forked_from = parent
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    die_with_parent(parent)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    if not quiet:
        return
    # The answer goes through the pipe; a library's stray print must not reach the user's
    # terminal or break a one-line drain reason.
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


@dataclass(frozen=True)
class Child:
    """A forked child doing budgeted work: its pid (and process group) and the read end of the
    pipe its JSON answer comes through."""

    pid: int
    answers: int


def fork_work(work: Callable[[float], dict[str, Any]], deadline: float, quiet: bool = True) -> Child:
    """Fork a child that runs ``work(deadline)`` and sends its JSON-able answer (or its error)
    through a pipe; ``await_child`` collects it, ``cancel`` kills it.

    ``quiet`` sends the child's stdout and stderr to /dev/null.
    """
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
        with contextlib.suppress(Exception):
            stream.flush()
    read_fd, write_fd = os.pipe()
    # No signal handler (the budget's alarm, SIGTERM) may run inside fork() and its at-fork
    # hooks, or between the fork and the child's set-up: they are held until the parent knows
    # the child and can kill it, and the child drops them for its own defaults.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    pid = os.fork()
    if pid == 0:  # child
        global _forked_at
        _forked_at = time.monotonic()
        os.close(read_fd)
        code = 0
        answers.opened(write_fd)
        try:
            _become_group_leader_child(parent, quiet)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            answer: dict[str, Any] = {"ok": work(deadline)}
        except TopodoctorError as exc:
            answer = {"error": str(exc), "exit_code": exc.exit_code, "kind": type(exc).__name__}
        except BaseException as exc:  # the parent reports it; a child must never unwind into the CLI
            import traceback  # only here: it costs a few ms of every command's start-up

            tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
            answer = {"error": f"internal error: {type(exc).__name__}: {exc} ({tail})", "exit_code": 3}
        try:
            answers.write_line(write_fd, answer)
            os.close(write_fd)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_fd)
    _reap_exited()
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also here: no window where a kill of the group misses the child
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a held signal is raised here, the child known
    except BaseException:
        cancel(Child(pid, read_fd))
        raise
    return Child(pid, read_fd)


def cancel(child: Child) -> None:
    """Kill a child whose answer is no longer wanted, and its process group."""
    with contextlib.suppress(OSError):
        os.close(child.answers)
    kill_group(child.pid)


def await_child(child: Child, budget: Budget, meanwhile: Callable[[], None] | None = None) -> dict[str, Any]:
    """The child's answer by the budget's deadline, or BudgetExceeded (the child killed).

    ``meanwhile`` is the parent's own work, done before waiting. A TopodoctorError raised in
    the child is raised again here with its message and kind.
    """
    chunks: list[bytes] = []
    try:
        return _final(chunks, child, budget, meanwhile)
    except TopodoctorError as exc:
        exc.part = answers.lines(chunks, strict=False)[0]  # what the child sent before it failed, if anything
        raise


def _final(chunks: list[bytes], child: Child, budget: Budget, meanwhile: Callable[[], None] | None) -> dict[str, Any]:
    deadline = budget.deadline
    try:
        if meanwhile is not None:
            meanwhile()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise budget.exceeded(" (killed)")
            ready, _, _ = select.select([child.answers], [], [], left)
            if not ready:
                continue
            chunk = os.read(child.answers, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except BaseException:
        kill_group(child.pid)
        raise
    finally:
        os.close(child.answers)
    answer = answers.lines(chunks)[1]
    if answer is None:
        how = ending.how_it_ended(child.pid, min(ending.END_WAIT_S, max(deadline - time.monotonic(), 0.0)))
        if how is None:
            _exiting.append(child.pid)  # not gone yet: end_children ends it
        said = how or "died"
        raise BudgetExceeded(f"could not check: the check process {said} without an answer{ending.hint(said)}")
    _reap_or_defer(child.pid)
    if "error" in answer:
        err = error_class(str(answer.get("kind", "")))(answer["error"])
        err.exit_code = int(answer.get("exit_code", 3))
        raise err
    result: dict[str, Any] = answer["ok"]
    return result


def run_with_budget(
    work: Callable[[float], dict[str, Any]],
    budget: Budget | float,
    meanwhile: Callable[[], None] | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Run ``work(deadline)`` in a child; its JSON-able answer, or BudgetExceeded.

    ``meanwhile`` runs in the parent right after the fork (never before: forking a process
    that has threads is unsafe), e.g. to start imports the parent will need next.
    ``quiet`` sends the child's stdout and stderr to /dev/null.
    """
    if not isinstance(budget, Budget):
        budget = Budget.start(budget)
    return await_child(fork_work(work, budget.deadline, quiet), budget, meanwhile)


def kill_group(pid: int) -> None:
    """Kill the child and its process group, and reap it if it dies at once."""
    _kill(pid)
    _reap(pid)


def _kill(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _reap(pid: int) -> bool:
    """Collect a killed child's exit status, waiting REAP_WAIT_S at most."""
    end = time.monotonic() + REAP_WAIT_S
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.002)


# Children that answered and were still exiting (a probe's child closing the driver takes
# milliseconds): reaped at the command's end, after its output, not before it.
_exiting: list[int] = []


def reap_later(pid: int) -> None:
    """A child of this process that will end by itself (an NVML server whose client is done):
    reaped, or killed if still running, at the command's end (``end_children``)."""
    _exiting.append(pid)


def _reap_or_defer(pid: int) -> None:
    """Reap a child that has answered if it is gone; else leave it for ``end_children``."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == 0:
            _exiting.append(pid)


def _reap_exited() -> None:
    """Reap the answered children that have exited since (no zombie outlives the next fork)."""
    for pid in list(_exiting):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        _exiting.remove(pid)


def end_children() -> None:
    """At the command's end, its output written: every child that answered is reaped, and one
    still not gone is killed with its process group, so nothing we started outlives us. The
    kill is not waited for (the kernel ends a killed process; the command exits next, and the
    next fork or call here reaps it)."""
    _reap_exited()
    for pid in _exiting:
        _kill(pid)
