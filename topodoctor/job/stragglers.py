"""Which rank enters collectives late, in a job that did not hang. Pure.

Over the last N collectives that every member of a group recorded, each rank's lateness is
measured in one of two ways:

- with ``TORCH_NCCL_ENABLE_TIMING=1`` every entry carries the op's GPU time. An op ends on all
  ranks together (nobody finishes before the last one arrives), so a rank that arrived later
  waited less: its lateness is the longest duration of that op minus its own. Each rank's
  times come from its own clock, so clock offsets between hosts cancel out;
- otherwise from ``time_created_ns``, the wall-clock time the rank enqueued the op, minus the
  earliest rank's: valid only as far as the hosts' clocks agree (NTP: about a millisecond).

The straggler is the rank that is latest most often, named only when it is latest in at
least half of the collectives and its median lateness is above the threshold.

One very late entry hides in a median: a rank that entered one collective seconds after its
peers (beyond their timeout, so they timed out and dumped, or far beyond the group's usual
spread) is a ``late-rank`` culprit with its lateness, whatever its median. That is judged on the
enqueue times of every matched collective, timed or not: the peers of a late entry often never
finished the op, so it carries no GPU time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from topodoctor.core.stats import median
from topodoctor.job.analysis import GroupState, JobFinding, label
from topodoctor.job.dumps import DumpEntry, RankDump

Basis = Literal["gpu-time", "enqueue-time"]
# One entry this late is never clock noise or a busy moment: NTP keeps hosts within milliseconds, and
# a training step's usual spread is tens of ms. 20 x the group's usual latest-rank lateness (its p90)
# where that is larger.
LATE_ONCE_MS = 1000.0
LATE_ONCE_SPREAD = 20.0


@dataclass(frozen=True)
class RankLateness:
    """How late one rank entered the group's collectives."""

    rank: int
    latest: int  # collectives in which it was the last to arrive (beyond the threshold)
    median_ms: float
    p90_ms: float


@dataclass(frozen=True)
class Lateness:
    """The ranks of one group, over its last ``collectives`` matched collectives."""

    group: str
    basis: Basis
    collectives: int
    ranks: tuple[RankLateness, ...]
    finding: JobFinding | None
    late_once: JobFinding | None = None  # one collective entered far later than its peers


def _matched(state: GroupState, dumps: Sequence[RankDump], last: int) -> list[dict[int, DumpEntry]]:
    by_seq: dict[int, dict[int, DumpEntry]] = {}
    for d in dumps:
        if d.rank not in state.members:
            continue
        for e in d.entries:
            if e.pg == state.name and not e.p2p:
                by_seq.setdefault(e.seq, {})[d.rank] = e
    full = [by_seq[s] for s in sorted(by_seq) if len(by_seq[s]) == len(state.members) and len(state.members) > 1]
    return full[-last:] if last > 0 else full


def _lateness(row: dict[int, DumpEntry], basis: Basis) -> dict[int, float]:
    if basis == "gpu-time":
        longest = max(e.duration_ms or 0.0 for e in row.values())
        return {r: longest - (e.duration_ms or 0.0) for r, e in row.items()}
    first = min(e.created_ns or 0 for e in row.values())
    return {r: ((e.created_ns or 0) - first) / 1e6 for r, e in row.items()}


def _p90(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(0.9 * len(s)))]


def late_once(rows: Sequence[dict[int, DumpEntry]], group: str) -> JobFinding | None:
    """The latest single entry of the matched collectives, as a ``late-rank`` finding when it came
    after the peers' timeout or LATE_ONCE_MS and LATE_ONCE_SPREAD x the usual spread."""
    events: list[tuple[float, int, DumpEntry, int | None]] = []
    for row in rows:
        if len(row) < 2 or any(e.created_ns is None for e in row.values()):
            continue
        late = _lateness(row, "enqueue-time")
        r = max(late, key=lambda k: late[k])
        peers = [e.timeout_ms for q, e in row.items() if q != r and e.timeout_ms]
        events.append((late[r], r, row[r], min(peers) if peers else None))
    if not events:
        return None
    worst = max(events, key=lambda ev: ev[0])
    ms, rank, entry, timeout = worst
    rest = [ev[0] for ev in events if ev is not worst]
    usual = _p90(rest) if rest else 0.0
    if timeout is not None and ms >= timeout:
        why = f"past its peers' {timeout / 1000:g} s timeout"
    elif ms >= LATE_ONCE_MS and ms >= LATE_ONCE_SPREAD * usual:
        why = f"the group's usual spread is {usual:.1f} ms"
    else:
        return None
    return JobFinding(
        "late-rank",
        "error",
        (rank,),
        f"rank {rank} entered {entry.op} #{entry.seq} of {group} {ms / 1000:.1f} s after the first rank ({why}; "
        f"median over {len(events)} collectives hides it)",
        group,
        entry.seq,
        entry.op,
        (f"called from {entry.frame}",) if entry.frame else (),
    )


def lateness(state: GroupState, dumps: Sequence[RankDump], last: int = 200, late_ms: float = 5.0) -> Lateness | None:
    """The group's lateness table and, when one rank stands out, a ``straggler`` finding; a rank that
    entered one collective very late, a ``late-rank`` finding."""
    rows = _matched(state, dumps, last)
    if not rows:
        return None
    once = late_once(rows, label(state.name, state.desc))
    # The last op may have no duration yet (still running, or its completion not yet seen).
    timed = [row for row in rows if all(e.duration_ms is not None for e in row.values())]
    if len(timed) >= max(2, len(rows) // 2):
        basis: Basis = "gpu-time"
        rows = timed
    elif all(e.created_ns is not None for row in rows for e in row.values()):
        basis = "enqueue-time"
    else:
        return Lateness(label(state.name, state.desc), "enqueue-time", 0, (), None, once) if once else None
    per_rank: dict[int, list[float]] = {r: [] for r in state.members}
    latest: dict[int, int] = dict.fromkeys(state.members, 0)
    for row in rows:
        late = _lateness(row, basis)
        for r, v in late.items():
            per_rank[r].append(v)
        last_rank = max(late, key=lambda r: late[r])
        if late[last_rank] >= late_ms:
            latest[last_rank] += 1
    table = tuple(RankLateness(r, latest[r], round(median(v), 3), round(_p90(v), 3)) for r, v in per_rank.items())
    worst = max(table, key=lambda x: (x.latest, x.median_ms))
    gl = label(state.name, state.desc)
    finding = None
    if worst.latest * 2 >= len(rows) and worst.median_ms >= late_ms:
        others = [x.median_ms for x in table if x.rank != worst.rank]
        lead = worst.median_ms - (median(others) if others else 0.0)
        finding = JobFinding(
            "straggler",
            "error",
            (worst.rank,),
            f"rank {worst.rank} entered {worst.latest} of the last {len(rows)} collectives of {gl} last, "
            f"median {worst.median_ms:.1f} ms behind the first rank ({lead:.1f} ms more than the others; "
            f"{'GPU time' if basis == 'gpu-time' else 'enqueue time, clocks assumed in sync'})",
            gl,
            detail=tuple(
                f"rank {x.rank}: last in {x.latest}, median {x.median_ms:.1f} ms, p90 {x.p90_ms:.1f} ms" for x in table
            ),
        )
    return Lateness(gl, basis, len(rows), table, finding, once)
