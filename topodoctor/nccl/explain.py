"""Why it failed: the events of NCCL logs turned into findings (codes TD040 - TD108, TD957 - TD965),
each with the evidence line, what it means, a fix built from the evidence and the cause as topodoctor read
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
from dataclasses import replace

from topodoctor.model.findings import SEVERITY_ORDER, Finding
from topodoctor.nccl.causes import ranked
from topodoctor.nccl.classify import CONSEQUENCE, ROOT
from topodoctor.nccl.evidence import Builder, LogContext, agreed_layers, bridges_among, on_host, only_odd_interfaces
from topodoctor.nccl.explanations import CODE_OF, EXPLANATIONS, Explanation, explanation_text
from topodoctor.nccl.finding import finding, subject
from topodoctor.nccl.fixes_fallback import FALLBACK
from topodoctor.nccl.fixes_host import HOST
from topodoctor.nccl.fixes_ib_events import IB_EVENTS
from topodoctor.nccl.fixes_launcher import LAUNCHER
from topodoctor.nccl.fixes_network import NETWORK
from topodoctor.nccl.fixes_process import PROCESS
from topodoctor.nccl.fixes_runtime import RUNTIME
from topodoctor.nccl.fixes_setting import SETTING
from topodoctor.nccl.fixes_shm import SHM
from topodoctor.nccl.fixes_teardown import TEARDOWN
from topodoctor.nccl.fixes_usage import USAGE
from topodoctor.nccl.fixes_watchdog import WATCHDOG
from topodoctor.nccl.info_signs import context_signs
from topodoctor.nccl.known_bugs import known_bug_findings, with_bug_candidates
from topodoctor.nccl.log_signs import frameworks_named, one_name_two_hosts
from topodoctor.nccl.log_variables import variable_findings
from topodoctor.nccl.logfile import WORDS_ONLY
from topodoctor.nccl.parse import Event, LogFile
from topodoctor.nccl.site_causes import stray_bytes
from topodoctor.nccl.stall import STALL
from topodoctor.nccl.unexplained import (
    bridges_beside,
    bridges_only,
    flushed_only,
    node_local,
    one_node_named_twice,
    unexplained,
)

__all__ = ["CODE_OF", "EXPLANATIONS", "Explanation", "explain", "explanation_text"]
BUILDERS: dict[str, Builder] = {
    **HOST,
    **SETTING,
    **SHM,
    **NETWORK,
    **IB_EVENTS,
    **FALLBACK,
    **TEARDOWN,
    **RUNTIME,
    **USAGE,
    **WATCHDOG,
    **LAUNCHER,
    **PROCESS,
    **STALL,
}
# findings that name no cause of their own: not found, or what follows a failure elsewhere
NOT_A_CAUSE = frozenset(("TD049", "TD052", "TD046", "TD047", "TD067", "TD092", "TD098"))
# kinds that explain the other roots of their log: no interface in NCCL_COMM_ID's subnet is why peers cannot connect
LEADS = frozenset(("subnet",))  # event kind -> what its finding says


def _context(files: Sequence[LogFile], env: Mapping[str, str]) -> LogContext:
    layers: dict[str, dict[str, str]] = {}
    for f in files:
        for host, devices in f.link_layers.items():
            layers.setdefault(host, {}).update(devices)
    return LogContext(
        env,
        tuple(v for f in files for v in f.versions),
        agreed_layers(layers),
        next((f.topo_file for f in files if f.topo_file), ""),
        frozenset(s for f in files for s in f.trail_sources),
        {k: v for f in files for k, v in f.socket_ifs.items()},
        tuple(dict.fromkeys(g for f in files for g in f.gpu_names)),
        len({h for f in files for h in f.hosts}),
        tuple(e for f in files for e in f.events if e.kind in ("secondary", "shm-create")),
        any(f.level == "INFO" for f in files),
        tuple(dict.fromkeys(n for f in files if f.account for n in f.account.networks.values())),
        context_signs(files),
        layers,
        any(f.worked_first for f in files),
        {**{k: v for f in files for k, v, _ in f.variables}, **env},
        max((f.launch_nodes or 0 for f in files), default=0),
        frameworks_named([e for f in files for e in f.events]),
        tuple(dict.fromkeys(e.fields["class"].lower() for f in files for e in f.events if e.fields.get("class"))),
        next((f.overcommit for f in files if f.overcommit), ""),
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
        by_kind.pop("ib-async-fatal", None)  # the queue pair's event is that completion's error state, said once
    if skipped := by_kind.get("ib-device-skipped"):  # the query that failed before "Unable to query device"
        _drop_skipped_queries(by_kind, skipped)
    if by_kind.get("watchdog-timeout") or by_kind.get("watchdog-stuck"):  # another file holds the message
        by_kind.pop("watchdog-stack", None)
        # torch's watchdog then takes the process down with std::abort (ProcessGroupNCCL.cpp): SIGABRT is its doing
        crashes = [e for e in by_kind.get("process-crash", []) if not ("Abort" in e.text or "SIGABRT" in e.text)]
        if "process-crash" in by_kind:
            by_kind["process-crash"] = crashes
            if not crashes:
                by_kind.pop("process-crash")
    if "said-failed" in by_kind and any(k not in WORDS_ONLY for k in by_kind):  # another file shows the failure
        by_kind.pop("said-failed")
    if any(by_kind.get(k) for k in ("shm-full", "shm-register", "shm-attach", "shm-permission")):
        by_kind.pop("shm-create", None)  # the segment's summary line: its reason is already read
    # aws-ofi-nccl failed at init and NCCL went on over sockets: the post's words that it failed make that the run's
    # failure; without them a warning (a host without EFA runs so by design)
    # (a failing call of the plugin, read as its own class, names the cause itself: TD084)
    plugin_failed = [e for e in by_kind.get("warn", []) if "NET/OFI" in e.text and "initialization failed" in e.text]
    said_failed = bool(by_kind.get("said-failed")) or any(f.failed for f in files)
    if plugin_failed and "Socket" in ctx.networks and not by_kind.get("ofi"):
        by_kind.pop("said-failed", None)
        by_kind["warn"] = [e for e in by_kind.get("warn", []) if e not in plugin_failed]  # said once, as the cause
        by_kind["ofi-fallback"] = [replace(plugin_failed[0], fields={**plugin_failed[0].fields, "failed": "1"})
                                   if said_failed else plugin_failed[0]]  # fmt: skip
    out: list[tuple[int, int, Finding]] = []
    # a plugin that did not load is why the network NCCL_NET names is missing (TD040 follows from TD099)
    leads = LEADS | ({"net-plugin-broken"} if by_kind.get("net-plugin") else set())
    for kind, evs in by_kind.items():
        if kind not in BUILDERS:
            continue
        if kind == "peer-lost" and all(e.file in went_on for e in evs):
            ev = evs[0]
            out.append(
                (
                    1,
                    ev.line_no,
                    finding(
                        "TD075",
                        subject(evs),
                        f"socket closed ({ev.fields.get('text', '')}) but the job went on afterwards",
                        EXPLANATIONS["TD075"].fix,
                        ev,
                    ),
                )
            )
            continue
        at = on_host(ctx, evs[0].host)  # the failing host's link layers, not another host's
        said = ranked(BUILDERS[kind](evs[0].fields, evs, at), evs, at)
        f = finding(said.code, subject(evs), said.message, said.fix, evs[0], events=len(evs), **said.extra)
        out.append((-1 if kind in leads else evs[0].order, evs[0].line_no, f))
    out = _drop_consequences(out)
    out += [(0, 0, f) for f in _versions(files, by_kind)]
    if (hca := env.get("NCCL_IB_HCA")) and by_kind.get("ib-no-device") and not by_kind.get("net-plugin"):
        ev = by_kind["ib-no-device"][0]
        out.append(
            (
                1,
                ev.line_no,
                finding(
                    "TD050",
                    "env:NCCL_IB_HCA",
                    f"NCCL_IB_HCA={hca} but NCCL found no IB device",
                    EXPLANATIONS["TD050"].fix,
                    ev,
                ),
            )
        )
    out += [(1, 0, f) for f in _no_verbs_on_ib(ctx)]
    out += [(0, 0, f) for f in _loopback_across_nodes(files, ctx)]
    findings = [f for _, _, f in sorted(out, key=lambda t: (-SEVERITY_ORDER[t[2].severity], t[0], t[1]))]
    if findings and findings[0].code == "TD067":  # a flushed request follows a failure this log does not show
        findings.insert(0, flushed_only(findings[0]))
    # a crash (TD098) after NCCL's own words of no class: those words lead, as cause not found
    words = bool(by_kind.get("warn")) or any(f.last_errors for f in files)
    if not any(f.severity in ("error", "critical") and (f.code != "TD098" or not words) for f in findings):
        findings = unexplained(files, by_kind, env) + findings
        if findings and findings[0].code in ("TD049", "TD052") and only_odd_interfaces(ctx):
            findings.insert(0, bridges_only(ctx, findings[0]))
        elif findings and node_local(findings[0]) and (shared := one_name_two_hosts(ctx)):
            findings.insert(0, one_node_named_twice(shared, findings[0]))
        elif findings and findings[0].code in ("TD049", "TD052") and bridges_among(ctx):
            findings.insert(0, bridges_beside(ctx, findings[0]))
    if findings and findings[0].severity in ("error", "critical"):  # no banner: the known bugs its message may be
        findings[0] = with_bug_candidates(findings[0], files)
    failed = any(f.failed for f in files) or any(f.severity in ("error", "critical") for f in findings)
    no_cause = not any(f.severity == "error" and f.code not in NOT_A_CAUSE for f in findings)
    lead = next((f for f in findings if f.severity in ("error", "critical")), None)
    findings = known_bug_findings(files, failed, no_cause, lead) + findings  # the release's own bug comes first
    return findings + variable_findings(files) + _other_warnings(files, by_kind, findings)


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
    """A peer that went away after a known root cause (or a watchdog timeout) is no second cause; a store that
    broke while a rank was killed (the store lives in rank 0's process) follows the kill."""
    if any(f.code == "TD090" for _, _, f in out):
        out = [(CONSEQUENCE, n, f) if f.code == "TD072" and "store" in f.evidence else (o, n, f) for o, n, f in out]
    causes = {f.code for order, _, f in out if order == ROOT and f.severity == "error" and f.code != "TD046"}
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
        finding(
            "TD048",
            "logs",
            f"the logs name {len(seen)} NCCL versions: {parts}",
            EXPLANATIONS["TD048"].fix,
            None,
            versions=list(seen),
        )
    ]


def _loopback_across_nodes(files: Sequence[LogFile], ctx: LogContext) -> list[Finding]:
    """NCCL's sockets on loopback alone in a job whose launch line asks for several nodes: no rank of another node
    can reach this one at 127.0.0.1, whatever else the log shows."""
    nodes = max((f.launch_nodes or 0 for f in files), default=0)
    if nodes < 2 or set(ctx.socket_ifs) != {"lo"}:
        return []
    msg = f"NCCL's sockets use only lo ({ctx.socket_ifs['lo'] or '127.0.0.1'}"
    msg += ", NCCL_SOCKET_IFNAME=lo)" if ctx.shown.get("NCCL_SOCKET_IFNAME", "").strip() == "lo" else ")"
    msg += f" in a launch of {nodes} nodes: the other nodes' ranks cannot reach this one over loopback"
    fix = (
        "Set NCCL_SOCKET_IFNAME to the interface the nodes route between them on every node (`ip -br addr`; "
        "`ip route get <other node's IP>` names it), or unset it so NCCL picks one; loopback serves only ranks of "
        "one node."
    )
    return [finding("TD072", "net:lo", msg, fix, None, nodes=nodes)]


def _no_verbs_on_ib(ctx: LogContext) -> list[Finding]:
    """libibverbs not loaded while NCCL's sockets run on an InfiniBand interface (IPoIB: ib0, ibp...): the host
    has RDMA NICs that NCCL cannot use, so its network is TCP over them (warning: the job runs, slowly)."""
    sign = next((s for s in ctx.signs if s.kind == "no-verbs"), None)
    ib = [n for n in ctx.socket_ifs if n.startswith("ib")]
    if sign is None or not ib:
        return []
    msg = f"NCCL could not load libibverbs, so its network runs on TCP sockets over {', '.join(ib)} (IP over "
    msg += "InfiniBand) instead of RDMA on the NICs behind it"
    fix = (
        "Install the verbs library where the job runs (rdma-core: libibverbs1 and its provider, libmlx5; "
        "libibverbs-dev in a Dockerfile) and pass /dev/infiniband into the container; NCCL_DEBUG=INFO then shows "
        "`NET/IB : Using [0]mlx5_0:1/IB` instead of NET/Socket."
    )
    return [finding("TD050", f"net:{ib[0]}", msg, fix, None, said=sign.said)]


def _other_warnings(files: Sequence[LogFile], by_kind: dict[str, list[Event]], found: list[Finding]) -> list[Finding]:
    """WARN lines no class covers, in a run that did not fail on them (info)."""
    rest = by_kind.get("warn", [])
    if not rest or any(f.code == "TD052" for f in found):
        return []
    texts = list(dict.fromkeys(w.fields.get("said", "").strip()[:160] for w in rest))
    fix = EXPLANATIONS["TD051"].fix
    if text := next((t for w in rest if (t := stray_bytes(w.fields.get("said", "")))), ""):
        fix = (
            f"A connection to NCCL's port sent {text!r}, which no NCCL peer sends: a program that is not NCCL (a "
            "port scanner, a metrics scraper, a health check) reached it. NCCL ignored it and accepted again; keep "
            "such clients off the job's ports. " + fix
        )
    return [finding("TD051", subject(rest), f"NCCL WARN: {texts[0]}", fix, rest[0], warnings=texts[:10])]
