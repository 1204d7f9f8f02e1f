"""The test's own rank entry point: `topodoctor` as one rank of a simulated node.

Test-only delay: when TOPODOCTOR_TEST_SLOW_MS is set in a rank's environment, every
all_reduce that rank starts is held back that many milliseconds first, as on a node whose
network is slow; its pairs with other nodes then take longer and the pairwise finder must
name it. Nothing in topodoctor reads this variable: the patch lives in this file only.

Test-only death: when TOPODOCTOR_TEST_DIE_AT_EXIT is set, the rank ends (code 9) after its
work, right where it would agree on the world's exit code: a peer gone at the end of the run.

Test-only record: when TOPODOCTOR_TEST_GROUP_LOG names a file, the rank appends a line there each
time it makes or destroys a process group, with the NCCL_ALGO its environment holds at that
moment (what NCCL would read when it sets up the group's communicator).
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch.distributed as dist

SLOW_MS = float(os.environ.get("TOPODOCTOR_TEST_SLOW_MS", "0") or 0)

if SLOW_MS > 0:
    _real = dist.all_reduce

    def _slow_all_reduce(*args: Any, **kwargs: Any) -> Any:
        time.sleep(SLOW_MS / 1e3)
        return _real(*args, **kwargs)

    dist.all_reduce = _slow_all_reduce

if os.environ.get("TOPODOCTOR_TEST_DIE_AT_EXIT"):
    from topodoctor.measure.collectives.rank import leave as worker_exit

    def _die(code: int, *args: Any, **kwargs: Any) -> int:
        os._exit(9)

    worker_exit.leave_world = _die

GROUP_LOG = os.environ.get("TOPODOCTOR_TEST_GROUP_LOG")

if GROUP_LOG:
    _new, _destroy = dist.new_group, dist.destroy_process_group

    def _note(what: str) -> None:
        with open(GROUP_LOG, "a") as f:
            f.write(f"{what} NCCL_ALGO={os.environ.get('NCCL_ALGO', '-')}\n")

    def _new_group(ranks: Any = None, *args: Any, **kwargs: Any) -> Any:
        _note(f"new_group {','.join(map(str, ranks or []))}")
        return _new(ranks, *args, **kwargs)

    def _destroy_group(group: Any = None) -> Any:
        out = _destroy(group)
        _note("destroyed" if group is not None else "destroyed the world")
        return out

    dist.new_group = _new_group
    dist.destroy_process_group = _destroy_group

from topodoctor.cli.commands import run  # noqa: E402

run()
