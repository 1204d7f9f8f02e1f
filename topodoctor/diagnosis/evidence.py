"""The judgement of a user's evidence (``topodoctor diagnose``): each figure measured against what this
hardware should give (evidence_expect.py), and where it falls short, the cause joined from everything
the evidence shows, ranked by how much of the shortfall it explains (rank.py); where it does not, the
answer that the run is normal for this hardware, with the figure expected. Causes the evidence shows
without a figure (a log alone) are findings of their own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from topodoctor.core.text import human_size
from topodoctor.diagnosis.evidence_asks import (
    asks_first,
    candidates,
    described_host,
    differing_averages,
    gdr_unshown,
    split_launch,
    unmeasured_host,
    unshown_network,
    version_only,
)
from topodoctor.diagnosis.evidence_causes import fallback_causes, gpu_causes, nvlink_islands, path_causes
from topodoctor.diagnosis.evidence_causes_net import (
    Swept,
    network_causes,
    one_gpu_slow,
    setting_causes,
    sweep_cause,
    version_causes,
)
from topodoctor.diagnosis.evidence_codes import BY_CODE
from topodoctor.diagnosis.evidence_copies import host_copies, local_copies, peer_copies
from topodoctor.diagnosis.evidence_dips import dip_findings
from topodoctor.diagnosis.evidence_expect import (
    BANDWIDTH_BOUND_BYTES,
    NORMAL_SHARE,
    PostedExpectation,
    expect_collective,
)
from topodoctor.diagnosis.evidence_facts import Facts, Measured, facts_of, path_class
from topodoctor.diagnosis.evidence_gdr_said import gdr_said_findings, gdr_slower_findings
from topodoctor.diagnosis.evidence_header import HEADER, place
from topodoctor.diagnosis.evidence_horovod import build_findings
from topodoctor.diagnosis.evidence_latency import latency_bound_message
from topodoctor.diagnosis.evidence_launch import separate_runs
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_mixed import mixed_findings
from topodoctor.diagnosis.evidence_nic_links import nic_link_causes
from topodoctor.diagnosis.evidence_nics import nic_causes, port_notes
from topodoctor.diagnosis.evidence_normal import normal_findings, reasons
from topodoctor.diagnosis.evidence_nvlink_absent import nvlink_absent
from topodoctor.diagnosis.evidence_one_process import latency_findings
from topodoctor.diagnosis.evidence_osu import staged_findings
from topodoctor.diagnosis.evidence_pcie_said import narrow_slot_findings
from topodoctor.diagnosis.evidence_power import power_findings
from topodoctor.diagnosis.evidence_prose import judge_prose
from topodoctor.diagnosis.evidence_read import read_findings
from topodoctor.diagnosis.evidence_regressions import nvls_across_nodes
from topodoctor.diagnosis.evidence_scaling import scaling_findings
from topodoctor.diagnosis.evidence_search import search_causes, search_findings, searched_of
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.evidence_stacks import other_stack_asks
from topodoctor.diagnosis.evidence_words import (
    one_gpu_each_findings,
    one_rank_waits_findings,
    version_slower_findings,
)
from topodoctor.diagnosis.rank import best_cause
from topodoctor.model.evidence import SAID_SETTING, SAID_WITH_SLOWDOWN, Evidence
from topodoctor.model.findings import NOT_FOUND, SEVERITY_ORDER, Cause, Finding, Severity

# AMD's GPUs (Instinct, ROCm, xGMI) are not in the model table: what NVIDIA hardware would explain is not judged
AMD_NOTE = ("not judged: the GPUs are AMD's (ROCm, xGMI), whose links and rates topodoctor's NVIDIA model table does "
            "not hold; compare with AMD's own figures for the part")  # fmt: skip
# Causes a log or listing shows on its own, reported even without a figure to hold them against.
STANDING = ("TD023", "TD024", "TD025", "TD026", "TD028", "TD029", "TD030", "TD031", "TD034", "TD035", "TD036", "TD037",
            "TD039", "TD991", "TD993")  # fmt: skip
SETTINGS_ONLY = ("TD036",)
FALLBACK_FIX = BY_CODE["TD022"].how
CEILING_FIX = (
    "Nothing to fix in NCCL: between nodes a run tops out at the active ports' rate; more ports, or faster links, "
    "raise it."
)
# What a cause standing on its own is about, where its lead names no GPU or host of its own.
SUBJECTS = {"TD023": "transport", "TD024": "transport", "TD034": "transport", "TD025": "network", "TD026": "network",
            "TD035": "network", "TD028": "topology", "TD029": "p2p", "TD036": "settings",
            "TD037": "nccl-version"}  # fmt: skip


def judge(ev: Evidence) -> tuple[Finding, ...]:
    """Findings on everything the evidence shows: what each piece showed (TD980, TD981), then causes
    (warning, error), "normal for this hardware" (info) and what could not be judged, worst first."""
    dips = tuple(_finding("TD996", subject, msg, BY_CODE["TD996"].how, said, sev)
                 for sev, subject, msg, said in dip_findings(ev))  # fmt: skip
    f = replace(facts_of(ev), searched=searched_of(ev))
    found = read_findings(ev) + dips + judge_facts(f)
    if any(p.amd for p in f.prose) and f.model is None and not f.names:  # AMD's GPUs, no NVIDIA one shown
        found = tuple(replace(x, severity="info", message=f"{x.message} ({AMD_NOTE})") if x.severity in
                      ("warning", "error") else x for x in found)  # fmt: skip
    return found


def _finding(code: str, subject: str, message: str, fix: str, evidence: Mapping[str, object],
             severity: Severity | None = None, cause: Cause | None = None) -> Finding:  # fmt: skip
    c = BY_CODE[code]
    return Finding(code, c.name, severity or c.severity, subject, message, fix, dict(evidence), cause)


def _said_only(code: str, lines: tuple[Quote, ...], severity: Severity | None, alone: bool = False) -> Severity | None:
    """A setting on the reporter's word alone: beside a figure it shows, a warning at most; with no figure
    (``alone``), information: reporters list the settings they tried as often as the ones the slow run had."""
    if not lines or not all(q.text.startswith(SAID_SETTING) for q in lines):
        return severity
    if alone:  # unless the sentence says the slowdown came with it: the reporter's own run with and without
        return "warning" if all(q.text.startswith(SAID_WITH_SLOWDOWN) for q in lines) else "info"
    return "warning" if (severity or BY_CODE[code].severity) == "error" else severity


def _causes(f: Facts, sym: Symptom | None) -> Leads:
    out = Leads()
    fallback_causes(f, sym, out)
    gpu_causes(f, sym, out)
    path_causes(f, sym, out)
    network_causes(f, sym, out)
    nic_causes(f, sym, out)
    setting_causes(f, sym, out)
    version_causes(f, sym, out)
    search_causes(f, sym, out)
    one_gpu_slow(f, out)
    nvlink_absent(f, sym, out)
    nic_link_causes(f, sym, out)
    nvls_across_nodes(f, sym, out)
    return out


def _explain(f: Facts, sym: Symptom, said: bool = False) -> Finding:
    """The symptom with its cause, or the candidates; ``said``: the figure is the reporter's words."""
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
        ranked = candidates(f, sym)
        post = list(dict.fromkeys(asks_first(ranked) + leads.decide))[:2]  # first: what tells the likeliest apart
        cause.evidence["post"] = post
        cause.evidence["candidates"] = [f"{w} ({p})" for _, w, p in ranked]
        tail = f" ({NOT_FOUND}; to decide, post first {' and then '.join(post)})" if post else f" ({NOT_FOUND})"
        if ranked:
            tail += "; cannot tell among: " + "; ".join(f"{w} (post {p})" for _, w, p in ranked)
        return _finding("TD022", sym.subject, head + tail, FALLBACK_FIX, symptom, cause=cause)
    lead = next(ld for ld in leads.leads if ld.candidate.what == cause.what)
    cause.evidence["lines"] = [str(q) for q in lead.lines]
    cause.evidence["post"] = leads.decide[:2]
    code = BY_CODE[lead.code]
    # a cause of a shortfall is never only information: a code that is info when it explains a normal
    # figure (the topology's reason) is a warning when it explains a short one
    severity = lead.severity or ("warning" if code.severity == "info" and "warning" in code.also else None)
    if said:  # the figure and the setting both on the reporter's word: no tool's output shows the harm
        severity = _said_only(lead.code, lead.lines, severity)
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


def _collectives(f: Facts) -> tuple[list[Symptom], list[tuple[Measured, PostedExpectation]], list[Finding]]:
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
                msg = latency_bound_message(f, m) + _run_path(f, m)
                other.append(_finding("TD022", m.op, msg, BY_CODE["TD022"].how, {"size_bytes": m.size_bytes}, "info"))
            continue
        if not m.nranks and not m.rank_hosts:
            # a table without its header: placed by what else the evidence shows, else its header asked for
            placed, msg = place(f, m)
            if placed is None:
                ev = {"measured_gbps": m.busbw_gbps, "post": [HEADER]}
                other.append(_finding("TD022", m.op, msg, BY_CODE["TD022"].how, ev, "info"))
                continue
            m = placed
        if (m.nranks or len(m.rank_hosts)) == 1:
            # nccl-tests' busbw of one rank is 0 by definition: nothing crosses a link
            msg = f"{m.op} not judged: one rank moves no data between GPUs (busbw is 0 by definition); "
            msg += "run it on two GPUs or more (-g N, or one process per GPU)"
            fix = "Run the test again on two GPUs or more (`-g 2`, or `mpirun -np 2` with `-g 1`) and post that."
            other.append(_finding("TD022", m.op, msg, fix, {"ranks": 1}, "info"))
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


def _run_path(f: Facts, m: Measured) -> str:
    """What topo -m says of the run's GPUs (by the bus ids of its header, or CUDA_VISIBLE_DEVICES of its
    one launch line), where their pairs cross the sockets or go through the host bridge."""
    gpus = m.run_gpus
    visible = {ln.gpus for ln in f.launches if ln.gpus and ln.program}
    if not gpus and len(visible) == 1:
        given = visible.pop().split(",")
        gpus = tuple(int(g) for g in given) if all(g.strip().isdigit() for g in given) else ()
    pairs = [(a, b, lb) for (a, b), lb in f.links.items() if a in gpus and b in gpus]
    far = [(a, b, lb) for a, b, lb in pairs if path_class(lb) in ("SYS", "NODE", "PHB")]
    if not far:
        return ""
    a, b, lb = far[0]
    where = "cross the CPU sockets (SYS)" if path_class(lb) == "SYS" else f"meet only through the host ({lb})"
    return f"; the run's GPU{a} and GPU{b} {where}: NCCL stages their traffic through host memory (SHM) by default"


def _islands(f: Facts, measured: bool) -> list[Finding]:
    """TD032 on its own, where no figure was measured: NVLink joins the GPUs in groups only, so a job over
    more than one group runs at the PCIe hop; which GPUs make a group is what placing a job needs."""
    groups = nvlink_islands(f)
    if not groups or measured:
        return []
    named = ", ".join("-".join(f"GPU{g}" for g in grp) for grp in groups)
    others = sorted({path_class(lb) for lb in f.links.values() if path_class(lb) != "NV"})
    kind = "pairs" if all(len(g) == 2 for g in groups) else "groups"
    msg = f"NVLink joins the GPUs in {kind} only ({named}); every other pair goes over PCIe ({', '.join(others)}): "
    msg += "a job on GPUs of two NVLink pairs, or a ring over all of them, runs at the PCIe hop's rate. Give a "
    msg += "2-GPU job an NVLinked pair (CUDA_VISIBLE_DEVICES, or the scheduler's NVLink-aware GPU binding)"
    lines = [str(f.links_quote)] if f.links_quote else []
    return [_finding("TD032", "nvlink", msg, BY_CODE["TD032"].how, {"groups": [list(g) for g in groups],
                     "lines": lines}, "warning")]  # fmt: skip


def _stated_judged(findings: Iterable[Finding]) -> bool:
    """A stated figure judged (normal, or not telling busbw from algbw): its own finding answers the question,
    so the host described adds no warning."""
    return any((x.code == "TD021" and x.subject != "p2p") or (x.code == "TD022" and "measured_gbps" in x.evidence)
               for x in findings)  # fmt: skip


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
    copy_syms, copy_normal = peer_copies(f)
    host_syms, host_normal = host_copies(f)
    copy_syms += host_syms
    copy_normal += host_normal
    stated = judge_prose(f, bool(f.measured or f.averages or f.copies or f.sweeps))  # the reporter's own figure
    explained = [_explain(f, s) for s in coll + copy_syms] + [_explain(f, s, True) for s in stated.symptoms]
    out += explained + list(stated.findings)
    out += [_finding("TD022", subject, msg, fix, ev, "info") for subject, msg, fix, ev in local_copies(f)]
    measured = bool(coll or normal or copy_syms or copy_normal or stated.symptoms)
    codes = {x.code for x in out}
    for ld in _causes(f, None).leads:
        # a misconfiguration the evidence shows is said even beside a figure; a setting that caps NCCL only
        # where no figure shows it did no harm
        if ld.code in STANDING and ld.code not in codes and not (measured and ld.code in SETTINGS_ONLY):
            c = ld.candidate
            ev = {**c.evidence, "lines": [str(q) for q in ld.lines]}
            subject = ld.subject or SUBJECTS.get(ld.code, ld.code)
            out.append(
                _finding(ld.code, subject, c.what, c.fix, ev, _said_only(ld.code, ld.lines, ld.severity, alone=True))
            )
            codes.add(ld.code)
    for severity, subject, message, ev, own_fix in port_notes(f):
        if not (severity == "warning" and any(x.code == "TD982" and x.subject == subject for x in out)):
            fix = own_fix or (BY_CODE["TD982"].how if severity == "warning" else CEILING_FIX)
            out.append(_finding("TD982", subject, message, fix, ev, severity))
    out += _islands(f, measured)
    separate = separate_runs(f)
    for sep in separate:
        out.append(_finding("TD983", "launch", sep.message, BY_CODE["TD983"].how, sep.evidence))
    split = [] if separate else split_launch(f)
    scaled = scaling_findings(f)  # how the job scales, as the reporter's words state it
    normal_scaling = any(x.evidence.get("normal") for x in scaled)  # normal for the hardware: it answers the post
    host = described_host(f, measured or bool(f.averages) or _stated_judged(stated.findings) or normal_scaling)
    asks = [] if separate else differing_averages(f) + split + ([] if split or host else unshown_network(f))
    stack = [] if separate or split else other_stack_asks(f)  # another library's run: its own outputs, not the host's
    for ask in asks + version_only(f) + (stack or host) + gdr_unshown(f):
        fix = BY_CODE[ask.code].how if ask.code != "TD022" else FALLBACK_FIX
        out.append(_finding(ask.code, ask.subject, ask.message, fix, ask.evidence, ask.severity))
    header_only = f.hosts or any(k == "nccl-tests" and cut.startswith("no table") for k, cut in f.cut)
    if header_only and not f.measured and not any(x.severity != "info" for x in out):
        msg = "the run's header names its GPUs but no figures follow: nothing to judge (post the whole table, with "
        msg += "`nvidia-smi topo -m` and NCCL_DEBUG=INFO output)"
        out.append(_finding("TD022", "figures", msg, BY_CODE["TD022"].how, {"hosts": list(f.hosts)}, "info"))
    elif not measured and not f.averages and not any(x.severity != "info" for x in out):
        for ask in unmeasured_host(f):
            out.append(_finding("TD022", ask.subject, ask.message, FALLBACK_FIX, ask.evidence, ask.severity))
    for code, severity, subject, message, ev in search_findings(f, bool(normal) and not coll):
        if not any(x.code == code for x in out):  # a short run's cause already says it
            out.append(_finding(code, subject, message, BY_CODE[code].how, ev, severity))
    out += scaled
    if "TD026" not in codes:  # the reporter's own question of GPUDirect RDMA, where no line answered it
        said = gdr_said_findings(f) + gdr_slower_findings(f)
        out += [_finding("TD026", subject, msg, fix, ev, sev) for sev, subject, msg, fix, ev in said]
    # the findings of one code each, with that code's own fix; TD034 in words only where no NCCL line showed the split
    own = [("TD997", version_slower_findings), ("TD979", staged_findings), ("TD978", build_findings)]
    own += [("TD034", one_gpu_each_findings)] if "TD034" not in codes else []
    own += [("TD992", power_findings), ("TD994", mixed_findings), ("TD995", narrow_slot_findings)]
    own += [("TD970", latency_findings), ("TD971", one_rank_waits_findings)]
    for code, found in own:
        out += [_finding(code, subject, msg, BY_CODE[code].how, ev, sev) for sev, subject, msg, ev in found(f)]
    out += normal_findings(f, normal, copy_normal, has_cause=any(x.severity != "info" for x in out))
    out += reasons(f, normal)  # TD033 (GeForce) whenever several of its GPUs are shown
    if any(x.code == "TD022" and x.severity == "warning" for x in out):
        # a shortfall the missing P2P does not explain: it stays said, as information, not as the cause
        out = [replace(x, severity="info") if x.code == "TD033" and x.cause is None else x for x in out]
    return _dedupe(out)
