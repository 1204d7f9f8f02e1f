"""torch's C++ stack of ProcessGroupNCCL pasted without the message above it: the frames name the function that
raised, which tells a work past its timeout (``WorkNCCL::checkTimeout``, which raises "Watchdog caught collective
operation timeout") from an NCCL error the watchdog found on a work (``WorkNCCL::checkAndSetException``,
``handleException``, ``checkForNCCLErrors``). A stack of the watchdog thread alone (``ncclCommWatchdog``,
``watchdogHandler``, "Exception raised from ncclCommWatchdog at ...ProcessGroupNCCL.cpp:N") says only that
the thread died, on either. Text in, a kind out (c10d ProcessGroupNCCL.cpp, torch 2.2+ and before)."""

from __future__ import annotations

import re

TIMEOUT = "timeout"
ASYNC_ERROR = "async-error"
WATCHDOG_ONLY = "watchdog"

# "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<...>) + 0x1d2 (0x... in libtorch_cuda.so)"
# and c10's "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565"
_TIMEOUT = re.compile(
    r"ProcessGroupNCCL::WorkNCCL::checkTimeout\(|Exception raised from checkTimeout at \S*ProcessGroupNCCL\.cpp"
)
_ASYNC = re.compile(
    r"ProcessGroupNCCL::(?:WorkNCCL::)?(?:checkAndSetException|handleException|checkForNCCLErrors\w*)\("
    r"|Exception raised from (?:checkAndSetException|handleException|checkForNCCLErrors\w*) at \S*ProcessGroupNCCL\.cpp"
)
_WATCHDOG = re.compile(
    r"ProcessGroupNCCL::(?:watchdogHandler|ncclCommWatchdog|workCleanupLoop)\("
    r"|Exception raised from (?:ncclCommWatchdog|watchdogHandler) at \S*ProcessGroupNCCL\.cpp"
)
# the more a frame tells, the more it counts: a timeout or an error found outranks the thread that died
_ORDER = {WATCHDOG_ONLY: 0, ASYNC_ERROR: 1, TIMEOUT: 2}


def frame_kind(line: str) -> str:
    """What one line of a ProcessGroupNCCL stack says raised: TIMEOUT, ASYNC_ERROR, WATCHDOG_ONLY; "" for any
    other line."""
    if "ProcessGroupNCCL" not in line:
        return ""
    if _TIMEOUT.search(line):
        return TIMEOUT
    if _ASYNC.search(line):
        return ASYNC_ERROR
    if _WATCHDOG.search(line):
        return WATCHDOG_ONLY
    return ""


def stack_kind(kinds: dict[str, int]) -> str:
    """The stack's verdict from every kind its frames showed (kind -> first line): the one that tells most."""
    return max(kinds, key=lambda k: _ORDER[k], default="")
