"""The copy timer's lines as its driver (measure/copies/worker.py) reads them, over a real pipe: a
line may come in pieces or two at once, and ``wait_started`` waits a bounded time for the hello's
answer without ever killing the child, keeping that answer for ``start``. Then the pass's start
(service/copies.py): the probe waits for the CUDA start of a timer forked at the entry point, not
for one started in the child."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import pytest

from topodoctor.measure.copies.worker import Worker
from topodoctor.service import copies, early_copies


class _Proc:
    """A child as the worker holds it: its stdout is our pipe's read end; nothing else runs."""

    def __init__(self) -> None:
        r, self.w = os.pipe()
        self.stdout = os.fdopen(r, encoding="utf-8")
        self.stdin = self.stderr = None
        self.pid, self.killed = 1, False
        self.returncode: int | None = None

    def say(self, text: str, after_s: float = 0.0) -> None:
        def write() -> None:
            time.sleep(after_s)
            os.write(self.w, text.encode())

        threading.Thread(target=write, daemon=True).start() if after_s else write()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode

    def kill(self) -> None:
        self.killed = True


def _worker(proc: _Proc, hello_sent: bool = True) -> Worker:
    w = Worker(["unused"], 5.0, fallback=["unused"])
    w.took(proc, {"op": "hello"} if hello_sent else None, time.monotonic())  # type: ignore[arg-type]
    return w


def _line(doc: dict[str, Any]) -> str:
    return json.dumps(doc) + "\n"


def test_two_answers_in_one_read_are_both_answered_in_turn() -> None:
    proc = _Proc()
    w = _worker(proc)
    proc.say(_line({"devices": []}) + _line({"timings": {}}))
    assert w.answer(1.0) == {"devices": []}
    assert w.answer(0.0) == {"timings": {}}  # already read: no wait for the descriptor
    assert not proc.killed


def test_an_answer_may_come_in_pieces() -> None:
    proc = _Proc()
    w = _worker(proc)
    proc.say('{"devi')
    proc.say('ces": [1]}\n', after_s=0.05)
    assert w.answer(1.0) == {"devices": [1]}


def test_wait_started_keeps_the_hello_s_answer_for_start() -> None:
    proc = _Proc()
    w = _worker(proc)
    proc.say(_line({"devices": [0, 1]}), after_s=0.05)
    t0 = time.monotonic()
    w.wait_started(5.0)
    assert time.monotonic() - t0 < 2.0 and w._lines
    w.wait_started(5.0)  # a second wait finds it there and returns at once
    assert w.answer(0.0) == {"devices": [0, 1]}


def test_wait_started_is_bounded_and_never_kills() -> None:
    proc = _Proc()
    w = _worker(proc)
    t0 = time.monotonic()
    w.wait_started(0.1)
    assert 0.09 <= time.monotonic() - t0 < 1.0 and not proc.killed and w.proc is not None
    proc.say(_line({"error": "CUDA unavailable: no GPU"}))
    assert w.answer(1.0) == {"error": "CUDA unavailable: no GPU"}


def test_nothing_is_waited_for_without_a_hello_on_its_way() -> None:
    proc = _Proc()
    w = _worker(proc, hello_sent=False)
    t0 = time.monotonic()
    w.wait_started(5.0)
    assert time.monotonic() - t0 < 0.5


def test_an_answer_that_never_comes_still_kills_the_child_and_its_lines_go_with_it() -> None:
    proc = _Proc()
    w = _worker(proc)
    proc.say('{"half')
    assert w.answer(0.1) is None and proc.killed and w.proc is None and w._partial == b""


def test_a_child_that_ends_without_answering_is_said_dead() -> None:
    proc = _Proc()
    w = _worker(proc)
    os.close(proc.w)
    proc.returncode = -11
    w.proc.stderr = None  # type: ignore[union-attr]
    assert w.answer(1.0) == {"error": "copy timer died (exit -11): "}


class _Adopted:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def prepare_now(self, task: dict[str, Any]) -> None:
        self.calls.append("prepare")

    def wait_started(self, timeout_s: float) -> None:
        self.calls.append(("wait", timeout_s))


@pytest.mark.parametrize("deadline_in, waited", [(60.0, copies.START_WAIT_S), (0.2, 0.2)])
def test_a_timer_forked_at_the_entry_point_is_waited_for_within_the_budget(
    monkeypatch: pytest.MonkeyPatch, deadline_in: float, waited: float
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(early_copies, "adopt", lambda: _Adopted(calls))
    copies._starter(None, True)(time.monotonic() + deadline_in)
    assert calls[0] == "prepare" and calls[1][0] == "wait" and calls[1][1] == pytest.approx(waited, abs=0.05)


def test_a_timer_started_in_the_child_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    class Spawned(_Adopted):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(calls)

        def spawn(self) -> None:
            calls.append("spawn")

        def hello_now(self) -> None:
            calls.append("hello")

    monkeypatch.setattr(early_copies, "adopt", lambda: None)
    monkeypatch.setattr(copies, "Worker", Spawned)
    for name in early_copies.SCOPE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    copies._starter(None, True)(time.monotonic() + 60)
    assert calls == ["spawn", "hello", "prepare"]
