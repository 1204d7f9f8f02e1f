"""Leaving a launcher's world (torchrun, srun) together, with one exit code, in bounded time.

Rank 0 reports for the world and the other ranks have nothing to say, but they must not simply
leave with their own codes: torchrun's agents wait for one another at an exit barrier only
when their worker succeeded, so a world whose rank 0 exits 1 (findings) while the others exit
0 leaves the others' agents waiting on a store whose host may be gone or may wait for the
missing agent up to its barrier timeout (minutes). So every rank waits here for rank 0's
verdict and all leave with the same code. The verdict goes through the world's store, not
NCCL: after a failed run the communicator may be broken, the store still answers. Rank 0
waits (briefly) for the others to have read it, since its leaving may take the store's host
with it.

Then the process group is torn down, bounded too: NCCL's communicator destroy and torch's
watchdog threads can block on peers that have already left; past a few seconds the rank goes
on to its exit (the console entry point ends with os._exit) instead of hanging.
Imports torch only when this process already joined a world (torch.distributed is loaded).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any

from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_UNHEALTHY
from topodoctor.measure.collectives.guard import ARRIVED_KEY, EXIT_ACK_KEY, EXIT_KEY, FAILED_KEY, Alarm, world_store

VERDICT_TIMEOUT_S = 30.0  # rank 0 judges (and may write files) before it answers
ACK_TIMEOUT_S = 2.0
ARRIVE_TIMEOUT_S = 5.0
TEARDOWN_TIMEOUT_S = 5.0


def _warn(msg: str) -> None:
    try:
        sys.stderr.write(f"topodoctor: warning: {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        return


def _joined() -> Any:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def _agree(dist: Any, code: int, timeout_s: float) -> int:
    """Rank 0's code, through the world's store (or a collective where there is no store);
    a rank whose own code is worse keeps its own. A rank that cannot learn rank 0's code in
    time leaves with "could not check" (3)."""
    rank = dist.get_rank()
    store = world_store(dist)
    if store is None:
        return _agree_collective(dist, code, timeout_s)
    alarm = Alarm(store, rank)
    if rank == 0:
        missing = _arrived(store, dist.get_world_size(), ARRIVE_TIMEOUT_S)
        if missing:
            # A rank that left before the end (it died, or its launcher killed it) is a failure
            # of the run: the report is out already, so the exit code says it.
            _warn(f"rank(s) {', '.join(map(str, missing))} did not reach the end of the run")
            code = max(code, EXIT_UNHEALTHY)
        if alarm.publish(EXIT_KEY, str(code)):
            _acknowledged(store, dist.get_world_size() - 1 - len(missing), ACK_TIMEOUT_S)
        return code
    alarm.publish(f"{ARRIVED_KEY}{rank}", "1")
    got = alarm.read(EXIT_KEY, timeout_s)
    if got is None or not got.isdigit() or int(got) > EXIT_CANNOT_CHECK:
        _warn(f"rank {rank}: rank 0's exit code did not come within {timeout_s:g} s")
        return max(code, EXIT_CANNOT_CHECK)
    with contextlib.suppress(Exception):  # rank 0 stops waiting for us on its own
        store.add(EXIT_ACK_KEY, 1)
    return max(code, int(got))


def _publish_only(dist: Any, code: int) -> None:
    Alarm(world_store(dist), 0).publish(EXIT_KEY, str(code))


def _arrived(store: Any, n: int, timeout_s: float) -> list[int]:
    """The ranks that did not say they reached the end within ``timeout_s`` (they say so
    right after their part of the run, so rank 0, the last to finish, rarely waits)."""
    deadline = time.monotonic() + timeout_s
    missing = list(range(1, n))
    while missing:
        try:
            missing = [r for r in missing if not store.check([f"{ARRIVED_KEY}{r}"])]
        except Exception:
            return missing
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return missing


def _acknowledged(store: Any, others: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if int(store.add(EXIT_ACK_KEY, 0)) >= others:
                return
        except Exception:
            return
        time.sleep(0.01)


def _agree_collective(dist: Any, code: int, timeout_s: float) -> int:
    """The worst of every rank's code (0 < 1 < 2 < 3), or this rank's own view when the world
    cannot answer in time (a peer gone or stuck): rank 0 keeps its verdict, the others could
    not learn it (3)."""
    import torch

    rank = dist.get_rank()
    try:
        cuda = dist.get_backend() == "nccl"
        dev = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        t = torch.tensor([code], dtype=torch.int32, device=dev)
        work = dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True)
        deadline = time.monotonic() + timeout_s
        while not work.is_completed():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer within {timeout_s:g} s")
            time.sleep(0.005)
        work.wait()
        agreed = int(t.item())
    except Exception as exc:  # a dead peer shows up as any of torch's errors
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        _warn(f"rank {rank}: the world's exit code could not be agreed ({type(exc).__name__}: {first})")
        return code if rank == 0 else max(code, EXIT_CANNOT_CHECK)
    if not code <= agreed <= EXIT_CANNOT_CHECK:  # matched with a peer's other op: not a code
        _warn(f"rank {rank}: the world's exit code came back as {agreed}; not one of ours")
        return max(code, EXIT_CANNOT_CHECK)
    return agreed


def _failed(dist: Any) -> bool:
    """Whether some rank announced a failure on the world's store (see guard.Alarm)."""
    store = world_store(dist)
    try:
        return store is None or bool(store.check([FAILED_KEY]))
    except Exception:
        return True  # no store to ask: the world is not in a state worth a teardown


def _destroy(dist: Any, timeout_s: float) -> bool:
    """destroy_process_group in a daemon thread; False when it did not finish in time."""
    t = threading.Thread(target=lambda: _quietly(dist.destroy_process_group), daemon=True)
    t.start()
    t.join(timeout_s)
    return not t.is_alive()


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception:  # leaving anyway: a half-torn-down group is the process's last state
        return


def leave_world(code: int, verdict_s: float = VERDICT_TIMEOUT_S, teardown_s: float = TEARDOWN_TIMEOUT_S) -> int:
    """The code this process exits with: its own when it never joined a world; else the
    world's, agreed with every rank, after the group is torn down (or abandoned past
    ``teardown_s``). The caller must end the process with os._exit: after an abandoned
    teardown, the interpreter's own shutdown could block on the same threads."""
    dist = _joined()
    if dist is None:
        return code
    if _failed(dist):
        # A rank failed and rank 0 reported it: every rank leaves at once with its own code
        # (1 where it stopped, rank 0's verdict there). Waiting for one another here would keep
        # the sockets of a broken world open, and its communicator waits on peers that left:
        # no teardown either.
        if dist.get_rank() == 0:
            _publish_only(dist, code)
        return code
    agreed = _agree(dist, code, verdict_s)
    if not _destroy(dist, teardown_s):
        _warn(f"the process group's teardown did not finish within {teardown_s:g} s; leaving without it")
    return agreed
