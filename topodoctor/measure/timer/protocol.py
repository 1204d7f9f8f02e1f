"""What every copy timer child shares: one JSON task per line on stdin, one JSON answer per
line on stdout; "hello" first (it starts CUDA), then measurement tasks. Standard library only:
the timers import it before they touch CUDA."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

Answer = dict[str, Any]
Op = Callable[[Answer], Answer]
PARENT_ENV = "TOPODOCTOR_TIMER_PARENT"  # the pid a spawned timer dies with (plans.main reads it)


class Clock:
    """Seconds spent per phase inside one task."""

    def __init__(self) -> None:
        self.t = time.monotonic()
        self.spent: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        """Add the time since the last lap to ``phase``."""
        now = time.monotonic()
        self.spent[phase] = round(self.spent.get(phase, 0.0) + now - self.t, 6)
        self.t = now


def serve(hello: Op, ops: dict[str, Op], on_error: Callable[[BaseException], str], first: Answer | None = None) -> None:
    """Answer tasks until stdin closes, ``first`` (a forked timer's hello, given at the fork) before
    them. A failed hello ends the child (nothing can be measured); a failed task is answered with
    its error and the child goes on with the next one."""
    if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        print(json.dumps({"error": "the copy timer must run with CUDA_DEVICE_ORDER=PCI_BUS_ID"}), flush=True)
        return
    started = False
    for task in _tasks(first):
        op = task.get("op")
        if op == "hello":
            try:
                answer = hello(task)
            except Exception as exc:  # no driver, no GPU: one answer, then stop
                answer = {"error": f"CUDA unavailable: {type(exc).__name__}: {exc}"}
            print(json.dumps(answer), flush=True)
            if "error" in answer:
                return
            started = True
            continue
        if not started or op not in ops:
            answer = {"error": f"unexpected task {op!r} (hello first, then {', '.join(ops)})"}
        else:
            try:
                answer = ops[op](task)
            except Exception as exc:
                answer = {"error": on_error(exc)}
        print(json.dumps(answer), flush=True)


def _tasks(first: Answer | None) -> Iterator[Answer]:
    if first is not None:
        yield first
    for line in sys.stdin:
        yield json.loads(line)


def see_only(task: Answer) -> None:
    """Narrow CUDA to the GPUs the parent names in the hello task (a CUDA_VISIBLE_DEVICES value,
    or null for all), before CUDA starts: a job-scoped run opens no context elsewhere."""
    import os

    visible = task.get("visible")
    if visible is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(visible)


def serve_timer(
    make: Callable[[], Mapping[str, Op]],
    ops: Sequence[str],
    on_error: Callable[[BaseException], str],
    first: Answer | None = None,
) -> None:
    """``serve`` for a timer made at the hello: ``make`` makes it and gives its tasks by name
    ("hello", which it answers, and each of ``ops``); ``first`` as ``serve`` takes it."""
    state: list[Mapping[str, Op]] = []

    def hello(task: Answer) -> Answer:
        state.append(make())
        return state[-1]["hello"](task)

    def method(name: str) -> Op:
        return lambda task: state[-1][name](task)

    serve(hello, {name: method(name) for name in ops}, on_error, first)
