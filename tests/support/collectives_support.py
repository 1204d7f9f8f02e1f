"""Shared by the collectives tests: a hard per-test time limit, and where the fixtures are."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NCCL_TESTS = FIXTURES / "nccl-tests" / "h200-x2"
NCCL_LOGS = FIXTURES / "nccl-logs"
DERIVED = FIXTURES / "collectives" / "derived"


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail the test (never hang the suite) when the body outlives ``seconds``."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"test body ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
