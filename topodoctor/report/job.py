"""The job verdict as text for a person (with a timeline of the ranks around a stall), JSON,
and one line for the on-call. Every value from a dump or a host is printed literally."""

from __future__ import annotations

from typing import Any

from topodoctor.core.codec import to_jsonable
from topodoctor.core.pci import long_bus_id
from topodoctor.core.text import plural, printable, truncate
from topodoctor.job.analysis import GroupState, JobFinding
from topodoctor.job.verdict import JobOutcome, hosts_of, where
from topodoctor.model.stamp import stamp_json
from topodoctor.report.terminal import fold, text_width

JOB_SCHEMA_VERSION = 1
LINE_LIMIT = 400
TIMELINE_SEQS = 6


def _why(report: JobOutcome, f: JobFinding) -> str:
    hosts = hosts_of(f, report.places)
    said = [report.health[h].summary() for h in hosts if h in report.health]
    if said:
        return "; ".join(said)
    if not report.health and hosts:
        return f"no health evidence on {', '.join(hosts)} (no results directory given)"
    return ""


def one_line(report: JobOutcome) -> str:
    """``topodoctor JOB FAIL not-enqueued rank 2 (node02, ...): ...; no health evidence on node02``."""
    culprits = report.culprits()
    if culprits:
        f = culprits[0]
        why = _why(report, f)
        # Other evidence naming the same ranks corroborates; only findings elsewhere are "more".
        same = [g for g in culprits[1:] if g.ranks and set(g.ranks) <= set(f.ranks)]
        more = f" (+{len(culprits) - 1 - len(same)} more)" if len(culprits) - 1 > len(same) else ""
        if any(g.kind.startswith("ras-") for g in same):
            more += "; NCCL RAS agrees"
        place = where(f, report.places)
        text = f"topodoctor JOB FAIL {f.kind}{' ' + place if place else ''}: {f.message}{more}" + (
            f"; {why}" if why else ""
        )
    elif report.exit_code == 0:
        warn = next((f for f in report.findings if f.severity == "warning"), None)
        text = "topodoctor JOB OK: " + (
            f"{f'{warn.kind}: {warn.message}' if warn else 'no stall, mismatch or straggler found'}"
            f" ({plural(len(report.ranks), 'rank dump')}, {plural(len(report.groups), 'group')})"
        )
    else:
        text = "topodoctor JOB UNKNOWN: nothing could be judged" + (f" ({report.notes[0]})" if report.notes else "")
    return truncate(printable(text), LINE_LIMIT)


def _timeline(g: GroupState) -> list[str]:
    """Ranks by sequence number around the stall: done, waiting (enqueued), never enqueued, no dump."""
    if g.stall_seq is None:
        return []
    top = max([*g.enqueued.values(), g.stall_seq])
    seqs = list(range(max(1, g.stall_seq - 2), min(top, g.stall_seq + TIMELINE_SEQS - 3) + 1))
    head = "  rank  " + "".join(f"#{s:<7}" for s in seqs)
    lines = [head]
    for r in g.members:
        if r in g.missing:
            cells = ["no dump " for _ in seqs]
        else:
            cells = [
                "done    "
                if s <= g.completed.get(r, -1)
                else ("WAITING " if s <= g.enqueued.get(r, -1) else "------  ")
                for s in seqs
            ]
        lines.append(f"  {r:<5} " + "".join(cells))
    return lines


def text_lines(report: JobOutcome, width: int | None = None) -> list[str]:
    """The report for a person, each line folded to ``width`` columns (the terminal's by default;
    the JSON and the one line keep everything whole)."""
    width = width or text_width()
    folded: list[str] = []
    for i, line in enumerate(_text_lines(report)):
        # The verdict, and a finding's message, continue under their own first word.
        hang = 2 if i == 0 else 8 if line[:1].isupper() and line[:8].rstrip().isupper() else None
        folded += fold(line.rstrip(), width, hang)
    return folded


def _text_lines(report: JobOutcome) -> list[str]:
    out = [one_line(report), ""]
    for f in report.findings:
        out.append(f"{f.severity.upper():7} {f.kind}: {f.message}")
        if f.ranks or f.hosts:
            out.append(f"        where: {where(f, report.places)}")
        why = _why(report, f)
        if why:
            out.append(f"        why: {why}")
        out.extend(f"        {line}" for line in f.detail[:12])
    for g in report.groups:
        tl = _timeline(g)
        if tl:
            out += ["", f"{g.desc or g.name}: members {len(g.members)}, stalled at #{g.stall_seq} {g.stall_op}", *tl]
    for lt in report.lateness:
        out += ["", f"lateness in {lt.group} over {lt.collectives} collectives ({lt.basis}):"]
        out += [
            f"  rank {x.rank}: last in {x.latest}, median {x.median_ms:.1f} ms, p90 {x.p90_ms:.1f} ms" for x in lt.ranks
        ]
    if report.gpus:
        out += ["", "GPUs on this node:"]
        out += [
            f"  GPU {s.index} {long_bus_id(s.bus_id) if s.bus_id else '-'}: {s.state} ({s.why}) "
            f"pids {','.join(map(str, s.pids)) or '-'}"
            for s in report.gpus
        ]
    for host, h in report.health.items():
        out += ["", f"health of {host}: {h.summary()}"]
        out += [f"  {c}" for c in h.causes[:10]]
    out += [f"note: {n}" for n in report.notes]
    return [printable(line) for line in out]


def _finding(report: JobOutcome, f: JobFinding) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "severity": f.severity,
        "ranks": list(f.ranks),
        "hosts": list(hosts_of(f, report.places)),
        "places": [to_jsonable(report.places[r]) for r in f.ranks if r in report.places],
        "group": f.group,
        "seq": f.seq,
        "op": f.op,
        "message": f.message,
        "why": _why(report, f),
        "detail": list(f.detail),
    }


def job_json(report: JobOutcome) -> dict[str, Any]:
    """The report for machines."""
    verdict = {0: "ok", 1: "culprit"}.get(report.exit_code, "unknown")
    return {
        "kind": "job",
        "schema_version": JOB_SCHEMA_VERSION,
        "verdict": verdict,
        "exit_code": report.exit_code,
        "reason": one_line(report),
        "findings": [_finding(report, f) for f in report.findings],
        "ranks": list(report.ranks),
        "groups": [
            {
                "name": g.name,
                "desc": g.desc,
                "members": list(g.members),
                "missing": list(g.missing),
                "enqueued": {str(r): v for r, v in sorted(g.enqueued.items())},
                "completed": {str(r): v for r, v in sorted(g.completed.items())},
                "stall_seq": g.stall_seq,
                "stall_op": g.stall_op,
            }
            for g in report.groups
        ],
        "lateness": to_jsonable(report.lateness),
        "gpus": to_jsonable(report.gpus),
        "health": to_jsonable(report.health),
        "notes": list(report.notes),
        **stamp_json(report),
    }
