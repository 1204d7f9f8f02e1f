"""What keeps a rank honest, without torch: the environment NCCL runs with, a watchdog that
ends a rank stuck in an op, and the test hook that makes faults on purpose."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

Emit = Callable[[dict[str, Any]], None]
# Test hook, for exercising the runner and the rules without broken hardware; comma-separated:
#   hang:RANK:OP:SIZE   RANK never joins OP at SIZE (its peers wait inside the op)
#   slow:RANK:MS        RANK takes MS longer to finish its timed loop (a rank that lags)
#   corrupt:RANK:OP     RANK's result of OP has one wrong element at every size
FAULT_ENV = "TOPODOCTOR_COLL_FAULT"


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
    """Ends this rank when an op outlives its timeout, even when the main thread is stuck in
    a collective that will never complete (a peer that never joined it)."""

    def __init__(self, timeout_s: float, emit: Emit, rank: int) -> None:
        self.timeout_s, self.emit, self.rank = timeout_s, emit, rank
        self.current: tuple[str, int, float] | None = None
        threading.Thread(target=self._watch, daemon=True).start()

    def begin(self, op: str, size: int) -> None:
        self.current = (op, size, time.monotonic())

    def end(self) -> None:
        self.current = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.2)
            cur = self.current
            if cur is not None and time.monotonic() - cur[2] > self.timeout_s:
                op, size, _ = cur
                msg = f"{op} at {size} B did not finish within {self.timeout_s:g} s on rank {self.rank}"
                self.emit({"ev": "hang", "rank": self.rank, "op": op, "size": size, "message": msg})
                print(f"topodoctor: error: {msg}", file=sys.stderr, flush=True)
                os._exit(124)


def fault_arg(faults: list[list[str]], rank: int, kind: str, op: str = "", size: int = 0) -> float | None:
    """The test hook's argument for ``rank`` (see FAULT_ENV), or None."""
    for f in faults:
        if len(f) < 3 or f[0] != kind or f[1] != str(rank):
            continue
        if kind == "slow":
            return float(f[2])
        if f[2] == op and (kind == "corrupt" or (len(f) > 3 and f[3] == str(size))):
            return 1.0
    return None
