"""What the flight recorders say, per process group and sequence number. Pure: dumps in,
findings out; no I/O.

A collective completes on no rank until every member has enqueued it, so at a stall the
ranks fall into three sets around the first sequence number S that some rank did not
complete: ranks that never enqueued S (their CPU side stopped: a data loader, an exception, a
Python stall), ranks that enqueued S but did not complete it while peers did (their GPU, NVLink
or NIC side), and ranks without a dump (a dead process or host). Independently, ranks whose op,
dtypes or sizes differ from the majority's at the same sequence number ran a different program
path: NCCL checks none of that (an all_reduce with one rank's tensor a quarter the size
completes without an error) and such a job hangs or computes garbage.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from topodoctor.job.dumps import DumpEntry, RankDump

Severity = Literal["error", "warning", "info"]
# Ops whose tensors must have the same shape on every rank (gather / scatter roots, the *_v
# and all_to_all variants and coalesced groups legitimately differ).
SAME_SHAPE_OPS = frozenset(
    {
        "all_reduce",
        "allreduce",
        "broadcast",
        "_broadcast_oop",
        "reduce",
        "_reduce_oop",
        "all_gather",
        "allgather",
        "_allgather_base",
        "_all_gather_base",
        "all_gather_into_tensor",
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor",
        "barrier",
    }
)
TIMEOUT_SHARE = 1.0  # an op still unfinished when its timeout had passed at dump time had timed out (as torch judges)


@dataclass(frozen=True)
class JobFinding:
    """One thing the job's evidence shows. ``kind`` is a stable name (docs/job.md lists them)."""

    kind: str
    severity: Severity
    ranks: tuple[int, ...]  # the ranks to look at; empty when the evidence names none
    message: str
    group: str = ""
    seq: int | None = None
    op: str = ""
    detail: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()  # where the evidence itself names the hosts (NCCL RAS)


@dataclass(frozen=True)
class GroupState:
    """One process group as the dumps show it."""

    name: str
    desc: str
    members: tuple[int, ...]
    enqueued: Mapping[int, int]  # rank -> last collective seq enqueued
    completed: Mapping[int, int]  # rank -> last collective seq completed
    missing: tuple[int, ...]  # members without a dump
    stall_seq: int | None = None
    stall_op: str = ""
    timed_out: tuple[int, ...] = ()  # ranks whose oldest unfinished op had run past its timeout
    findings: tuple[JobFinding, ...] = field(default=())


def label(name: str, desc: str) -> str:
    """A group as people know it: its description when it has one (default_pg), else its name."""
    return desc if desc and desc != "undefined" else f"group {name}"


def _world(dumps: Sequence[RankDump], extra: Iterable[int], world_size: int | None) -> tuple[int, ...]:
    ranks = {d.rank for d in dumps} | set(extra)
    for d in dumps:
        for g in d.groups:
            if g.ranks and len(g.ranks) > len(ranks):
                ranks |= set(g.ranks)
    if world_size is not None:
        ranks |= set(range(world_size))
    return tuple(sorted(ranks))


def _members(name: str, desc: str, dumps: Sequence[RankDump], world: tuple[int, ...]) -> tuple[int, ...]:
    for d in dumps:
        for g in d.groups:
            if g.name == name and g.ranks:
                return tuple(sorted(g.ranks))
    if desc == "default_pg" or name == "0":
        return world
    return tuple(sorted(d.rank for d in dumps if any(e.pg == name and not e.p2p for e in d.entries)))


def _counters(d: RankDump, name: str, entries: Sequence[DumpEntry]) -> tuple[int, int]:
    enq = max((e.seq for e in entries), default=-1)
    done = max((e.seq for e in entries if e.state == "completed" or e.retired), default=-1)
    for p in d.progress:
        if p.pg == name:
            enq, done = max(enq, p.enqueued), max(done, p.completed)
    return enq, done


def _timed_out(d: RankDump, entries: Sequence[DumpEntry], done: int) -> bool:
    """Whether the rank's oldest unfinished op had run for its timeout when the dump was written."""
    if d.written_ns is None:
        return False
    for e in sorted(entries, key=lambda x: x.seq):
        if e.seq > done and e.created_ns is not None and e.timeout_ms:
            return (d.written_ns - e.created_ns) / 1e6 >= TIMEOUT_SHARE * e.timeout_ms
    return False


def _ranks_text(ranks: Iterable[int]) -> str:
    r = sorted(ranks)
    return ("rank " if len(r) == 1 else "ranks ") + ", ".join(str(x) for x in r)


def _signature(e: DumpEntry, shapes: bool) -> tuple[str, tuple[str, ...], tuple[tuple[int, ...], ...]]:
    return (e.op, e.input_dtypes + e.output_dtypes, (e.input_sizes + e.output_sizes) if shapes else ())


def _outliers(by_rank: Mapping[int, DumpEntry], key: Mapping[int, object]) -> tuple[object, tuple[int, ...]]:
    """The majority's value and the ranks that differ; on a tie, the group of the lowest rank
    stands for the majority (nothing better is known)."""
    counts = Counter(key.values())
    best = max(counts.items(), key=lambda kv: (kv[1], -min(r for r in key if key[r] == kv[0])))[0]
    return best, tuple(sorted(r for r in by_rank if key[r] != best))


def _mismatch(name: str, desc: str, seqs: Mapping[int, Mapping[int, DumpEntry]]) -> JobFinding | None:
    """The first sequence number at which some rank ran something else than its peers."""
    for seq in sorted(seqs):
        by_rank = seqs[seq]
        if len(by_rank) < 2:
            continue
        ops = {r: e.op for r, e in by_rank.items()}
        majority, odd = _outliers(by_rank, ops)
        op = str(majority)
        kind, what = "op-mismatch", "ran {theirs} where peers ran {op}"
        if not odd:
            dtypes = {r: e.input_dtypes + e.output_dtypes for r, e in by_rank.items()}
            _, odd = _outliers(by_rank, dtypes)
            kind, what = "dtype-mismatch", "passed dtypes {theirs} where peers passed {best}"
            key: Mapping[int, object] = dtypes
            if not odd and op in SAME_SHAPE_OPS:
                key = {r: (e.input_sizes, e.output_sizes) for r, e in by_rank.items()}
                _, odd = _outliers(by_rank, key)
                kind, what = "size-mismatch", "passed sizes {theirs} where peers passed {best}"
        else:
            key = ops
        if not odd:
            continue
        best, _ = _outliers(by_rank, key)
        lines = tuple(
            f"rank {r}: {e.op} in {list(map(list, e.input_sizes))} out {list(map(list, e.output_sizes))} "
            f"{','.join(e.input_dtypes)} at {e.frame or '?'}"
            for r, e in sorted(by_rank.items())
        )
        theirs = "; ".join((f"rank {r}: " if len(odd) > 1 else "") + _shown(key[r]) for r in odd)
        message = f"{_ranks_text(odd)} {what.format(theirs=theirs, op=op, best=_shown(best))} at {op} #{seq}"
        return JobFinding(kind, "error", odd, message + f" of {label(name, desc)}", label(name, desc), seq, op, lines)
    return None


def _shown(value: object) -> str:
    """A signature part as people write it: ``in [4] out [4]``, ``Float``, ``all_gather``."""
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, tuple) for v in value):
        ins, outs = value
        if all(isinstance(s, tuple) for s in (*ins, *outs)):
            return f"in {_dims(ins)} out {_dims(outs)}"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _dims(shapes: tuple[tuple[int, ...], ...]) -> str:
    return " ".join("[" + "x".join(str(d) for d in s) + "]" for s in shapes) or "[]"


def analyse_group(name: str, desc: str, dumps: Sequence[RankDump], world: tuple[int, ...]) -> GroupState:
    """The state of one process group at dump time and what it shows."""
    members = _members(name, desc, dumps, world)
    have = {d.rank: d for d in dumps if d.rank in members}
    missing = tuple(r for r in members if r not in have)
    entries = {r: [e for e in d.entries if e.pg == name and not e.p2p] for r, d in have.items()}
    counters = {r: _counters(have[r], name, entries[r]) for r in have}
    enq = {r: c[0] for r, c in counters.items()}
    done = {r: c[1] for r, c in counters.items()}
    seqs: dict[int, dict[int, DumpEntry]] = {}
    for r, es in entries.items():
        for e in es:
            seqs.setdefault(e.seq, {})[r] = e
    gl = label(name, desc)
    findings: list[JobFinding] = []
    timed_out = tuple(r for r in have if _timed_out(have[r], entries[r], done[r]))
    stall, stall_op = _stall_findings(have, enq, done, seqs, entries, gl, timed_out, bool(missing), findings)
    if missing:
        top = max(enq.values(), default=-1)
        op = next((e.op for e in seqs.get(top, {}).values()), "collective")
        why = f"; {_ranks_text(have)} last enqueued {op} #{top}" if have and top >= 0 else ""
        findings.append(
            JobFinding(
                "missing-dump",
                "error",
                missing,
                f"{_ranks_text(missing)} of {gl} left no flight-recorder dump (a dead process or host){why}",
                gl,
                top + 1 if have and top >= 0 else None,
                op if have else "",
            )
        )
    mism = _mismatch(name, desc, seqs)
    if mism is not None:  # ops that could not match explain why they did not complete
        at, consequences = mism.seq or 0, ("not-completed", "not-started", "stuck")
        findings = [mism] + [
            f for f in findings if f.seq is None or f.seq < at or (f.seq == at and f.kind not in consequences)
        ]
    return GroupState(name, desc, members, enq, done, missing, stall, stall_op, timed_out, tuple(findings))


def _stall_findings(
    have: Mapping[int, RankDump],
    enq: Mapping[int, int],
    done: Mapping[int, int],
    seqs: Mapping[int, Mapping[int, DumpEntry]],
    entries: Mapping[int, Sequence[DumpEntry]],
    gl: str,
    timed_out: tuple[int, ...],
    missing: bool,
    findings: list[JobFinding],
) -> tuple[int | None, str]:
    """The first sequence number some rank did not get past, and who is to blame for it.

    A rank that enqueued fewer collectives than its peers is the one they wait for, whatever
    the peers' entries say about completion (gloo marks a timed-out op completed). When all
    enqueued the same, a rank that did not complete the last while peers did is blamed; when
    none completed it, only a timed-out op makes it a stall (else it was in flight at the dump).
    """
    if not have:
        return None, ""
    low, top = min(enq.values()), max(enq.values())
    if low < top:
        stall = low + 1
        behind = tuple(r for r in have if enq[r] == low)
        waiting = tuple(r for r in have if enq[r] >= stall)
        op = next((e.op for e in seqs.get(stall, {}).values()), "")
        frames = tuple(f"rank {r} last enqueued #{enq[r]} at {_last_frame(entries[r]) or '?'}" for r in behind)
        findings.append(
            JobFinding(
                "not-enqueued",
                "error",
                behind,
                f"{_ranks_text(behind)} never enqueued {op or 'collective'} #{stall} of {gl} that "
                f"{_ranks_text(waiting)} entered: its CPU side stopped (data loader, exception, Python stall)",
                gl,
                stall,
                op,
                frames,
            )
        )
        return stall, op
    # An op not yet marked complete at dump time is in flight unless it had run past most of
    # its timeout: completion is recorded asynchronously (NCCL's watchdog polls for it).
    unfinished = tuple(r for r in have if done[r] < top and r in timed_out)
    if not unfinished:
        return None, ""
    stall = min(done[r] for r in unfinished) + 1
    op = next((e.op for e in seqs.get(stall, {}).values()), "")
    where = f"{op or 'collective'} #{stall} of {gl}"
    finished = tuple(r for r in have if done[r] >= stall)
    if finished and not missing:  # a dead peer explains an unfinished op (its peers' errors differ in timing)
        findings.append(
            JobFinding(
                "not-completed",
                "error",
                unfinished,
                f"{_ranks_text(unfinished)} enqueued {where} but never completed it while {_ranks_text(finished)} "
                "did: the GPU, NVLink or NIC side",
                gl,
                stall,
                op,
            )
        )
    elif not missing:
        findings.append(_stuck(unfinished, seqs.get(stall, {}), where, gl, stall, op))
    return stall, op


def _last_frame(entries: Sequence[DumpEntry]) -> str:
    return max(entries, key=lambda e: e.seq).frame if entries else ""


def _stuck(waiting: tuple[int, ...], at: Mapping[int, DumpEntry], where: str, gl: str, seq: int, op: str) -> JobFinding:
    """Every rank enqueued the op and none finished it. With timing on, a rank whose kernel
    never started while its peers' did is the one whose GPU was still busy before it."""
    started = tuple(r for r in waiting if r in at and at[r].state == "started")
    scheduled = tuple(r for r in waiting if r in at and at[r].state == "scheduled")
    if started and scheduled:
        return JobFinding(
            "not-started",
            "error",
            scheduled,
            f"{_ranks_text(scheduled)} enqueued {where} but its GPU never started it while "
            f"{_ranks_text(started)} did: that GPU was still busy (or hung) before it",
            gl,
            seq,
            op,
        )
    return JobFinding(
        "stuck",
        "warning",
        (),
        f"every rank enqueued {where} and none completed it: no rank is behind on the CPU side; "
        "the network or a GPU (see --ras, --live and the nodes' health)",
        gl,
        seq,
        op,
    )


def groups_of(dumps: Sequence[RankDump]) -> tuple[tuple[str, str], ...]:
    """Every process group that holds a collective in some dump: (name, description)."""
    seen: dict[str, str] = {}
    for d in dumps:
        for e in d.entries:
            if not e.p2p:
                seen.setdefault(e.pg, e.pg_desc)
    return tuple(sorted(seen.items(), key=lambda kv: (kv[0] != "0", kv[0])))


def analyse(
    dumps: Sequence[RankDump], known_ranks: Iterable[int] = (), world_size: int | None = None
) -> tuple[GroupState, ...]:
    """Every process group's state and findings. ``known_ranks`` (a rank map) and ``world_size``
    name ranks that should have dumped; a rank beyond every dump is otherwise unknowable."""
    world = _world(dumps, known_ranks, world_size)
    states = [analyse_group(name, desc, dumps, world) for name, desc in groups_of(dumps)]
    if not states and dumps:  # dumps with no collective at all: only missing ranks can be said
        missing = tuple(r for r in world if r not in {d.rank for d in dumps})
        if missing:
            f = JobFinding("missing-dump", "error", missing, f"{_ranks_text(missing)} left no flight-recorder dump")
            states.append(GroupState("0", "default_pg", world, {}, {}, missing, findings=(f,)))
    return tuple(states)
