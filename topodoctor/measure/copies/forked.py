"""The copy timer forked from the bare console entry point, instead of a fresh interpreter.

A new interpreter costs the timer its whole start-up before CUDA can begin (0.27 s on the 2 x H100
host: the interpreter, the site's hooks, topodoctor's first modules). The entry point of a
``bandwidth`` command line, before it loads anything heavy, has no threads, little memory and
nothing of CUDA: a fork of it is cheap and safe. The child then loads the timer's modules itself;
where its first task (given at the fork) opens every GPU, it starts the driver (``cuInit``) in a
thread first, so the driver's own start runs beside those imports.

The child keeps only its three pipes (stdin, stdout, stderr, as a spawned timer has them), dies
with its parent (``die_with_parent``) and takes the signals' default actions, as a fresh
interpreter does: Ctrl-C and SIGTERM end it with the command, and the command kills it at its end
in any case (core/budget.py ``end_children``). ``TimerProcess`` is the parent's handle on it, with
the part of ``subprocess.Popen``'s surface the copy timer's driver uses (measure/copies/worker.py).

Only the standard library's lightest modules load here before the fork: what loads before it is
on the timer's path to the driver.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import IO, Any

# The environment every copy timer runs with (a spawned one gets it from Worker.spawn).
TIMER_ENV = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTHONUNBUFFERED": "1"}


class TimerProcess:
    """A forked timer as its parent holds it: its pid, the three pipes, and ``poll``, ``wait``,
    ``kill`` as ``subprocess.Popen`` has them. A process that is not its parent (the probe's child,
    which inherits it) cannot wait for it: there ``poll`` and ``wait`` say it ended, as Popen does."""

    def __init__(self, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.stdin: IO[str] | None = os.fdopen(stdin, "w", encoding="utf-8")
        self.stdout: IO[str] | None = os.fdopen(stdout, encoding="utf-8")
        self.stderr: IO[str] | None = os.fdopen(stderr, encoding="utf-8")
        self.returncode: int | None = None
        self.forked_at = time.monotonic()

    def poll(self) -> int | None:
        """Its exit status if it has ended (reaped now), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # not ours to reap, or reaped elsewhere
                self.returncode = 0
                return 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for it to end, ``timeout`` seconds at most (None: as long as it takes); its exit
        status, or None if it still runs."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                return None
            time.sleep(0.002)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL it (nothing if it is gone)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)


def fork_timer(first: dict[str, Any] | None) -> TimerProcess:
    """Fork the copy timer now; ``first`` is the hello it runs before reading its stdin (None: it
    waits for one there). Call it before any thread starts in this process; OSError if the
    system refuses the pipes or the fork."""
    for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
        with contextlib.suppress(Exception):
            stream.flush()
    pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr: (read, write) each
    parent = os.getpid()
    # A signal handled inside fork() or before the child's set-up would run our handler there:
    # held until each side has set itself up.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        for fd in (fd for pair in pipes for fd in pair):
            os.close(fd)
        raise
    if pid == 0:
        _child(parent, pipes[0][0], pipes[1][1], pipes[2][1], held, first)
    for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
        os.close(fd)
    proc = TimerProcess(pid, pipes[0][1], pipes[1][0], pipes[2][0])
    signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return proc


def warms_driver(first: dict[str, Any] | None) -> bool:
    """Whether a child given ``first`` starts the driver before its imports: only for a hello that
    opens every GPU (one naming GPUs must set CUDA_VISIBLE_DEVICES before the driver starts)."""
    return first is not None and first.get("op") == "hello" and first.get("visible") is None


def _signals_as_at_exec() -> None:
    """The signals as a fresh interpreter started here would take them: what the command's caller
    ignores stays ignored (SIGINT in a shell's background job, nohup's SIGHUP), SIGINT otherwise
    raises KeyboardInterrupt, and any handler of the command's own is dropped for the default."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            continue
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)


def _child(parent: int, stdin: int, stdout: int, stderr: int, held: Any, first: dict[str, Any] | None) -> None:
    """The forked timer's life; never returns."""
    code = 1
    try:
        for fd, std in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, std)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the parent's other pipes, our own originals
        os.environ.update(TIMER_ENV)
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)  # the hello says which GPUs (protocol.see_only)
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off in what we start
        _signals_as_at_exec()
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115  (the process's own streams)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        began = time.monotonic()
        from topodoctor.core.signals import die_with_parent  # the child's entry: loaded after the fork

        die_with_parent(parent)
        if warms_driver(first):
            from topodoctor.measure.timer import driver  # the child's entry, as above

            driver.start_in_thread()
        from topodoctor.measure.timer import plans  # the child's entry, as above

        plans.serve_forked(first, began)
        code = 0
    except BaseException as exc:  # the parent reads the last line of stderr when the timer dies
        with contextlib.suppress(Exception):
            sys.stderr.write(f"copy timer: {type(exc).__name__}: {exc}\n")
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
