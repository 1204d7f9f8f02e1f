"""Everything a job left behind, judged together into one verdict. Pure: no I/O.

The flight recorders say which rank and which collective; the rank map says where it ran;
NCCL's RAS and a live node's GPUs add their own account; the nodes' topodoctor results say why.
Exit codes: 0 nothing wrong found, 1 a finding at or above the fail level (a culprit named, a stall
seen: errors by default), 3 nothing to judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from topodoctor.fleet.rollup import NodeResult
from topodoctor.job.analysis import GroupState, JobFinding, analyse
from topodoctor.job.dumps import RankDump
from topodoctor.job.gpus import GpuState, judge
from topodoctor.job.health import HostHealth, host_health
from topodoctor.job.placement import Place
from topodoctor.job.ras import RasReport
from topodoctor.job.stragglers import Lateness, lateness
from topodoctor.model.activity import ActivitySample
from topodoctor.model.findings import Severity
from topodoctor.model.outcome import CommandOutcome
from topodoctor.model.stamp import Stamped

# The order in which findings explain a stall: a program bug first (it causes the rest), then
# the rank its peers wait for, then what others saw of it.
ORDER = (
    "op-mismatch",
    "dtype-mismatch",
    "size-mismatch",
    "not-enqueued",
    "missing-dump",
    "not-completed",
    "not-started",
    "ras-mismatch",
    "ras-dead",
    "ras-incomplete",
    "ras-error",
    "gpu-not-spinning",
    "late-rank",
    "straggler",
    "stuck",
    "gpus-spinning",
)


@dataclass(frozen=True)
class JobInput:
    """What was read; every part optional but at least one present."""

    dumps: tuple[RankDump, ...] = ()
    places: Mapping[int, Place] = field(default_factory=dict)
    world_size: int | None = None
    ras: RasReport | None = None
    activity: ActivitySample | None = None
    activity_host: str = ""
    nodes: tuple[NodeResult, ...] = ()
    last: int = 200
    late_ms: float = 5.0
    notes: tuple[str, ...] = ()  # unreadable files, a RAS service that did not answer
    fail_level: Severity = "error"  # the lowest severity that makes the verdict exit 1


@dataclass(frozen=True)
class JobOutcome(Stamped, CommandOutcome):
    """The verdict, with what it rests on."""

    findings: tuple[JobFinding, ...]  # type: ignore[assignment]  # a job's own kind of finding
    groups: tuple[GroupState, ...]
    lateness: tuple[Lateness, ...]
    places: Mapping[int, Place]
    health: Mapping[str, HostHealth]
    gpus: tuple[GpuState, ...]
    ras: RasReport | None
    ranks: tuple[int, ...]  # ranks with a dump
    notes: tuple[str, ...]
    judged: bool  # dumps, a RAS answer or a node's GPUs were there to judge
    fail_level: Severity = "error"

    @property
    def not_measured(self) -> tuple[str, ...]:  # type: ignore[override]  # a property over the base's field
        """Nothing to judge: no dump, no RAS answer, no GPU sampled."""
        return () if self.judged else ("nothing to judge: no dump, RAS answer or GPU reading",)

    @property
    def unusable(self) -> tuple[str, ...]:  # type: ignore[override]  # a property over the base's field
        """Nothing: an unreadable file or a RAS that did not answer is a note beside the verdict."""
        return ()

    def culprits(self) -> tuple[JobFinding, ...]:
        """Findings that fail the verdict (errors, or from ``fail_level``): where to look."""
        return self.failing


def _ras_findings(ras: RasReport, world: int | None) -> list[JobFinding]:
    out = []
    for issue in ras.issues:
        global_ranks = issue.comm_size is not None and world is not None and issue.comm_size == world
        ranks = tuple(r.rank for r in issue.culprits if r.rank is not None) if global_ranks else ()
        who = "; ".join(
            (f"rank {r.rank} " if r.rank is not None else "")
            + f"GPU {r.gpu or '?'} process {r.pid or '?'} on {r.host or '?'}"
            + (f" launched {r.launched} ops" if r.launched is not None else "")
            for r in issue.culprits
        )
        size = f" of {issue.comm_size} ranks" if issue.comm_size else ""
        message = f"NCCL RAS: {issue.kind} in communicator {issue.comm or '(job)'}{size}: {who or issue.text[:200]}"
        out.append(
            JobFinding(
                f"ras-{issue.kind.lower()}",
                "error",
                ranks,
                message,
                issue.comm,
                detail=tuple(issue.text.splitlines()[:20]),
                hosts=tuple(dict.fromkeys(r.host for r in issue.culprits if r.host)),
            )
        )
    return out


def hosts_of(f: JobFinding, places: Mapping[int, Place]) -> tuple[str, ...]:
    """The hosts a finding points at: its ranks' from the map (the names the results use), else
    the ones the evidence names itself (RAS gives addresses)."""
    mapped = tuple(dict.fromkeys(places[r].host for r in f.ranks if r in places and places[r].host))
    return mapped or f.hosts


def judge_job(job: JobInput) -> JobOutcome:
    """The job's verdict from everything read."""
    known = set(job.places)
    groups = analyse(job.dumps, known, job.world_size)
    findings: list[JobFinding] = [f for g in groups for f in g.findings]
    late: list[Lateness] = []
    for g in groups:
        if g.stall_seq is None and not g.findings:  # lateness means something only in a job that ran
            got = lateness(g, job.dumps, job.last, job.late_ms)
            if got is not None:
                late.append(got)
                findings.extend(f for f in (got.finding, got.late_once) if f is not None)
    world = job.world_size or (max(len(g.members) for g in groups) if groups else (len(known) or None))
    if job.ras is not None:
        findings.extend(_ras_findings(job.ras, world))
    gpus: tuple[GpuState, ...] = ()
    if job.activity is not None:
        gpus, more = judge(job.activity, job.activity_host)
        findings.extend(more)
    findings.sort(key=lambda f: (ORDER.index(f.kind) if f.kind in ORDER else len(ORDER), f.ranks))
    health: dict[str, HostHealth] = {}
    if job.nodes:
        for f in findings:
            for host in hosts_of(f, job.places):
                health.setdefault(host, host_health(host, job.nodes))
    judged = bool(job.dumps) or job.ras is not None or job.activity is not None
    return JobOutcome(
        tuple(findings),
        groups,
        tuple(late),
        dict(job.places),
        health,
        gpus,
        job.ras,
        tuple(sorted(d.rank for d in job.dumps)),
        job.notes,
        judged,
        job.fail_level,
    )


def where(f: JobFinding, places: Mapping[int, Place]) -> str:
    """``rank 2 (node02, local rank 0, GPU 0000:19:00.0)``; hosts alone when no rank is known."""
    if f.ranks:
        parts = []
        for r in f.ranks[:4]:
            p = places.get(r)
            parts.append(f"rank {r} ({p.describe()})" if p is not None else f"rank {r} (no rank map)")
        more = f" +{len(f.ranks) - 4} more" if len(f.ranks) > 4 else ""
        return ", ".join(parts) + more
    return ", ".join(f.hosts)


def ranks_seen(dumps: Sequence[RankDump]) -> str:
    """``4 ranks`` for the summary."""
    return f"{len(dumps)} rank dump{'s' if len(dumps) != 1 else ''}"
