"""A budgeted child's answer is taken as soon as it is written: its exit (a probe's child closing
the driver takes milliseconds) is waited for at the command's end, after the output, and a child
still not gone then is killed (core/budget.py ``end_children``)."""

from __future__ import annotations

import faulthandler
import os
import signal
import time
from typing import Any

import pytest
from process_marks import gone

from topodoctor.core import budget
from topodoctor.core.budget import Budget, await_child, end_children, fork_work
from topodoctor.core.errors import TopodoctorError


def _slow_exit(deadline: float) -> dict[str, Any]:
    """Answer at once, then take half a second to exit."""
    real = os._exit

    def late(code: int) -> None:
        time.sleep(0.5)
        real(code)

    os._exit = late  # type: ignore[assignment]
    return {"answer": 42}


def test_the_answer_does_not_wait_for_the_exit_and_the_end_reaps_it() -> None:
    child = fork_work(_slow_exit, time.monotonic() + 30)
    started = time.monotonic()
    assert await_child(child, Budget.start(30)) == {"answer": 42}
    assert time.monotonic() - started < 0.4  # not the child's half second of exiting
    assert child.pid in budget._exiting and not gone(child.pid, 0)
    end_children()  # still exiting: killed with its group, not waited for
    assert gone(child.pid, 0.3), "the kill did not end it"


@pytest.mark.slow
def test_a_child_that_has_exited_is_reaped_before_the_next_fork() -> None:
    first = fork_work(_slow_exit, time.monotonic() + 30)
    await_child(first, Budget.start(30))
    time.sleep(0.8)  # it has exited by now: a zombie until someone reaps it
    second = fork_work(lambda deadline: {"answer": 1}, time.monotonic() + 30)
    assert first.pid not in budget._exiting and gone(first.pid)
    await_child(second, Budget.start(30))
    time.sleep(0.2)
    end_children()
    assert gone(second.pid) and not budget._exiting


def _part_then(then: str) -> Any:
    def work(deadline: float) -> dict[str, Any]:
        budget.send_part({"probed": [1, 2]})
        if then == "hang":
            time.sleep(30)
        if then == "fail":
            raise budget.BudgetExceeded("could not check: the copy timer stopped")
        if then == "die":
            os._exit(9)
        return {"measured": True}

    return work


def test_a_part_sent_first_is_left_behind_by_a_final_answer() -> None:
    assert await_child(fork_work(_part_then("answer"), time.monotonic() + 30), Budget.start(30)) == {"measured": True}


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
@pytest.mark.parametrize(
    ("then", "said"),
    [
        ("hang", "not finished within the 1 s budget"),
        ("fail", "the copy timer stopped"),
        ("die", "exited with status 9 without an answer"),
    ],
)
def test_a_child_that_fails_after_a_part_hands_the_part_on_with_its_error(then: str, said: str) -> None:
    with pytest.raises(TopodoctorError, match=said) as caught:
        await_child(fork_work(_part_then(then), time.monotonic() + 30), Budget.start(1))
    assert caught.value.part == {"probed": [1, 2]}


def test_without_a_part_the_error_carries_none() -> None:
    with pytest.raises(TopodoctorError, match=r"exited with status 9 without an answer$") as caught:
        await_child(fork_work(lambda deadline: os._exit(9), time.monotonic() + 30), Budget.start(5))
    assert caught.value.part is None


def _crash(deadline: float) -> dict[str, Any]:
    faulthandler.disable()  # pytest's, inherited by the fork: no dump of this staged crash
    os.kill(os.getpid(), signal.SIGSEGV)  # as a crash in a driver library ends the child
    time.sleep(30)
    return {}


def test_a_child_that_crashed_is_named_by_its_signal() -> None:
    with pytest.raises(TopodoctorError, match=r"died of SIGSEGV without an answer \(a crash; run again with") as caught:
        await_child(fork_work(_crash, time.monotonic() + 30), Budget.start(5))
    assert caught.value.exit_code == 3 and not budget._exiting


def test_outside_a_child_a_part_goes_nowhere() -> None:
    budget.send_part({"x": 1})  # no pipe in the command's own process: nothing written, nothing raised
