"""Leaving a launcher's world: a teardown that blocks is abandoned in bounded time; a process
that never joined a world keeps its own code (the multi-process cases: test_multinode.py)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from topodoctor.measure.collectives.rank import leave as worker_exit


def test_a_blocked_teardown_is_abandoned_within_its_bound() -> None:
    release = threading.Event()
    dist = SimpleNamespace(destroy_process_group=lambda: release.wait(30))
    t0 = time.monotonic()
    assert worker_exit._destroy(dist, 0.2) is False
    assert time.monotonic() - t0 < 2.0
    release.set()
    assert worker_exit._destroy(SimpleNamespace(destroy_process_group=lambda: None), 2.0) is True


def test_a_failing_teardown_still_ends() -> None:
    def boom() -> None:
        raise RuntimeError("NCCL communicator already aborted")

    assert worker_exit._destroy(SimpleNamespace(destroy_process_group=boom), 2.0) is True


def test_no_world_keeps_the_processs_own_code() -> None:
    for code in (0, 1, 2, 3):
        assert worker_exit.leave_world(code, verdict_s=0.1, teardown_s=0.1) == code
