"""What keeps a rank honest, without torch: the environment NCCL runs with, a watchdog that
ends a rank stuck in an op, the alarm that tells every rank when one of them failed, and the
test hook that makes faults on purpose."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from topodoctor.core.text import human_size

Emit = Callable[[dict[str, Any]], None]
# Test hook, for exercising the runner and the rules without broken hardware; comma-separated:
#   hang:RANK:OP:SIZE   RANK never joins OP at SIZE (its peers wait inside the op)
#   slow:RANK:MS        RANK takes MS longer to finish its timed loop (a rank that lags)
#   corrupt:RANK:OP     RANK's result of OP has one wrong element at every size
#   error:RANK:OP       RANK fails as OP begins (its first size), as on an NCCL error
#   init:RANK:FILE      RANK fails to join the world with FILE's text as its exception (init_failure.py)
FAULT_ENV = "TOPODOCTOR_COLL_FAULT"
FAILED_KEY = "topodoctor/failed"  # the world's first failure (JSON), in the world's store
RANK_KEY = "topodoctor/rank/"  # + rank: that rank's identity, published before any collective
EXIT_KEY, EXIT_ACK_KEY = "topodoctor/exit", "topodoctor/exit-ack"
ARRIVED_KEY = "topodoctor/arrived/"  # + rank: that rank reached the end of the run
ALARM_POLL_S = 0.25


class RankStopped(Exception):
    """This rank (not rank 0) stopped on a failure, its own or a peer's; rank 0 reports it."""

    def __init__(self, failure: dict[str, Any]) -> None:
        super().__init__(str(failure.get("message", "")))
        self.failure = failure


def world_store(dist: Any) -> Any:
    """The world's c10d store of a joined ``torch.distributed`` (private in torch, stable for
    years), or None: the alarm is then silent and the timeouts alone stop the ranks."""
    get = getattr(dist.distributed_c10d, "_get_default_store", None)
    try:
        return get() if get is not None else None
    except Exception:
        return None


class Alarm:
    """A rank's failure, known to every rank of the world within a poll. The channel is the
    world's c10d store (torchrun's agent store, env://'s TCPStore, srun's MASTER_ADDR), which
    lives outside NCCL: a rank whose NCCL call failed can still say so, and the ranks waiting
    for it in a collective that will never complete stop instead of waiting out the timeout.
    Without a store (None) the alarm is silent and the timeouts do the work."""

    def __init__(self, store: Any, rank: int) -> None:
        self.store, self.rank = store, rank
        self.lock = threading.Lock()

    def announce(self, failure: dict[str, Any]) -> None:
        """Tell the world; the first failure announced wins (the cause, not its echoes)."""
        if self.store is None:
            return
        try:
            with self.lock:
                self.store.compare_set(FAILED_KEY, "", json.dumps(failure))
        except Exception:  # a store that is gone cannot carry it; the timeouts still will
            return

    def peek(self) -> dict[str, Any] | None:
        """The world's failure, if some other rank announced one; a store that stopped answering
        counts as one (its host, a launcher's agent or rank 0, is gone)."""
        if self.store is None:
            return None
        try:
            with self.lock:
                if not self.store.check([FAILED_KEY]):
                    return None
                doc = json.loads(self.store.get(FAILED_KEY))
        except Exception as exc:
            msg = f"the world's store stopped answering ({type(exc).__name__}): its host left the run"
            return {"kind": "died", "op": None, "size_bytes": None, "message": msg, "rank": None}
        if not isinstance(doc, dict) or doc.get("rank") == self.rank:
            return None
        return doc

    def publish(self, key: str, value: str) -> bool:
        """Set ``key`` in the world's store; False where there is no store or it stopped answering."""
        if self.store is None:
            return False
        try:
            with self.lock:
                self.store.set(key, value)
            return True
        except Exception:
            return False

    def read(self, key: str, timeout_s: float) -> str | None:
        """``key``'s value once some rank set it, waiting up to ``timeout_s``; None on no store or no answer."""
        if self.store is None:
            return None
        try:
            with self.lock:
                self.store.wait([key], timedelta(seconds=timeout_s))
                return bytes(self.store.get(key)).decode()
        except Exception:
            return None

    def present(self, keys: list[str]) -> bool:
        """Whether every key is set in the world's store (False without a store, or when it stopped answering)."""
        if self.store is None:
            return False
        try:
            with self.lock:
                return bool(self.store.check(keys))
        except Exception:
            return False

    def identities(self, n: int) -> list[dict[str, Any]]:
        """The identities the ranks published (those that got that far), in rank order."""
        out = []
        for r in range(n):
            try:
                with self.lock:
                    if not self.store.check([f"{RANK_KEY}{r}"]):
                        continue
                    out.append(json.loads(self.store.get(f"{RANK_KEY}{r}")))
            except Exception:
                break
        return out


def failure_of(exc: BaseException, rank: int, node: str, current: tuple[str, int, float] | None) -> dict[str, Any]:
    """What a rank's exception says, as a failure: NCCL's own words without torch's source path."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first.startswith("NCCL error in:") and ", " in first:
        first = first.split(", ", 1)[1]  # drop torch's own file and line
    detail = next((ln for ln in lines[1:] if ln.startswith("nccl")), "")
    msg = f"{type(exc).__name__}: {first}" + (f" ({detail[:200]})" if detail else "")
    kind = "oom" if type(exc).__name__ == "OutOfMemoryError" else "error"
    op, size = (current[0], current[1]) if current else (None, None)
    return {"kind": kind, "op": op, "size_bytes": size or None, "message": f"{node}: {msg}", "rank": rank}


def flush_c_streams() -> None:
    """Flush C stdio (NCCL's log file among it): complete on disk before it is read, or before the
    process may be killed."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def nccl_environment(environ: dict[str, str], rank: int, log_dir: str | None) -> None:
    """What every rank runs with: NCCL's INFO log in a file of its own, NVLink multicast off
    unless the user turned it on (it can take a shared host's GPUs out of service)."""
    environ.setdefault("NCCL_NVLS_ENABLE", "0")
    environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    if log_dir and "NCCL_DEBUG_FILE" not in environ:
        environ["NCCL_DEBUG"] = "INFO"
        environ["NCCL_DEBUG_FILE"] = os.path.join(log_dir, f"nccl.{rank}.log")


class Watchdog:
    """Where this rank is (the op and size it is in, since when) and how long an op may take.

    The rank's main thread reads it while the measuring thread works (see ``run_watched``) and
    cuts a hang there, with a report. This thread is the backstop: it ends the process when an
    op outlives its timeout by ``BACKSTOP_S`` (the main thread itself stuck)."""

    BACKSTOP_S = 10.0

    def __init__(self, timeout_s: float, emit: Emit, rank: int) -> None:
        self.timeout_s, self.emit, self.rank = timeout_s, emit, rank
        self.current: tuple[str, int, float] | None = None
        self.closed = False
        threading.Thread(target=self._watch, daemon=True).start()

    def begin(self, op: str, size: int) -> None:
        """Note that this rank entered ``op`` at ``size`` now (nothing once the watchdog is closed)."""
        if not self.closed:
            self.current = (op, size, time.monotonic())

    def end(self) -> None:
        """Note that this rank left the op it was in."""
        self.current = None

    def close(self) -> None:
        """The run is over (done or stopped): nothing more to watch."""
        self.closed, self.current = True, None

    def overdue(self, grace_s: float = 0.0, deadline: float | None = None) -> dict[str, Any] | None:
        """The hang, as a failure, when the current op outlived its timeout (plus ``grace_s``)
        or the run its ``deadline`` (time.monotonic)."""
        cur, now = self.current, time.monotonic()
        op, size = (cur[0], cur[1]) if cur else (None, 0)
        where = f"{op} at {human_size(size)}" if size else str(op or "the run")
        if cur is not None and now - cur[2] > self.timeout_s + grace_s:
            msg = f"{where} did not finish within {self.timeout_s:g} s on rank {self.rank}"
        elif deadline is not None and now >= deadline:
            msg = f"the time budget ran out during {where} on rank {self.rank}"
        else:
            return None
        return {"kind": "hang", "op": op, "size_bytes": size or None, "message": msg, "rank": self.rank}

    def _watch(self) -> None:
        while True:
            time.sleep(0.2)
            hang = self.overdue(self.BACKSTOP_S)
            if hang is not None:
                ev = {"ev": "hang", "rank": self.rank, "op": hang["op"], "size": hang["size_bytes"] or 0}
                self.emit({**ev, "message": hang["message"]})
                print(f"topodoctor: error: {hang['message']}", file=sys.stderr, flush=True)
                os._exit(124)


def run_watched(
    fn: Callable[[], Any], alarm: Alarm, watchdog: Watchdog, deadline: float | None = None
) -> tuple[Any, BaseException | None, Any]:
    """Run ``fn`` (the rank's measurements) in a thread of its own while this thread watches:
    ``(value, None, None)`` when it returns, ``(None, exc, None)`` when it raises, or
    ``(None, None, failure)`` when a peer announced a failure, an op outlived its timeout or
    the run its ``deadline`` (time.monotonic) first. NCCL can block a calling thread inside a
    library call (a connection its peer never makes), where no Python code runs: so the
    measuring thread is the one that may be stuck, never this one, and a stopped rank still
    reports. A stuck measuring thread is left where it is; the process ends with os._exit."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the watching thread, which decides
            box["exc"] = exc

    t = threading.Thread(target=target, daemon=True, name="topodoctor-measure")
    t.start()
    asked = time.monotonic()
    while True:
        t.join(0.05)
        if not t.is_alive():
            return box.get("value"), box.get("exc"), None
        if time.monotonic() - asked >= ALARM_POLL_S:  # the store is asked a few times a second
            asked = time.monotonic()
            peer = alarm.peek()
            if peer is not None:
                return None, None, peer
        hang = watchdog.overdue(deadline=deadline)
        if hang is not None:
            alarm.announce(hang)
            return None, None, hang


def fault_arg(faults: list[list[str]], rank: int, kind: str, op: str = "", size: int = 0) -> float | None:
    """The test hook's argument for ``rank`` (see FAULT_ENV), or None."""
    for f in faults:
        if len(f) < 3 or f[0] != kind or f[1] != str(rank):
            continue
        if kind == "slow":
            return float(f[2])
        if f[2] == op and (kind in ("corrupt", "error") or (len(f) > 3 and f[3] == str(size))):
            return 1.0
    return None
