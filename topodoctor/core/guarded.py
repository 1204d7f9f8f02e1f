"""Python work of the command's own (reading what a user gave, judging it) stopped at the budget's
deadline in this thread, where a forked child would only add the cost of the fork and of sending the
answer back: ``Budget.guard``'s interval timer interrupts it between bytecodes (main thread only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from topodoctor.core.budget import Budget
from topodoctor.core.errors import BudgetExceeded

T = TypeVar("T")


def bounded(budget: Budget, what: str, fn: Callable[[], T]) -> T:
    """``fn()``, or past the budget's deadline ``BudgetExceeded`` (exit 3) saying ``what`` was not done."""
    try:
        with budget.guard():
            return fn()
    except BudgetExceeded:
        if not budget.limited:
            raise
        raise BudgetExceeded(
            f"could not check: {what} not done within the {budget.timeout_s:g} s --timeout "
            "(give a longer --timeout, or less input)"
        ) from None
