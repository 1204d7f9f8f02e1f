"""Who else was on a GPU while topodoctor measured it: NVML's utilisation and process count when a
measurement started, joined with the snapshot's process list (pid, user, command, and whether the
process is topodoctor's own: the check, the ranks and workers it starts, its Slurm job), and with
the processes NVML listed while it ran (``model/during.py``): one that came and went mid-run is
seen there only.

topodoctor's own workers never count: during a check the ranks of the collectives pass and the copy
and fitness workers hold a CUDA context on every GPU, and the utilisation NVML reports a moment later
is often theirs. A GPU is loaded by someone else when a process that is not ours is on it, or, where
no process can be seen at all (another container, a VM's host), when it is busy past BUSY_UTIL_PCT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a static check's rules load this, and no result class
    from topodoctor.model.copies import Activity
    from topodoctor.model.during import RunSampling, SeenProcess
    from topodoctor.model.snapshot import ComputeProcess, HostSnapshot

# Utilisation NVML reports for a GPU that shows no process: past half of the last sample period busy,
# someone we cannot see is computing there. A few % is the tail of our own passes' last kernels (9 %
# on a healthy 2 x H100 check, the copy pass a moment before).
BUSY_UTIL_PCT = 50
# CUDA time-slices the contexts of different processes on one GPU (without MPS): a kernel of ours
# shares the GPU's time with each other process that keeps it busy.
TIME_SLICED_FROM_PCT = 50
# A process the samples saw for this share of the run or more was there throughout; its SM share
# in NVML's per-process samples at BUSY_SM_PCT or more means it computed, not just held memory.
THROUGHOUT = 0.9
BUSY_SM_PCT = 10


@dataclass(frozen=True)
class Foreign:
    """A compute process that is not topodoctor's, as the snapshot named it."""

    pid: int
    uid: int | None
    command: str | None
    memory_bytes: int | None
    seen: SeenProcess | None = None  # seen only by the samples during the run, not before it
    run_s: float | None = None  # how long the samples ran

    def label(self) -> str:
        """``pid 2972 (uid 0, python3 train.py)``: how messages name it."""
        user = f"uid {self.uid}" if self.uid is not None else "user unknown"
        cmd = (self.command or "command unknown")[:60]
        return f"pid {self.pid} ({user}, {cmd})"

    @property
    def throughout(self) -> bool:
        """Seen before the run, or by the samples for most of it."""
        if self.seen is None or not self.run_s:
            return self.seen is None
        return (self.seen.last_s - self.seen.first_s) >= THROUGHOUT * self.run_s

    @property
    def computing(self) -> bool | None:
        """Whether NVML's per-process samples gave it a share of the SMs; None where they were not read."""
        if self.seen is None or self.seen.sm_util_pct is None:
            return None
        return self.seen.sm_util_pct >= BUSY_SM_PCT

    def when(self) -> str:
        """For a process the samples alone saw: when, and its SM share; else empty."""
        if self.seen is None:
            return ""
        s = self.seen
        sm = f", SMs up to {s.sm_util_pct} %" if s.sm_util_pct is not None else ""
        span = f"{s.first_s:.1f}-{s.last_s:.1f} s" + (f" of the {self.run_s:.1f} s run" if self.run_s else "")
        verb = "was there" if self.throughout else "came and went"
        return f"{verb} during the run (seen {span}{sm})"


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
    def before(self) -> tuple[Foreign, ...]:
        """The foreign processes seen when the measurement started (not by the samples alone)."""
        return tuple(f for f in self.foreign if f.seen is None)

    @property
    def mid_run(self) -> bool:
        """Whether all that was seen of someone else's work was seen by the samples during the run."""
        return bool(self.foreign) and not self.before and not self.unseen

    @property
    def contenders(self) -> int:
        """Other processes that keep the GPU busy, sharing its time with ours (0 when it was idle): at
        the start, by its utilisation; during the run, those there throughout with a share of the SMs."""
        during = sum(1 for f in self.foreign if f.seen is not None and f.throughout and f.computing)
        if (self.utilization_pct or 0) < TIME_SLICED_FROM_PCT or self.mid_run:
            return during
        return max(1, len(self.before) + self.unseen) + during

    def describe(self, at_start: str = "") -> str:
        """``GPU1 99 % busy with pid 2972 (uid 0, python3 x.py)`` (then ``at_start``, when given); a
        process the samples alone saw with when: ``GPU1 with pid 3120 (...), which came and went
        during the run (seen 2.1-6.3 s ...)``."""
        mid = [f for f in self.foreign if f.seen is not None]
        if self.mid_run:
            more = f" and {len(mid) - 1} more" if len(mid) > 1 else ""
            return f"GPU{self.index} with {mid[0].label()}{more}, which {mid[0].when()}"
        util = f"{self.utilization_pct} % busy" if self.utilization_pct is not None else "busy"
        who = ", ".join(f.label() for f in self.before[:2])
        if self.unseen:
            who = ", ".join(filter(None, [who, f"{self.unseen} process(es) not visible here"]))
        out = f"GPU{self.index} {util}" + (f" with {who}" if who else " with no process of ours on it") + at_start
        if mid:
            out += f"; during the run also {mid[0].label()}, which {mid[0].when()}"
        return out


def _foreign(p: ComputeProcess) -> Foreign:
    return Foreign(
        p.pid,
        p.uid if isinstance(p.uid, int) else None,
        p.cmdline if isinstance(p.cmdline, str) else None,
        p.used_memory_bytes,
    )


def loads(
    snap: HostSnapshot | None, activity: Sequence[Activity], during: RunSampling | None = None
) -> dict[int, Load]:
    """Every GPU's load from a measurement's activity and the snapshot's process list, and the
    processes the samples during the run saw that neither did. Where the snapshot lists the
    processes (which of them are ours), NVML's count is not needed; where it does not (older
    results, nccl-tests), every process NVML counted is taken as someone else's."""
    out = _at_start(snap, activity)
    if during is None:
        return out
    for g in during.gpus:
        load = out.get(g.index) or Load(g.index, None, (), 0, g.own)
        known = {f.pid for f in load.foreign}
        new = tuple(
            Foreign(p.pid, p.uid, p.command, p.memory_bytes, p, during.duration_s)
            for p in g.foreign
            if p.pid not in known
        )
        if new or g.index not in out:
            out[g.index] = replace(load, foreign=load.foreign + new)
    return out


def _at_start(snap: HostSnapshot | None, activity: Sequence[Activity]) -> dict[int, Load]:
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
