"""Why it failed: the events of NCCL logs turned into findings (codes TD040 - TD099), each with
the evidence line, what it means, a fix built from the evidence and the cause as topodoctor read
it. Data in, findings out; no I/O.

The rules that decide the verdict:
- a message of a known class is that class's finding (its severity), wherever it was printed;
- the cause leads: a root cause (the call that failed) before its consequences (a peer that went
  away, a flushed request, a watchdog timeout), which are dropped when a root cause is known;
- a job that failed (a return-code trail to the top of NCCL's call, torch's NCCL error, an
  nccl-tests failure) is never healthy: with no known class it is TD052 (cause not found, with
  NCCL's message) or TD049 (no message at all), both at error level;
- a closed socket in a run whose work went on afterwards is a warning, not a lost peer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from topodoctor.model.findings import SEVERITY_ORDER, Finding
from topodoctor.nccl.causes import ranked
from topodoctor.nccl.classify import ROOT
from topodoctor.nccl.evidence import RESULT, Builder, LogContext, odd_interfaces, only_odd_interfaces
from topodoctor.nccl.explanations import CODE_OF, EXPLANATIONS, Explanation, explanation_text
from topodoctor.nccl.fixes_host import HOST
from topodoctor.nccl.fixes_network import NETWORK
from topodoctor.nccl.fixes_runtime import RUNTIME
from topodoctor.nccl.fixes_usage import USAGE
from topodoctor.nccl.info_signs import context_signs
from topodoctor.nccl.known_bugs import known_bug_findings, with_bug_candidates
from topodoctor.nccl.log_variables import variable_findings
from topodoctor.nccl.parse import Event, LogFile

__all__ = ["CODE_OF", "EXPLANATIONS", "Explanation", "explain", "explanation_text"]
BUILDERS: dict[str, Builder] = {**HOST, **NETWORK, **RUNTIME, **USAGE}
# findings that name no cause of their own: not found, or what follows a failure elsewhere
NOT_A_CAUSE = frozenset(("TD049", "TD052", "TD046", "TD047", "TD067"))
# kinds that explain the other roots of their log: no interface in NCCL_COMM_ID's subnet is why peers cannot connect
LEADS = frozenset(("subnet",))  # event kind -> what its finding says

# What an NCCL error class usually means when NCCL left no reason (init.cc's ncclGetErrorString)
LIKELY = {
    "invalid usage": "at init: NCCL_NET naming an absent network, NCCL_SOCKET_IFNAME matching nothing, or two "
    "ranks on one GPU",
    "unhandled system error": "/dev/shm too small in a container, sockets refused or unreachable, or IB verbs failing",
    "unhandled cuda error": "a driver too old for the CUDA runtime, out of GPU memory, the Fabric Manager on an "
    "NVSwitch host, or a GPU fault (see dmesg)",
    "remote process exited": "another rank died or its node dropped off the network",
    "internal error": "NCCL 2.18 reports a failure of its proxy thread as 'internal error' (fixed in 2.19.1: the "
    "proxy's own WARN before 'Socket recv failed while polling' names it; upgrade to 2.19 or later), an NCCL bug, "
    "or a mix of NCCL builds",
}
_CLASS_OF = {
    "UnhandledCuda": "unhandled cuda error",
    "System": "unhandled system error",
    "Internal": "internal error",
    "InvalidArgument": "invalid argument",
    "InvalidUsage": "invalid usage",
    "Remote": "remote process exited or there was a network error",
}


# How sure the cause is: NCCL or CUDA states it in so many words, or it is the usual cause of that message
STATED = frozenset(
    (
        "TD040",
        "TD041",
        "TD042",
        "TD043",
        "TD044",
        "TD048",
        "TD054",
        "TD055",
        "TD058",
        "TD060",
        "TD061",
        "TD062",
        "TD070",
        "TD073",
        "TD077",
        "TD078",
        "TD079",
        "TD085",
        "TD086",
        "TD089",
    )
)


def _finding(code: str, subject: str, message: str, fix: str, ev: Event | None, **extra: object) -> Finding:
    e = EXPLANATIONS[code]
    evidence: dict[str, object] = {}
    if ev is not None:
        evidence.update(file=ev.file, line=ev.line_no, text=ev.text)
        if ev.rank is not None:
            evidence["rank"] = ev.rank
    not_found = code in ("TD049", "TD052")  # a failure no class explains: its cause is not found
    confidence = "not found" if not_found else ("stated by the log" if code in STATED else "likely")
    if "candidates" in extra:  # a message of several causes: the finding ranks them
        confidence = "candidates"
    elif "narrowed_by" in extra:  # a class of several causes, and the log holds the line that singles one out
        confidence = "shown by the log"
    evidence["cause"] = {"what": e.title if not not_found else "not found", "confidence": confidence}
    evidence.update(extra)
    return Finding(code, e.name, e.severity, subject, message, fix, evidence)


def _subject(evs: Sequence[Event]) -> str:
    ranks = sorted({e.rank for e in evs if e.rank is not None})
    if ranks:
        return "rank" + ",".join(str(r) for r in ranks[:8]) + ("..." if len(ranks) > 8 else "")
    return evs[0].file.rsplit("/", 1)[-1]


def _context(files: Sequence[LogFile], env: Mapping[str, str]) -> LogContext:
    layers: dict[str, str] = {}
    for f in files:
        layers.update(f.link_layers)
    return LogContext(
        env,
        tuple(v for f in files for v in f.versions),
        layers,
        next((f.topo_file for f in files if f.topo_file), ""),
        frozenset(s for f in files for s in f.trail_sources),
        {k: v for f in files for k, v in f.socket_ifs.items()},
        tuple(dict.fromkeys(g for f in files for g in f.gpu_names)),
        len({h for f in files for h in f.hosts}),
        tuple(e for f in files for e in f.events if e.kind in ("secondary", "shm-create")),
        any(f.level == "INFO" for f in files),
        tuple(dict.fromkeys(n for f in files if f.account for n in f.account.networks.values())),
        context_signs(files),
    )


def explain(files: Sequence[LogFile], env: Mapping[str, str] | None = None) -> list[Finding]:
    """Every failure the logs show, the cause first; nothing when the logs are healthy.
    ``env``: the NCCL variables of the process that wrote them, where known (a rank we started)."""
    env = {**(env or {}), **_env(files)}
    ctx = _context(files, env)
    by_kind: dict[str, list[Event]] = {}
    for e in (e for f in files for e in f.events):
        by_kind.setdefault(e.kind, []).append(e)
    went_on = {f.name for f in files if f.went_on}
    if by_kind.get("rem-allocator"):  # old NCCL's allocator thread reports its own failed allocation
        by_kind.pop("gpu-oom", None)
    statuses = [k for k in ("ib-status-4", "ib-status-12", "ib-status-remote") if by_kind.get(k)]
    if statuses:
        by_kind.pop("ib-status-5", None)  # flushed requests follow the first completion error
    if skipped := by_kind.get("ib-device-skipped"):  # the query that failed before "Unable to query device"
        _drop_skipped_queries(by_kind, skipped)
    if any(by_kind.get(k) for k in ("shm-full", "shm-register", "shm-attach", "shm-permission")):
        by_kind.pop("shm-create", None)  # the segment's summary line: its reason is already read
    out: list[tuple[int, int, Finding]] = []
    for kind, evs in by_kind.items():
        if kind not in BUILDERS:
            continue
        if kind == "peer-lost" and all(e.file in went_on for e in evs):
            ev = evs[0]
            out.append(
                (
                    1,
                    ev.line_no,
                    _finding(
                        "TD075",
                        _subject(evs),
                        f"socket closed ({ev.fields.get('text', '')}) but the job went on afterwards",
                        EXPLANATIONS["TD075"].fix,
                        ev,
                    ),
                )
            )
            continue
        said = ranked(BUILDERS[kind](evs[0].fields, evs, ctx), evs, ctx)
        f = _finding(said.code, _subject(evs), said.message, said.fix, evs[0], events=len(evs), **said.extra)
        out.append((-1 if kind in LEADS else evs[0].order, evs[0].line_no, f))
    out = _drop_consequences(out)
    out += [(0, 0, f) for f in _versions(files, by_kind)]
    if (hca := env.get("NCCL_IB_HCA")) and by_kind.get("ib-no-device") and not by_kind.get("net-plugin"):
        ev = by_kind["ib-no-device"][0]
        out.append(
            (
                1,
                ev.line_no,
                _finding(
                    "TD050",
                    "env:NCCL_IB_HCA",
                    f"NCCL_IB_HCA={hca} but NCCL found no IB device",
                    EXPLANATIONS["TD050"].fix,
                    ev,
                ),
            )
        )
    findings = [f for _, _, f in sorted(out, key=lambda t: (-SEVERITY_ORDER[t[2].severity], t[0], t[1]))]
    if findings and findings[0].code == "TD067":  # a flushed request follows a failure this log does not show
        findings.insert(0, _flushed_only(findings[0]))
    if not any(f.severity in ("error", "critical") for f in findings):
        findings = _unexplained(files, by_kind, env) + findings
        if findings and findings[0].code in ("TD049", "TD052") and only_odd_interfaces(ctx):
            findings.insert(0, _bridges_only(ctx, findings[0]))
    if findings and findings[0].code in ("TD049", "TD052"):  # no banner: the known bugs its message may be
        findings[0] = with_bug_candidates(findings[0], files)
    failed = any(f.failed for f in files) or any(f.severity in ("error", "critical") for f in findings)
    unexplained = not any(f.severity == "error" and f.code not in NOT_A_CAUSE for f in findings)
    findings = known_bug_findings(files, failed, unexplained) + findings  # the release's own bug comes first
    return findings + variable_findings(files) + _other_warnings(files, by_kind, findings)


# What ends an RDMA queue pair before its requests are flushed (status 5), when the log shows no first failure
_FLUSHED = (
    "the peer's process or node failed first: its own log's last lines",
    "an earlier completion error or NIC event on this queue pair (an async event, a local access or protection "
    "error: GPUDirect RDMA or the memory registration the NIC refused)",
    "NICs that cannot reach each other (routing, GID index, a link down)",
)


def _flushed_only(flushed: Finding) -> Finding:
    """A failure whose only IB completion is a flushed request (status 5): the request was cancelled
    because its queue pair had already failed, and what failed first is not in the log: cause not
    found, with the candidates."""
    ranked = "; ".join(f"({i}) {c}" for i, c in enumerate(_FLUSHED, 1))
    where = {k: flushed.evidence[k] for k in ("file", "line", "text", "rank") if k in flushed.evidence}
    return _finding(
        "TD052",
        flushed.subject,
        f"NCCL failed on a flushed RDMA request ({flushed.message}): it follows a failure this log does not show; "
        "cause not found",
        f"Candidates: {ranked}. Collect every rank's log with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and the "
        "first completion error or WARN of the job; `ibstat` and the port counters of both NICs.",
        None,
        candidates=list(_FLUSHED),
        **where,
    )


def _bridges_only(ctx: LogContext, failed: Finding) -> Finding:
    """A failed job whose sockets use only container bridges and link-local addresses: those reach
    no other node, which is the cause the log shows."""
    names = ", ".join(ctx.socket_ifs)
    return _finding(
        "TD041",
        "sockets",
        f"NCCL failed and its sockets use only {names}: container bridges or link-local addresses that reach no "
        "other node (NCCL_SOCKET_IFNAME names no routed interface)",
        f"{odd_interfaces(ctx)} {EXPLANATIONS['TD041'].fix}",
        None,
        interfaces=dict(ctx.socket_ifs),
        failure=failed.message[:200],
    )


def _drop_skipped_queries(by_kind: dict[str, list[Event]], skipped: Sequence[Event]) -> None:
    """net_ib's init queries each device and skips one that fails ("Unable to query device"): the
    verbs call's own WARN just before it is that skip, not a failure."""
    near = {(e.file, e.line_no - d) for e in skipped for d in range(1, 4)}
    kept = [
        e
        for e in by_kind.get("ib-verbs", [])
        if not (e.fields.get("call") in ("ibv_query_device", "ibv_query_port") and (e.file, e.line_no) in near)
    ]
    if kept:
        by_kind["ib-verbs"] = kept
    else:
        by_kind.pop("ib-verbs", None)


def _drop_consequences(out: list[tuple[int, int, Finding]]) -> list[tuple[int, int, Finding]]:
    """A peer that went away after a known root cause (or a watchdog timeout) is no second cause."""
    causes = {f.code for order, _, f in out if order == ROOT and f.severity == "error"}
    if not causes and not any(f.code == "TD047" for _, _, f in out):
        return out
    return [t for t in out if t[2].code != "TD046"]


def _env(files: Iterable[LogFile]) -> dict[str, str]:
    env: dict[str, str] = {}
    for f in files:
        env.update(f.env)
    return env


def _versions(files: Sequence[LogFile], by_kind: dict[str, list[Event]]) -> list[Finding]:
    if by_kind.get("version-mismatch"):
        return []
    seen: dict[str, list[str]] = {}
    for f in files:
        for v in f.versions:
            seen.setdefault(v.split("+")[0], []).append(f.name)
    if len(seen) < 2:
        return []
    parts = "; ".join(f"{v} in {', '.join(n.rsplit('/', 1)[-1] for n in names[:3])}" for v, names in seen.items())
    return [
        _finding(
            "TD048",
            "logs",
            f"the logs name {len(seen)} NCCL versions: {parts}",
            EXPLANATIONS["TD048"].fix,
            None,
            versions=list(seen),
        )
    ]


def _unexplained(files: Sequence[LogFile], by_kind: dict[str, list[Event]], env: Mapping[str, str]) -> list[Finding]:
    """A failed job whose cause no class covers: NCCL's own words (TD052), or none at all (TD049)."""
    errors = by_kind.get("nccl-error", [])
    trails = by_kind.get("trail", [])
    if not errors and not trails and not any(f.failed for f in files):
        return []
    warns = sorted(by_kind.get("warn", []) + by_kind.get("secondary", []), key=lambda e: (e.file, e.line_no))
    cls = _class(errors, trails)
    reasons = [e.fields.get("reason", "") for e in errors] + [r for f in files for r in f.last_errors]
    reason = next((r for r in reasons if r), "")  # torch's "Last error:" or nccl-tests' text
    ev: Event | None = next(iter(errors or trails or warns), None)
    if not reason and warns:  # else NCCL's first WARN that no class covers
        reason, ev = warns[0].fields.get("said", ""), warns[0]
    if reason:
        fields = ev.fields if ev is not None and ev.fields.get("said") == reason else {}
        known = _from_source(fields)
        source = {"source": {k: fields[k] for k in ("site", "returns", "span") if k in fields}} if known else {}
        return [
            _finding(
                "TD052",
                _subject([ev]) if ev else "logs",
                f"NCCL failed ({cls}): {reason[:200]}{known}; cause not found",
                EXPLANATIONS["TD052"].fix,
                ev,
                reason=reason,
                **source,
            )
        ]
    if trails and not errors:
        t = trails[0]
        path = t.fields.get("path") or t.source
        return [
            _finding(
                "TD052",
                _subject([t]),
                f"NCCL failed ({cls}) along {path}, with no WARN saying why; cause not found",
                EXPLANATIONS["TD052"].fix,
                t,
            )
        ]
    likely = next((v for k, v in LIKELY.items() if cls.startswith(k)), "see NCCL's error class")
    if graph := env.get("NCCL_GRAPH_FILE"):  # a forced graph breaks init on any other GPU set
        likely = f"NCCL_GRAPH_FILE={graph} is set: unset it (environment, /etc/nccl.conf, ~/.nccl.conf); else {likely}"
    shown = {
        k: v
        for k, v in env.items()
        if k in ("NCCL_NET", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_SHM_DISABLE", "NCCL_TOPO_FILE")
    }
    msg = f"NCCL error '{cls}' with no reason in the log (NCCL_DEBUG unset); likely: {likely}"
    if shown:
        msg += "; the log shows " + ", ".join(f"{k}={v}" for k, v in shown.items())
    subject = _subject(errors) if errors else "logs"
    return [
        _finding(
            "TD049",
            subject,
            msg,
            EXPLANATIONS["TD049"].fix,
            errors[0] if errors else None,
            error_class=cls,
            debug_set="NCCL_DEBUG=WARN",
        )
    ]


def _from_source(f: Mapping[str, str]) -> str:
    """What NCCL's sources say of an unclassed message (the catalogue's fields of its event):
    where it is printed and what the code does next; "" when the catalogue does not know it."""
    if not f.get("site"):
        return ""
    then = f"which then returns {f['returns']}" if f.get("returns") else "which goes on after it"
    return f" (printed by {f['site']}, {then}; NCCL {f.get('span', '')})"


def _class(errors: Sequence[Event], trails: Sequence[Event]) -> str:
    for e in errors:
        c = e.fields.get("class", "")
        c = _CLASS_OF.get(c, c).split(" (run with")[0].strip().replace("unhanled", "unhandled")  # torch 1.0's typo
        if c:
            return c
    if trails:
        code = int(trails[0].fields.get("code", "0") or 0)
        return f"{RESULT.get(code, 'error')} ({code})"
    return "an NCCL error"


def _other_warnings(files: Sequence[LogFile], by_kind: dict[str, list[Event]], found: list[Finding]) -> list[Finding]:
    """WARN lines no class covers, in a run that did not fail on them (info)."""
    rest = by_kind.get("warn", [])
    if not rest or any(f.code == "TD052" for f in found):
        return []
    texts = list(dict.fromkeys(w.fields.get("said", "").strip()[:160] for w in rest))
    return [
        _finding(
            "TD051", _subject(rest), f"NCCL WARN: {texts[0]}", EXPLANATIONS["TD051"].fix, rest[0], warnings=texts[:10]
        )
    ]
