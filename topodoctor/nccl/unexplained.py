"""A failed job that no class explains, and the two failures whose first cause the log does not hold:
cause not found with NCCL's own words (TD052) or with none (TD049, the error class's usual causes),
a flushed RDMA request alone (its candidates), and sockets on container bridges alone (TD041). Data
in, findings out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.model.findings import Finding
from topodoctor.nccl.catalogue import lookup
from topodoctor.nccl.evidence import RESULT, LogContext, odd_interfaces, odd_names
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.finding import finding, subject
from topodoctor.nccl.launcher_lines import OUTSIDE_WHATS, root_cause_said, signal_said
from topodoctor.nccl.logfile import Event, LogFile
from topodoctor.nccl.outcome import process
from topodoctor.nccl.site_causes import NODE_LOCAL, site_candidates
from topodoctor.nccl.torch_reasons import CANDIDATES, COLLECT, SAID

# 2.18's proxy errors read back as internal errors (nccl.known_bugs): a likely cause only under 2.18 or no version
_INTERNAL_218 = (
    "NCCL 2.18 reports a failure of its proxy thread as 'internal error' (fixed in 2.19.1: the proxy's own WARN "
    "before 'Socket recv failed while polling' names it; upgrade to 2.19 or later)"
)
# What an NCCL error class usually means when NCCL left no reason (init.cc's ncclGetErrorString)
LIKELY = {
    "invalid usage": "at init: NCCL_NET naming an absent network, NCCL_SOCKET_IFNAME matching nothing, or two "
    "ranks on one GPU",
    "unhandled system error": "/dev/shm too small in a container, sockets refused or unreachable, or IB verbs failing",
    "unhandled cuda error": "a driver too old for the CUDA runtime, out of GPU memory, a libnccl built for another "
    "CUDA version than the program's (the package's +cudaX.Y against the toolkit the program runs), the Fabric "
    "Manager on an NVSwitch host, or a GPU fault (see dmesg)",
    "remote process exited": "another rank's process ended first (killed for memory or crashed; its log and `dmesg` "
    "tell), or the network between the nodes (the socket interface or a firewall), or a node that dropped off",
    "internal error": f"{_INTERNAL_218}, a topology XML without an attribute NCCL reads (NCCL_TOPO_FILE or the "
    "file a network plugin sets such as aws-ofi-nccl's per-instance ones; graph/xml.h returns ncclInternalError for "
    "'Attribute X of node Y not found'), an NCCL bug, or a mix of NCCL builds",
}
# A failure whose class the log does not name either (torch's "communicator was aborted", its watchdog's end)
_ANY_CLASS = (
    "another rank failed first (its log's first error; a node that dropped off)",
    "a GPU fault (an Xid in the kernel log, `nvidia-smi -q -d ECC`)",
    "the network between the nodes (NCCL_DEBUG=WARN names the failing call)",
)
_CLASS_OF = {
    "UnhandledCuda": "unhandled cuda error",
    "System": "unhandled system error",
    "Internal": "internal error",
    "InvalidArgument": "invalid argument",
    "InvalidUsage": "invalid usage",
    "Remote": "remote process exited or there was a network error",
}


# What ends an RDMA queue pair before its requests are flushed (status 5), when the log shows no first failure
_FLUSHED = (
    "the peer's process or node failed first: its own log's last lines",
    "an earlier completion error or NIC event on this queue pair (an async event, a local access or protection "
    "error: GPUDirect RDMA or the memory registration the NIC refused)",
    "NICs that cannot reach each other (routing, GID index, a link down)",
)


def flushed_only(flushed: Finding) -> Finding:
    """A failure whose only IB completion is a flushed request (status 5): the request was cancelled
    because its queue pair had already failed, and what failed first is not in the log: cause not
    found, with the candidates."""
    ranked = numbered(_FLUSHED)
    where = {k: flushed.evidence[k] for k in ("file", "line", "text", "rank") if k in flushed.evidence}
    return finding(
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


def bridges_only(ctx: LogContext, failed: Finding) -> Finding:
    """A failed job whose sockets use only container bridges and link-local addresses: those reach
    no other node, which is the cause the log shows."""
    names = ", ".join(ctx.socket_ifs)
    return finding(
        "TD041",
        "sockets",
        f"NCCL failed and its sockets use only {names}: container bridges or link-local addresses that reach no "
        "other node (NCCL_SOCKET_IFNAME names no routed interface)",
        f"{odd_interfaces(ctx)} {EXPLANATIONS['TD041'].fix}",
        None,
        interfaces=dict(ctx.socket_ifs),
        failure=failed.message[:200],
    )


def one_node_named_twice(shared: str, failed: Finding) -> Finding:
    """A failure of NCCL's node-local transports (CUDA IPC, /dev/shm) where the log shows two machines under one host
    name (``log_signs.one_name_two_hosts``): NCCL took them for one node, the cause the log shows."""
    return finding(
        "TD100",
        "hosts",
        f"NCCL joined ranks of two machines as one node ({shared}), and its node-local transport between them "
        f"(CUDA IPC, /dev/shm) failed: {str(failed.evidence.get('reason', ''))[:120]}",
        EXPLANATIONS["TD100"].fix,
        None,
        failure=failed.message[:200],
    )


def node_local(failed: Finding) -> bool:
    """Whether an unexplained failure is of NCCL's node-local transports (CUDA IPC between GPUs, /dev/shm)."""
    return failed.code == "TD052" and failed.evidence.get("site_kind") in NODE_LOCAL


def bridges_beside(ctx: LogContext, failed: Finding) -> Finding:
    """A failed job whose socket network lists container bridges or link-local interfaces beside the routed one:
    the channels NCCL put on them reach no other node, the first of the candidates (the log shows no connection
    failing on one of them, so the failure may still be another's)."""
    bad = odd_names(ctx)
    odd = [n for n in bad if n != "lo"]
    good = [n for n in ctx.socket_ifs if n not in bad]
    shown = ", ".join(odd[:4]) + (f" and {len(odd) - 4} more" if len(odd) > 4 else "")
    candidates = [
        f"NCCL's socket network lists {shown} (container bridges or link-local addresses) beside {', '.join(good)}: "
        "NCCL takes each listed interface as a network device, and a channel it puts on a bridge reaches no other "
        f"node (NCCL_SOCKET_IFNAME={good[0]} on every node)",
        "a firewall dropping NCCL's ports between the nodes",
        "another rank failed first (its log's first error)",
    ]
    return finding(
        "TD041",
        "sockets",
        f"NCCL failed ({failed.message[:120]}); candidates, most likely first: {numbered(candidates)}",
        f"Set NCCL_SOCKET_IFNAME={good[0]} on every node (and GLOO_SOCKET_IFNAME for torch's store); a failure that "
        "stays is another candidate's: NCCL_DEBUG=WARN names the failing call. " + EXPLANATIONS["TD041"].fix,
        None,
        candidates=candidates,
        interfaces=dict(ctx.socket_ifs),
        failure=failed.message[:200],
    )


TRAIL_AFTER = 3  # the lines between a WARN and the trail of the call that failed on it


def _trailed(warn: Event, trails: Sequence[Event]) -> bool:
    """Whether the return-code trail of ``warn``'s process follows it: the call failed on this WARN."""
    proc = process(warn.text)
    return any(
        t.file == warn.file and 0 < t.line_no - warn.line_no <= TRAIL_AFTER and process(t.text) == proc for t in trails
    )


def unexplained(files: Sequence[LogFile], by_kind: dict[str, list[Event]], env: Mapping[str, str]) -> list[Finding]:
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
    if not reason and warns:  # else NCCL's first WARN that no class covers, one that names its source file first
        # the WARN the return-code trail follows (NCCL went on after a fallback's), else one that names its file
        w = next((w for w in warns if _trailed(w, trails)), None) or next((w for w in warns if w.source), warns[0])
        reason, ev = w.fields.get("said", ""), w
    if reason:
        fields = ev.fields if ev is not None and ev.fields.get("said") == reason else {}
        known = _from_source(fields)
        source: dict[str, object] = {}
        if known:
            source["source"] = {k: fields[k] for k in ("site", "returns", "span") if k in fields}
        entry = lookup(reason)
        # the catalogue's files, else the file NCCL's own WARN prefix names (a format the catalogue cannot match)
        printed = next((w.source for w in warns if w.fields.get("said") == reason and w.source), "")
        site_files = tuple(f for f in (printed,) if f.endswith((".cc", ".cu", ".h")))
        if entry:  # the file the WARN names first: the catalogue lists every file that prints the words
            site_files = (*(f for f in entry.files if printed.endswith(f)), *entry.files)
        area, causes = site_candidates(reason, site_files)
        fix = EXPLANATIONS["TD052"].fix
        if causes:  # the site's own candidates: what can make that code path fail, ranked
            listed = numbered(causes)
            fix = f"The message is {area}'s; candidates, most likely first: {listed}. {fix}"
            source |= {"candidates": causes, "site_kind": area}
        return [
            finding(
                "TD052",
                subject([ev]) if ev else "logs",
                f"NCCL failed ({cls}): {reason[:200]}{known}; cause not found",
                fix,
                ev,
                reason=reason,
                **source,
            )
        ]
    if trails and not errors:
        t = trails[0]
        path = t.fields.get("path") or t.source
        return [
            finding(
                "TD052",
                subject([t]),
                f"NCCL failed ({cls}) along {path}, with no WARN saying why; cause not found",
                EXPLANATIONS["TD052"].fix,
                t,
            )
        ]
    likely = next((v for k, v in LIKELY.items() if cls.startswith(k)), "")
    versions = [v for f in files for v in f.versions]
    if cls.startswith("internal error") and versions and not any(v.startswith("2.18.") for v in versions):
        likely = likely.removeprefix(f"{_INTERNAL_218}, ")
    candidates = [c.strip() for c in re.split(r", or |, ", likely)] if likely else list(_ANY_CLASS)
    likely = likely or numbered(_ANY_CLASS)
    if (boot := _bootstrap_sockets(files)) is not None:  # the trail says which layer failed: bootstrap's sockets
        candidates = boot
        likely = numbered(boot)
    if graph := env.get("NCCL_GRAPH_FILE"):  # a forced graph breaks init on any other GPU set
        likely = f"NCCL_GRAPH_FILE={graph} is set: unset it (environment, /etc/nccl.conf, ~/.nccl.conf); else {likely}"
    shown = {
        k: v
        for k, v in env.items()
        if k in ("NCCL_NET", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_SHM_DISABLE", "NCCL_TOPO_FILE")
    }
    msg = f"NCCL error '{cls}' with no reason in the log (NCCL_DEBUG unset); likely: {likely}"
    torch_said = by_kind.get("torch-failed", [])
    fix_049 = EXPLANATIONS["TD049"].fix
    if torch_said and not errors:  # torch's own words that NCCL failed, which carry no reason: what they mean
        said = torch_said[0].fields
        candidates = list(CANDIDATES[said["what"]])
        likely = numbered(candidates)
        on = f"rank {said['rank']}: " if said.get("rank") else ""
        msg = f"{on}{SAID[said['what']]}; no reason in the log; candidates, most likely first: {likely}"
    roots = by_kind.get("root-cause", [])
    root = next((e for e in roots if e.fields.get("root")), roots[0] if roots else None)  # the table's, with its host
    if root is not None and root.fields.get("what", "") in OUTSIDE_WHATS:  # an end that names no failed rank
        msg = f"{root.fields['what']} ({root.fields.get('said', '')[:100]}); else likely: {likely}"
    elif root is not None:  # the launcher names the rank that failed first: its own output has the cause
        signal = signal_said(root.fields.get("exitcode", ""))
        msg = (
            f"the launcher's first observed failure: {root_cause_said(dict(root.fields))}"
            + (f" ({signal})" if signal else "")
            + f"; its own output (traceback, NCCL's words) holds the cause, not in this log; else likely: {likely}"
        )
    if shown:
        msg += "; the log shows " + ", ".join(f"{k}={v}" for k, v in shown.items())
    who = subject(errors) if errors else "logs"
    return [
        finding(
            "TD049",
            who,
            msg,
            f"Collect: {COLLECT}. {EXPLANATIONS['TD049'].fix}" if torch_said and not errors else fix_049,
            errors[0] if errors else (root or next(iter(torch_said), None)),
            error_class=cls,
            debug_set="NCCL_DEBUG=WARN",
            likely_causes=candidates,
        )
    ]


def _from_source(f: Mapping[str, str]) -> str:
    """What NCCL's sources say of an unclassed message (the catalogue's fields of its event):
    where it is printed and what the code does next; "" when the catalogue does not know it."""
    if not f.get("site"):
        return ""
    then = f"which then returns {f['returns']}" if f.get("returns") else "which goes on after it"
    return f" (printed by {f['site']}, {then}; NCCL {f.get('span', '')})"


def _bootstrap_sockets(files: Sequence[LogFile]) -> list[str] | None:
    """The candidates of a return-code trail from misc/socket.cc up through bootstrap.cc: a socket call of NCCL's
    bootstrap failed, which runs over TCP on the interface NCCL_SOCKET_IFNAME picks (never over the IB verbs)."""
    if not any("socket.cc" in f.trail_sources and "bootstrap.cc" in f.trail_sources for f in files):
        return None
    ifs = {k: v for f in files for k, v in f.socket_ifs.items()}
    named = ", ".join(f"{k} ({v})" for k, v in list(ifs.items())[:3])
    ipoib = [k for k in ifs if k.startswith("ib")]
    first = "the interface NCCL's bootstrap sockets use does not reach the other nodes"
    first += f" (the log shows {named}" if named else ""
    first += "; an IPoIB interface is often down or unrouted in a container" if ipoib else ""
    first += ")" if named else ""
    first += ": set NCCL_SOCKET_IFNAME to the interface the nodes route between them (their Ethernet)"
    return [
        first,
        "a firewall dropping the bootstrap's ports between the nodes",
        "another rank failed first (its log's first error)",
    ]


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
