"""A live node of a stalled job: which of its GPUs spin in a collective and which does not. Pure.

A NCCL kernel that waits for a peer polls memory flags: NVML reports the GPU 100 % utilised
while it draws little more than idle power. A GPU doing real work at 100 % draws far more;
an idle one reports low utilisation. On a node where most of the job's GPUs spin, the one
that does not is where its rank is: still computing, idle (its process stuck on the CPU side),
or lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from topodoctor.job.analysis import JobFinding
from topodoctor.model.activity import ActivitySample, GpuActivity

State = Literal["spinning", "computing", "busy", "idle", "lost", "unknown"]
BUSY_UTIL = 90.0  # % utilisation at which a GPU counts as fully busy
IDLE_UTIL = 10.0
SPIN_POWER_SHARE = 0.4  # below this share of its power limit a fully busy GPU is polling, not computing


@dataclass(frozen=True)
class GpuState:
    """One GPU's state over the sampling, and why."""

    index: int
    bus_id: str
    state: State
    why: str
    pids: tuple[int, ...]


def classify(g: GpuActivity) -> GpuState:
    """spinning / computing / busy / idle / lost / unknown, from the medians of the samples."""
    pids = tuple(p for p, _ in g.processes)
    util, power = g.median_util, g.median_power_w
    if g.error:
        return GpuState(g.index, g.bus_id, "lost", f"NVML: {g.error}", pids)
    if util is None:
        return GpuState(g.index, g.bus_id, "unknown", "no utilisation reading", pids)
    share = power / g.power_limit_w if power is not None and g.power_limit_w else None
    drawn = f"{util:.0f} % utilised, {power:.0f} W" if power is not None else f"{util:.0f} % utilised"
    if g.power_limit_w and power is not None:
        drawn += f" of {g.power_limit_w:.0f} W"
    if util >= BUSY_UTIL and share is not None:
        state: State = "spinning" if share < SPIN_POWER_SHARE else "computing"
    elif util >= BUSY_UTIL:
        state = "busy"
    elif util < IDLE_UTIL:
        state = "idle"
    else:
        state = "busy"
    return GpuState(g.index, g.bus_id, state, drawn, pids)


def judge(sampled: ActivitySample, host: str) -> tuple[tuple[GpuState, ...], tuple[JobFinding, ...]]:
    """Each GPU's state, and a finding when the job's GPUs (those with processes) disagree."""
    states = tuple(classify(g) for g in sampled.gpus)
    job = [s for s in states if s.pids or s.state == "lost"]
    spinning = [s for s in job if s.state == "spinning"]
    odd = [s for s in job if s.state != "spinning"]
    where = f" on {host}" if host else ""
    if spinning and odd:
        names = ", ".join(
            f"GPU {s.index} {s.state} ({s.why}; pids {','.join(map(str, s.pids)) or 'none'})" for s in odd
        )
        return states, (
            JobFinding(
                "gpu-not-spinning",
                "error",
                (),
                f"{names} while {'GPU' if len(spinning) == 1 else 'GPUs'} "
                f"{','.join(str(s.index) for s in spinning)}{where} spin in a collective: "
                "that GPU's rank is the one its peers wait for",
                hosts=(host,) if host else (),
            ),
        )
    if spinning:
        return states, (
            JobFinding(
                "gpus-spinning",
                "warning",
                (),
                f"every GPU of the job{where} spins in a collective (utilisation ~100 % at low power): "
                "the rank they wait for is on another node",
                hosts=(host,) if host else (),
            ),
        )
    return states, ()
