"""The copy timer's process as its parent drives it: spawned early, told its GPUs by a hello,
asked one task at a time under a timeout, killed when it hangs, let go when the pass is done.

A hello may be sent as soon as the child is spawned (``hello_now``), before the probe has said
which GPUs the pass measures: when nothing narrows the scope (no job variable, no ``--devices``)
CUDA may start on every GPU at once, and its start (the driver, a context per GPU, peer access:
half a second on the GPU hosts) then runs beside the probe instead of after it. ``start`` keeps
that hello when the GPUs it named are the ones wanted, and starts the child again otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from topodoctor.core.errors import BandwidthUnavailable
from topodoctor.measure.copies.forked import TIMER_ENV
from topodoctor.measure.copies.hello import hello_extra, hello_task
from topodoctor.measure.timer.protocol import PARENT_ENV

__all__ = [
    "PARENT_ENV",
    "START_TIMEOUT_S",
    "TimerProc",
    "Worker",
    "default_worker_cmd",
    "hello_extra",
    "torch_worker_cmd",
]

START_TIMEOUT_S = 90.0  # a timer's start: the driver, every context, peer access, the kernels' JIT


class TimerProc(Protocol):
    """The timer's process as the worker drives it: a spawned ``subprocess.Popen`` or a forked
    ``forked.TimerProcess``."""

    pid: int
    returncode: int | Any
    stdin: IO[str] | None
    stdout: IO[str] | None
    stderr: IO[str] | None

    def poll(self) -> int | None:
        """Its exit status if it has ended, else None."""

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for it to end (``timeout`` seconds at most where the process can say so)."""

    def kill(self) -> None:
        """SIGKILL it."""


_released: list[TimerProc] = []  # killed, not yet reaped: held so that none is collected running


@dataclass
class Worker:
    """The copy timer's process. ``spawn`` starts it (it imports what it needs and waits);
    ``start`` tells it which GPUs it may see and waits until their contexts are open."""

    cmd: list[str]
    start_timeout_s: float
    proc: TimerProc | None = None
    hello: dict[str, Any] = field(default_factory=dict)
    visible: str | None = None  # CUDA_VISIBLE_DEVICES for the child; None = every GPU
    peers: bool = True
    extra: dict[str, Any] = field(default_factory=dict)  # more of the hello: the kernels, their shape
    spawned_at: float = 0.0
    hello_sent_at: float = 0.0
    restarts: int = 0
    fallback: list[str] | None = None  # a second timer to try when this one cannot start
    sent: dict[str, Any] | None = None  # the hello already on its way (``hello_now``), not yet answered
    ready_at: float = 0.0  # when the hello's answer came
    preparing: bool = False  # a ``prepare`` sent after the hello, its answer not read yet
    prepared: dict[str, Any] = field(default_factory=dict)  # its answer
    _lines: list[str] = field(default_factory=list, init=False, repr=False)  # read from the child, not yet taken
    _partial: bytes = field(default=b"", init=False, repr=False)  # the start of a line not yet complete

    def __post_init__(self) -> None:
        if self.fallback is None and self.cmd == default_worker_cmd():
            self.fallback = torch_worker_cmd()

    def spawn(self) -> None:
        """Start the child without waiting: its start-up overlaps the probe."""
        if self.proc is not None:
            return
        env = dict(os.environ, **TIMER_ENV)
        env[PARENT_ENV] = str(os.getpid())
        # The child sets its own CUDA_VISIBLE_DEVICES once told its GPUs; until then it
        # must not inherit one that could mean other GPUs.
        env.pop("CUDA_VISIBLE_DEVICES", None)
        # NVLink multicast stays off in anything we start (it can take shared GPUs down).
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        self.spawned_at = time.monotonic()
        try:
            self._new_child(
                subprocess.Popen(
                    self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
                )
            )
        except OSError as exc:
            raise BandwidthUnavailable(f"cannot start the copy timer: {exc}") from None

    def took(self, proc: TimerProc, hello: dict[str, Any] | None, forked_at: float) -> None:
        """Drive a timer forked for it at ``forked_at`` (measure/copies/forked.py), which was given
        ``hello`` at the fork (None: it waits for one)."""
        self._new_child(proc)
        self.spawned_at = self.hello_sent_at = forked_at
        self.sent = hello

    def _hello_task(self) -> dict[str, Any]:
        return hello_task(self.visible, self.peers, self.extra)

    def hello_now(self) -> None:
        """Send the hello now, for the GPUs ``visible`` names, without waiting for its answer."""
        self.spawn()
        assert self.proc is not None and self.proc.stdin is not None
        self.sent = self._hello_task()
        self.hello_sent_at = time.monotonic()
        try:
            self.proc.stdin.write(json.dumps(self.sent) + "\n")
            self.proc.stdin.flush()
        except OSError:
            self.sent = None  # the child is gone: ``start`` finds out and says why

    def prepare_now(self, task: dict[str, Any]) -> None:
        """Send ``prepare`` (the pass's buffers, made ahead) behind a hello already on its way,
        without waiting; ``start`` reads its answer after the hello's. Nothing where no hello is
        on its way: the buffers are then made by the tasks."""
        if self.sent is None or self.proc is None or self.proc.stdin is None or self.preparing:
            return
        try:
            self.proc.stdin.write(json.dumps(dict(task, op="prepare")) + "\n")
            self.proc.stdin.flush()
        except OSError:
            return  # the child is gone: ``start`` finds out and says why
        self.preparing = True

    def start(self) -> None:
        """Start the process (again, after a hang) and wait for its hello; where the driver-API timer
        cannot start, try the torch timer before giving up."""
        if self.hello:
            self.restarts += 1
        if self.sent is not None and self.sent != self._hello_task():
            self.stop()  # the early hello named other GPUs than the pass measures
        self.spawn()
        try:
            answer = self._hello()
        except BandwidthUnavailable as first:
            if not self.fallback:
                raise
            # The driver-API timer needs libcuda's stream memory operations; torch's timer
            # needs only the runtime. Try it before giving up, and report the first reason.
            self.stop()
            self.cmd, self.fallback = self.fallback, None
            self.spawn()
            try:
                answer = self._hello()
            except BandwidthUnavailable as second:
                raise BandwidthUnavailable(f"{first} (torch timer: {second})") from None
        self.hello = answer
        self.ready_at = time.monotonic()
        if self.preparing:
            self.preparing = False
            left = self.start_timeout_s - (time.monotonic() - self.hello_sent_at)
            done = self.answer(max(left, 0.1))
            if done is None:
                raise BandwidthUnavailable(f"the copy timer did not start within {self.start_timeout_s:.0f} s")
            self.prepared = done  # an error here is the tasks' to meet again and report

    def _hello(self) -> dict[str, Any]:
        if self.sent is not None:
            self.sent = None
            left = self.start_timeout_s - (time.monotonic() - self.hello_sent_at)
            answer = self.answer(max(left, 0.1))
        else:
            self.hello_sent_at = time.monotonic()
            answer = self.ask(self._hello_task(), self.start_timeout_s)
        if answer is None:
            raise BandwidthUnavailable(f"the copy timer did not start within {self.start_timeout_s:.0f} s")
        if "error" in answer:
            self.stop()
            raise BandwidthUnavailable(str(answer["error"]))
        return answer

    def ask(self, task: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send one task; the answer, or None when the child hung (it is then killed)."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(task) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died()
        return self.answer(timeout_s)

    def answer(self, timeout_s: float) -> dict[str, Any] | None:
        """The next answer, or None when none came within ``timeout_s`` (the child is then killed)."""
        line = self._line(timeout_s)
        if line is None:
            self.stop()
            return None
        if not line:
            return self._died()
        try:
            answer: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            return {"error": f"copy timer answered garbage: {line[:80]!r}"}
        return answer

    def wait_started(self, timeout_s: float) -> None:
        """Wait, ``timeout_s`` at most, until the hello on its way is answered (CUDA started: the
        driver, every context, peer access), and keep that answer for ``start``. The probe's NVML
        readings wait for it: beside cuInit they slowed it (232 ms alone, 282 and 338 ms beside a
        scan's and a check's probe, 2 x H200). Nothing while no hello is on its way; never kills."""
        if self.proc is None or self.sent is None or self._lines:
            return
        line = self._line(timeout_s)
        if line:
            self._lines.insert(0, line)

    def _line(self, timeout_s: float) -> str | None:
        """The child's next line; None when none came within ``timeout_s``, "" at its end. Read from
        its descriptor by this object alone, so that a line read with another stays here and no
        buffer hides it from ``select``."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        end = time.monotonic() + max(timeout_s, 0.0)
        while not self._lines:
            ready, _, _ = select.select([fd], [], [], max(end - time.monotonic(), 0.0))
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return ""
            *complete, self._partial = (self._partial + chunk).split(b"\n")
            self._lines += [c.decode("utf-8", "replace") for c in complete]
        return self._lines.pop(0)

    def _new_child(self, proc: TimerProc | None) -> None:
        """Drive ``proc`` from now on (None: none): nothing read from an earlier one carries over."""
        self.proc = proc
        self._lines, self._partial = [], b""

    def _died(self) -> dict[str, Any]:
        err = ""
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.wait(timeout=5)
            lines = self.proc.stderr.read().strip().splitlines()
            err = next((ln for ln in reversed(lines) if ln.strip()), "")
        code = self.proc.returncode if self.proc is not None else None
        self._new_child(None)
        if "No module named 'torch'" in err:
            raise BandwidthUnavailable("torch is not installed: pip install 'topodoctor[bandwidth]'")
        return {"error": f"copy timer died (exit {code}): {err[:160]}"}

    def stop(self) -> None:
        """Kill the process and reap it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._new_child(None)
        self.sent = None
        self.preparing = False

    def release(self) -> None:
        """Kill the process without waiting for it to end: a CUDA process takes a tenth of a second
        or more to give its memory and contexts back, which nothing after the pass waits on. The
        kernel ends it; whoever spawned it reaps it (the command at its end, or init)."""
        if self.proc is not None:
            self.proc.kill()
            for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            _released.append(self.proc)
            self._new_child(None)
        self.sent = None
        self.preparing = False
        _released[:] = [p for p in _released if p.poll() is None]


def default_worker_cmd() -> list[str]:
    """The copy timer on the CUDA driver API with its PTX kernels (no torch: starts in tens of
    milliseconds)."""
    return [sys.executable, "-m", "topodoctor.measure.timer", "bandwidth"]


def torch_worker_cmd() -> list[str]:
    """The copy timer on torch, for drivers without stream memory operations."""
    return [sys.executable, "-m", "topodoctor.measure.copies.runner"]
