"""The judgement of a user's evidence (``topodoctor diagnose``): each figure measured against what this
hardware should give (evidence_expect.py), and where it falls short, the cause joined from everything
the evidence shows, ranked by how much of the shortfall it explains (rank.py); where it does not, the
answer that the run is normal for this hardware, with the figure expected. Causes the evidence shows
without a figure (a log alone) are findings of their own."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace

from topodoctor.core.text import human_size
from topodoctor.diagnosis.evidence_causes import fallback_causes, gpu_causes, path_causes
from topodoctor.diagnosis.evidence_causes_net import (
    Swept,
    network_causes,
    one_gpu_slow,
    setting_causes,
    sweep_cause,
    version_causes,
)
from topodoctor.diagnosis.evidence_codes import BY_CODE
from topodoctor.diagnosis.evidence_expect import (
    BANDWIDTH_BOUND_BYTES,
    NORMAL_SHARE,
    Expectation,
    copy_nominal,
    expect_collective,
)
from topodoctor.diagnosis.evidence_facts import Facts, Measured, Quote, facts_of
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_normal import normal_findings, reasons
from topodoctor.diagnosis.evidence_read import read_findings
from topodoctor.diagnosis.rank import best_cause
from topodoctor.model.evidence import CopyMatrix, Evidence
from topodoctor.model.findings import NOT_FOUND, SEVERITY_ORDER, Cause, Finding, Severity
from topodoctor.topology.graph import pcie_gbps

# Where the evidence shows neither the pair's links nor the GPU's model: the slowest link a GPU trains to at
# full width (Gen3 x16), so only a copy no healthy x16 GPU gives is a symptom (staged copies reach it too).
FLOOR_LINK = (pcie_gbps(3, 16) or 15.76, "the link rate: PCIe Gen3 x16 at least (the GPUs' model and link not shown)")
COPY_LOW = 0.6  # a copy under this share of its path's nominal rate (healthy: 0.82 NVLink, 0.88 PCIe on H200)
# Causes a log or listing shows on its own, reported even without a figure to hold them against.
STANDING = ("TD023", "TD024", "TD025", "TD026", "TD028", "TD029", "TD030", "TD031", "TD034", "TD035", "TD036", "TD037",
            "TD039")  # fmt: skip
SETTINGS_ONLY = ("TD036",)
FALLBACK_FIX = BY_CODE["TD022"].how
# What a cause standing on its own is about, where its lead names no GPU or host of its own.
SUBJECTS = {"TD023": "transport", "TD024": "transport", "TD034": "transport", "TD025": "network", "TD026": "network",
            "TD035": "network", "TD028": "topology", "TD029": "p2p", "TD036": "settings",
            "TD037": "nccl-version"}  # fmt: skip


def judge(ev: Evidence) -> tuple[Finding, ...]:
    """Findings on everything the evidence shows: what each piece showed (TD980, TD981), then causes
    (warning, error), "normal for this hardware" (info) and what could not be judged, worst first."""
    return read_findings(ev) + judge_facts(facts_of(ev))


def _finding(code: str, subject: str, message: str, fix: str, evidence: Mapping[str, object],
             severity: Severity | None = None, cause: Cause | None = None) -> Finding:  # fmt: skip
    c = BY_CODE[code]
    return Finding(code, c.name, severity or c.severity, subject, message, fix, dict(evidence), cause)


def _causes(f: Facts, sym: Symptom | None) -> Leads:
    out = Leads()
    fallback_causes(f, sym, out)
    gpu_causes(f, sym, out)
    path_causes(f, sym, out)
    network_causes(f, sym, out)
    setting_causes(f, sym, out)
    version_causes(f, sym, out)
    one_gpu_slow(f, out)
    return out


def _explain(f: Facts, sym: Symptom) -> Finding:
    leads = _causes(f, sym)
    symptom = {
        "measured_gbps": round(sym.measured_gbps, 1),
        "expected_gbps": round(sym.expected_gbps, 1),
        "basis": sym.basis,
        "size_bytes": sym.size_bytes,
        "seen_in": str(sym.quote),
    }
    cause = best_cause((ld.candidate for ld in leads.leads), sym.expected_gbps, sym.measured_gbps,
                       leads.ruled_out, FALLBACK_FIX, symptom)  # fmt: skip
    size = human_size(sym.size_bytes) if sym.size_bytes else ""
    what = "busbw" if sym.kind == "collective" else "copies"
    head = f"{sym.subject} {what} {sym.measured_gbps:.1f} GB/s" + (f" at {size}" if size else "")
    head += f" is {sym.measured_gbps / sym.expected_gbps:.2f} of the {sym.expected_gbps:.0f} GB/s this hardware gives"
    head += f" ({sym.basis})"
    if not cause.found:
        post = leads.decide[:2]
        cause.evidence["post"] = post
        tail = f" ({NOT_FOUND}; to decide, post {' and '.join(post)})" if post else f" ({NOT_FOUND})"
        return _finding("TD022", sym.subject, head + tail, FALLBACK_FIX, symptom, cause=cause)
    lead = next(ld for ld in leads.leads if ld.candidate.what == cause.what)
    cause.evidence["lines"] = [str(q) for q in lead.lines]
    cause.evidence["post"] = leads.decide[:2]
    code = BY_CODE[lead.code]
    # a cause of a shortfall is never only information: a code that is info when it explains a normal
    # figure (the topology's reason) is a warning when it explains a short one
    severity = lead.severity or ("warning" if code.severity == "info" and "warning" in code.also else None)
    return _finding(lead.code, sym.subject, f"{cause.what}: {head}", cause.fix, symptom, severity, cause)


def _groups(f: Facts) -> list[Measured]:
    """Each run's largest size per op (a sweep's runs apart by their hosts)."""
    best: dict[tuple[str, tuple[str, ...], str], Measured] = {}
    for m in f.measured:
        key = (m.op, m.rank_hosts, m.quote.where.split(":")[0])
        if key not in best or m.size_bytes > best[key].size_bytes:
            best[key] = m
    return list(best.values())


def _sweep_finding(found: Swept, runs: list[tuple[frozenset[str], float, Quote]]) -> Finding:
    """TD038: the node a sweep's slow pairs point to, with the figures and the slow pairs it leaves."""
    best = max(b for _, b, _ in runs)
    mine = [runs[k][1] for k in found.slow]
    figures = f"{min(mine):g}-{max(mine):g}" if min(mine) != max(mine) else f"{mine[0]:g}"
    if found.how == "common":
        msg = f"node {found.node} is in every slow pair of the sweep ({len(found.slow)} of {len(runs)} runs"
    else:
        msg = f"every pair with node {found.node} is slow ({len(found.slow)} of {len(runs)} runs"
    msg += f", busbw {figures} GB/s against {best:g})"
    if found.partners:
        msg += f", while {', '.join(found.partners)} run at full rate with other nodes"
    for k in found.apart:
        hosts, b, _ = runs[k]
        msg += f"; {'/'.join(sorted(hosts))} ({b:g}) is slow apart from it (neither node in another run)"
    ev = {"node": found.node, "slow_runs": [str(runs[k][2]) for k in found.slow],
          "other_slow_runs": [str(runs[k][2]) for k in found.apart]}  # fmt: skip
    return _finding("TD038", f"host:{found.node}", msg, BY_CODE["TD038"].how, ev)


def _collectives(f: Facts) -> tuple[list[Symptom], list[tuple[Measured, Expectation]], list[Finding]]:
    symptoms, normal, other = [], [], []
    runs = _groups(f)
    two_node = [m for m in runs if len(set(m.rank_hosts)) == 2 and m.size_bytes >= BANDWIDTH_BOUND_BYTES]
    swept = [(frozenset(m.rank_hosts), m.busbw_gbps, m.quote) for m in two_node]
    swept += [(frozenset((p.a, p.b)), p.busbw_gbps, q) for p, q in f.sweeps]
    found = sweep_cause([(h, b) for h, b, _ in swept])
    if found is not None:
        other.append(_sweep_finding(found, swept))
        taken = {str(swept[k][2]) for k in found.slow}  # a slow pair apart from the node is judged on its own
        runs = [m for m in runs if str(m.quote) not in taken]
    for m in runs:
        if m.size_bytes < BANDWIDTH_BOUND_BYTES:
            if not any(r.op == m.op and r.size_bytes >= BANDWIDTH_BOUND_BYTES for r in runs):
                msg = f"{m.op} not judged: its largest size, {human_size(m.size_bytes)}, is latency-bound "
                msg += f"(bandwidth decides from {human_size(BANDWIDTH_BOUND_BYTES)}: run up to 1G, -e 1G)"
                other.append(_finding("TD022", m.op, msg, BY_CODE["TD022"].how, {"size_bytes": m.size_bytes}, "info"))
            continue
        if not m.nranks and not m.rank_hosts:
            # a table without its header: how many ranks on how many nodes is not shown, and a guess of one
            # node would hold a multi-node run to NVLink
            msg = f"{m.op} busbw {m.busbw_gbps:.1f} GB/s not judged: the table comes without its `Using devices` "
            msg += "lines (how many ranks on how many nodes); post the whole output"
            other.append(_finding("TD022", m.op, msg, BY_CODE["TD022"].how, {"measured_gbps": m.busbw_gbps}, "info"))
            continue
        if (m.nranks or len(m.rank_hosts)) == 1:
            # nccl-tests' busbw of one rank is 0 by definition: nothing crosses a link
            msg = f"{m.op} not judged: one rank moves no data between GPUs (busbw is 0 by definition); "
            msg += "run it on two GPUs or more (-g N, or one process per GPU)"
            other.append(_finding("TD022", m.op, msg, BY_CODE["TD022"].how, {"ranks": 1}, "info"))
            continue
        exp = expect_collective(f, m)
        if exp is None:
            msg = f"{m.op} busbw {m.busbw_gbps:.1f} GB/s not judged: the evidence does not show the GPUs' model "
            msg += "or links (post `nvidia-smi topo -m` and `nvidia-smi -L`)"
            other.append(_finding("TD022", m.op, msg, BY_CODE["TD022"].how, {"measured_gbps": m.busbw_gbps}, "info"))
        elif m.busbw_gbps >= NORMAL_SHARE * exp.busbw_gbps:
            normal.append((m, exp))
        else:
            nodes = m.nodes or len(set(m.rank_hosts)) or 1
            gpus = m.run_gpus or (tuple(range(exp.layout.gpus)) if exp.layout is not None and nodes == 1 else ())
            symptoms.append(Symptom("collective", m.op, m.busbw_gbps, exp.busbw_gbps, exp.basis, m.size_bytes,
                                    nodes, m.quote, m.nranks or 0, gpus))  # fmt: skip
    return symptoms, normal, other


def _copies(f: Facts) -> tuple[list[Symptom], list[tuple[str, float, float, str]]]:
    symptoms, normal = [], []
    for c in f.copies:
        if c.unit != "GB/s" or c.p2p is False or c.direction == "latency" or "host" in c.rows:
            continue
        worst: tuple[float, str, float, float, str] | None = None
        for i, r in enumerate(c.rows):
            for j, col in enumerate(c.columns):
                v = c.values[i][j] if i < len(c.values) and j < len(c.values[i]) else None
                if r == col or v is None or not (r.isdigit() and col.isdigit()):
                    continue
                nom = copy_nominal(f, int(r), int(col)) or FLOOR_LINK
                rate = nom[0] * (2 if both_ways(c) else 1)
                if worst is None or v / rate < worst[0]:
                    worst = (v / rate, f"GPU{r}-GPU{col}", v, rate, nom[1])
        if worst is None:
            continue
        share, subject, v, rate, basis = worst
        label = f"{c.tool} {c.testcase}"
        if share < COPY_LOW:
            q = f"{f.where.get(c.piece, c.tool)}: {label}"
            symptoms.append(Symptom("copy", subject, v, rate * 0.82, basis + "; copies reach about 0.82 of it", 0, 1,
                                    Quote(q)))  # fmt: skip
        elif basis != FLOOR_LINK[1]:  # above the floor says only that no x16 link is broken, not that all is well
            normal.append((label, v, rate, basis))
    return symptoms, normal


def both_ways(c: CopyMatrix) -> bool:
    """Whether a matrix's figures count both directions together: p2pBandwidthLatencyTest's bidirectional
    ones and nvbandwidth's "Total"; nvbandwidth's Read1 / Read2 (Write1 / 2) of a bidirectional testcase are
    one direction each, while the other runs (389 GB/s each, 779 total, on the H200 hosts)."""
    if c.direction != "bidirectional":
        return False
    return not (c.tool == "nvbandwidth" and re.search(r"(read|write)[12]\b|(read|write)[12]$", c.testcase.lower()))


def _dedupe(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    seen: set[tuple[str, str]] = set()
    out = []
    for x in findings:
        if (x.code, x.subject) not in seen:
            seen.add((x.code, x.subject))
            out.append(x)
    return tuple(sorted(out, key=lambda x: (-SEVERITY_ORDER[x.severity], x.code, x.subject)))


def judge_facts(f: Facts) -> tuple[Finding, ...]:
    """The judgement of facts however they were gathered (``judge`` for a user's evidence)."""
    coll, normal, out = _collectives(f)
    copy_syms, copy_normal = _copies(f)
    explained = [_explain(f, s) for s in coll + copy_syms]
    out += explained
    measured = bool(coll or normal or copy_syms or copy_normal)
    codes = {x.code for x in out}
    for ld in _causes(f, None).leads:
        # a misconfiguration the evidence shows is said even beside a figure; a setting that caps NCCL only
        # where no figure shows it did no harm
        if ld.code in STANDING and ld.code not in codes and not (measured and ld.code in SETTINGS_ONLY):
            c = ld.candidate
            ev = {**c.evidence, "lines": [str(q) for q in ld.lines]}
            subject = ld.subject or SUBJECTS.get(ld.code, ld.code)
            out.append(_finding(ld.code, subject, c.what, c.fix, ev, ld.severity))
            codes.add(ld.code)
    if f.hosts and not f.measured and not any(x.severity != "info" for x in out):
        msg = "the run's header names its GPUs but no figures follow: nothing to judge (post the whole table, with "
        msg += "`nvidia-smi topo -m` and NCCL_DEBUG=INFO output)"
        out.append(_finding("TD022", "figures", msg, BY_CODE["TD022"].how, {"hosts": list(f.hosts)}, "info"))
    out += normal_findings(f, normal, copy_normal, has_cause=any(x.severity != "info" for x in out))
    out += reasons(f, normal)  # TD033 (GeForce) whenever several of its GPUs are shown
    if any(x.code == "TD022" and x.severity == "warning" for x in out):
        # a shortfall the missing P2P does not explain: it stays said, as information, not as the cause
        out = [replace(x, severity="info") if x.code == "TD033" and x.cause is None else x for x in out]
    return _dedupe(out)
