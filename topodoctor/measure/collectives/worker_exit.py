"""Leaving a launcher's world (torchrun, srun) together, with one exit code, in bounded time.

Rank 0 reports for the world and the other ranks have nothing to say, but they must not simply
leave with their own codes: torchrun's agents wait for one another at an exit barrier only
when their worker succeeded, so a world whose rank 0 exits 1 (findings) while the others exit
0 leaves the others' agents waiting on a store whose host may be gone or may wait for the
missing agent up to its barrier timeout (minutes). So every rank waits here for rank 0's
verdict (an all_reduce MAX of the ranks' codes, bounded) and all leave with the same code.

Then the process group is torn down, bounded too: NCCL's communicator destroy and torch's
watchdog threads can block on peers that have already left; past a few seconds the rank goes
on to its exit (the console entry point ends with os._exit) instead of hanging.
Imports torch only when this process already joined a world (torch.distributed is loaded).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from topodoctor.errors import EXIT_CANNOT_CHECK

VERDICT_TIMEOUT_S = 30.0  # rank 0 probes the host (or replays) and judges before it answers
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
    agreed = _agree(dist, code, verdict_s)
    if not _destroy(dist, teardown_s):
        _warn(f"the process group's teardown did not finish within {teardown_s:g} s; leaving without it")
    return agreed
