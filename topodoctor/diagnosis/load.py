"""Who else was on a GPU while topodoctor measured it: NVML's utilisation and process count when a
measurement started, joined with the snapshot's process list (pid, user, command, and whether the
process is topodoctor's own: the check, the ranks and workers it starts, its Slurm job).

topodoctor's own workers never count: during a check the ranks of the collectives pass and the copy
and fitness workers hold a CUDA context on every GPU, and the utilisation NVML reports a moment later
is often theirs. A GPU is loaded by someone else when a process that is not ours is on it, or, where
no process can be seen at all (another container, a VM's host), when it is busy past BUSY_UTIL_PCT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from topodoctor.model.copies import Activity
from topodoctor.model.snapshot import ComputeProcess, HostSnapshot

# Utilisation NVML reports for a GPU that shows no process: past half of the last sample period busy,
# someone we cannot see is computing there. A few % is the tail of our own passes' last kernels (9 %
# on a healthy 2 x H100 check, the copy pass a moment before).
BUSY_UTIL_PCT = 50
# CUDA time-slices the contexts of different processes on one GPU (without MPS): a kernel of ours
# shares the GPU's time with each other process that keeps it busy.
TIME_SLICED_FROM_PCT = 50


@dataclass(frozen=True)
class Foreign:
    """A compute process that is not topodoctor's, as the snapshot named it."""

    pid: int
    uid: int | None
    command: str | None
    memory_bytes: int | None

    def label(self) -> str:
        """``pid 2972 (uid 0, python3 train.py)``: how messages name it."""
        user = f"uid {self.uid}" if self.uid is not None else "user unknown"
        cmd = (self.command or "command unknown")[:60]
        return f"pid {self.pid} ({user}, {cmd})"


@dataclass(frozen=True)
class Load:
    """What else ran on one GPU: utilisation, the processes that are not ours, and how many are."""

    index: int
    utilization_pct: int | None
    foreign: tuple[Foreign, ...]
    unseen: int  # processes NVML counted that the snapshot could not name (not ours, not listed)
    own: int = 0  # topodoctor's own processes on it (their utilisation is ours)

    @property
    def busy(self) -> bool:
        """Someone else's work was on the GPU: a foreign process, or high utilisation with no process of
        ours to account for it."""
        if self.foreign or self.unseen:
            return True
        return not self.own and (self.utilization_pct or 0) >= BUSY_UTIL_PCT

    @property
    def contenders(self) -> int:
        """Other processes that keep the GPU busy, sharing its time with ours (0 when it was idle)."""
        if (self.utilization_pct or 0) < TIME_SLICED_FROM_PCT:
            return 0
        return max(1, len(self.foreign) + self.unseen)

    def describe(self) -> str:
        """``GPU1 99 % busy with pid 2972 (uid 0, python3 x.py)``."""
        util = f"{self.utilization_pct} % busy" if self.utilization_pct is not None else "busy"
        who = ", ".join(f.label() for f in self.foreign[:2])
        if self.unseen:
            who = ", ".join(filter(None, [who, f"{self.unseen} process(es) not visible here"]))
        return f"GPU{self.index} {util}" + (f" with {who}" if who else " with no process of ours on it")


def _foreign(p: ComputeProcess) -> Foreign:
    return Foreign(
        p.pid,
        p.uid if isinstance(p.uid, int) else None,
        p.cmdline if isinstance(p.cmdline, str) else None,
        p.used_memory_bytes,
    )


def loads(snap: HostSnapshot | None, activity: Sequence[Activity]) -> dict[int, Load]:
    """Every GPU's load from a measurement's activity and the snapshot's process list. Where the
    snapshot lists the processes (which of them are ours), NVML's count is not needed; where it does
    not (older results, nccl-tests), every process NVML counted is taken as someone else's."""
    out: dict[int, Load] = {}
    by_gpu = {g.index: g for g in snap.gpus} if snap is not None else {}
    for a in activity:
        g = by_gpu.get(a.index)
        listed = g.compute_processes if g is not None else None
        if isinstance(listed, tuple):
            foreign = tuple(_foreign(p) for p in listed if not p.ours)
            out[a.index] = Load(a.index, a.utilization_pct, foreign, 0, len(listed) - len(foreign))
        else:
            out[a.index] = Load(a.index, a.utilization_pct, (), a.processes or 0)
    for g in snap.gpus if snap is not None else ():
        listed = g.compute_processes
        if g.index not in out and isinstance(listed, tuple):
            foreign = tuple(_foreign(p) for p in listed if not p.ours)
            out[g.index] = Load(g.index, None, foreign, 0, len(listed) - len(foreign))
    return out
