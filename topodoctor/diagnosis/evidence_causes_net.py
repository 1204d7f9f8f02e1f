"""The causes between nodes and in NCCL's settings that a user's evidence can show: sockets where RDMA
NICs exist, GPUDirect RDMA off or one-sided, fewer NICs used than present, a setting that caps NCCL,
a release with a known regression, the node common to a sweep's slow pairs, one GPU slower than its
peers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from topodoctor.core.stats import median
from topodoctor.core.text import human_size, plural
from topodoctor.diagnosis.evidence_expect import BANDWIDTH_BOUND_BYTES
from topodoctor.diagnosis.evidence_facts import Conn, Facts, NetSeen
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_regressions import regression_causes
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.evidence_sockets import NO_PROVIDER, setting_value, socket_cause
from topodoctor.diagnosis.nccl_model import (
    DEFAULT_BUFFSIZE,
    DEFAULT_NTHREADS,
    LL128_SHARE,
    LL_MAX_GBPS,
    LL_SHARE,
    SEARCH_CHANNEL_GBPS,
)
from topodoctor.diagnosis.perf_regressions import regressions_of
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.findings import Severity

_IPOIB = re.compile(r"\](ib[a-z]?\d[\w.]*):")  # NET/Socket : Using [0]ibp12s0:10.1.0.2<0>
RDMA_NAMES = ("mlx5_", "mlx4_", "ibp", "bnxt_re", "irdma", "efa", "rdma")
PROTO_SHARE = {"LL": LL_SHARE, "LL128": LL128_SHARE}
SLOW_GPU = 0.7  # a GPU whose copies run under this share of the others' median
SLOW_PAIR = 0.8  # a sweep's pair under this share of its best pair is slow


def _rdma_present(f: Facts) -> list[str]:
    # a port ibstat lists as down is no NIC NCCL could use
    names = [n.name for n in f.nics if (n.link_layer in ("IB", "RoCE") or n.name.startswith(RDMA_NAMES))
             and n.state != "DOWN"]  # fmt: skip
    names += [d for s in f.net if s.line.what == "ib-devices" for d in s.line.value.split()]
    names += [s.line.value for s in f.net if s.line.what == "ib-open-failed" and s.line.value]
    names += [
        f"{s.line.value} without its provider" for s in f.net if s.line.what == "no-provider"
    ]  # the device exists
    # an interface NCCL's sockets use named ib* is IP over InfiniBand: the InfiniBand HCA is there
    names += [f"{m} (IPoIB)" for s in f.net if s.line.what == "socket" for m in _IPOIB.findall(s.line.value)]
    return list(dict.fromkeys(names))


def _nodes(f: Facts, sym: Symptom | None) -> int | None:
    """How many nodes the run spans, as the figure, NCCL's count, the ranks' hosts or the connections say;
    None where nothing says (a log of NCCL's init lines alone)."""
    if sym is not None:
        return sym.nodes
    net = [c for c in f.conns if c.kind == "net"]
    gdr = any(s.line.what in ("gdr-off", "gdr-on") for s in f.net)  # NCCL weighs GPUDirect only for a network
    if net or gdr or (f.nccl_nodes or 0) > 1 or len(f.hosts) > 1:
        return max(f.nccl_nodes or 1, len(f.hosts) or 1, 2)
    if f.conns or f.nccl_nodes == 1 or len(f.hosts) == 1:
        return 1
    return None


_BARE_CONTAINER = "the container was started without /dev/infiniband"


def _socket_reasons(f: Facts) -> tuple[list[str], list[Quote]]:
    why: list[str] = []
    lines: list[Quote] = []
    if (d := setting_value(f, "NCCL_IB_DISABLE")) not in (None, "", "0"):
        why.append(f"NCCL_IB_DISABLE={d}")
        lines.append(f.settings["NCCL_IB_DISABLE"][1])
    for s in f.net:
        if s.line.what == "no-verbs" and "libibverbs could not be loaded" not in why:
            why.append("libibverbs could not be loaded")
            lines.append(s.quote)
        elif s.line.what == "ib-open-failed" and not any(w.startswith("NCCL could not open") for w in why):
            named = next((x for x in f.net if x.line.what == "ib-open-failed" and x.line.value), s)
            why.append(f"NCCL could not open {named.line.value or 'the RDMA device'} (no /dev/infiniband access?)")
            lines.append(named.quote)
        elif s.line.what == "no-provider" and not any(w.startswith(NO_PROVIDER) for w in why):
            why.append(f"{NO_PROVIDER} for {s.line.value or 'the verbs device'}")
            lines.append(s.quote)
        elif s.line.what == "ib-none" and "NCCL found no IB device" not in why:
            why.append("NCCL found no IB device")
            lines.append(s.quote)
    bare = [ln for ln in f.launches if ln.launcher in ("docker", "podman") and ln.privileged is not True
            and not any("infiniband" in d for d in ln.devices)]  # fmt: skip
    if bare:
        why.append(_BARE_CONTAINER)
    return why, lines


def network_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """Sockets where RDMA exists (TD025), GPUDirect RDMA off or one-sided (TD026), fewer NICs (TD035)."""
    nodes = _nodes(f, sym)
    chosen = [s for s in f.net if s.line.what == "network"]
    socket: list[NetSeen] = []
    if not any(s.line.value.upper().startswith("IB") for s in chosen):
        socket = [s for s in chosen if s.line.value.lower() == "socket"]
        # the socket transport's own listing is its choice only where IB listed no device: NCCL prefers IB, and a
        # process that printed `NET/IB : Using` runs over it whatever it printed of sockets before
        ib_listed = any(s.line.what == "ib-devices" and s.line.value for s in f.net)
        socket = socket or ([] if ib_listed else [s for s in f.net if s.line.what == "socket"])
    net_conns = [c for c in f.conns if c.kind == "net"]
    if nodes == 1:
        if socket and not net_conns:
            out.rule_out(f"the network ({socket[0].line.value or 'Socket'}): one node, its channels via P2P / SHM")
        return
    rdma = _rdma_present(f)
    over_socket = [c for c in net_conns if "SOCKET" in c.transport.upper()]
    on_ib = any(c.transport.upper().startswith("NET/IB") for c in net_conns)
    why, reasons = _socket_reasons(f)
    said_ib = on_ib or any(s.line.value.upper().startswith("IB") for s in chosen)
    # with IB refused (no verbs, NCCL_IB_DISABLE) and no plugin, sockets are the only network NCCL has left
    # a container started without /dev/infiniband, the only reason, counts where something shows several nodes
    shown = nodes is not None or any(w != _BARE_CONTAINER for w in why)
    if (socket and not on_ib) or over_socket or (why and shown and not said_ib and not net_conns):
        first = socket[0].quote if socket else (over_socket[0].quote if over_socket else None)
        lines = ([first] if first is not None else []) + list(reasons)
        found = socket_cause(f, sym, nodes, rdma, why)
        for ask in found.asks:
            out.ask(ask)
        out.add("TD025", found.candidate, tuple(lines[:3]), severity=found.severity)
        return
    _gdr(f, net_conns, out)
    _fewer_nics(f, sym, out, rdma)


def _where_logged(c: Conn) -> str:
    """The node a connection line speaks for: the host that logged it, else the local rank's node (NCCL
    logs "me -> peer [send]" and "peer -> me [receive]", transport.cc)."""
    if c.host:
        return c.host
    return f"the node of rank {c.ranks[1] if c.side == 'receive' else c.ranks[0]}"


def _gdr(f: Facts, net_conns: list[Conn], out: Leads) -> None:
    ib = [c for c in net_conns if c.transport.upper().startswith("NET/IB")]
    gdr_off = [s for s in f.net if s.line.what == "gdr-off"]
    gdr_on = [s for s in f.net if s.line.what == "gdr-on"]
    with_ = {_where_logged(c) for c in ib if c.gdr} | {s.host for s in gdr_on if s.host}
    without = ({_where_logged(c) for c in ib if not c.gdr} | {s.host for s in gdr_off if s.host}) - with_
    if with_ and without:
        node = sorted(without)[0]
        quotes = [c.quote for c in ib if _where_logged(c) == node and c.quote is not None]
        quotes += [c.quote for c in ib if c.gdr and c.quote is not None][:1]
        quotes += [s.quote for s in gdr_off if s.host == node]
        sides = sorted({c.side for c in ib if _where_logged(c) == node and c.side}) or ["every"]
        what = f"GPUDirect RDMA on {', '.join(sorted(with_))} but not on {node} ({'/'.join(sides)} side)"
        fix = f"Load nvidia_peermem (or use DMA-BUF) on {node}: `lsmod | grep peermem` there."
        subject = f"host:{node}" if not node.startswith("the node of") else node.replace("the node of ", "")
        out.add("TD026", Candidate(what, fix, {"node": node, "with": sorted(with_)}, None), tuple(quotes[:3]), subject)
    elif not with_ and (gdr_off or (ib and not any(c.gdr for c in ib))):
        reason = gdr_off[0].line.detail if gdr_off and gdr_off[0].line.detail else ""
        reason = reason or ("NCCL refused it for every HCA" if gdr_off else "no connection via NET/IB/.../GDRDMA")
        lines = tuple(s.quote for s in gdr_off[:2]) or tuple(c.quote for c in ib[:1] if c.quote)
        fix = "Load nvidia_peermem (or use DMA-BUF); check NCCL_NET_GDR_LEVEL."
        out.add("TD026", Candidate(f"GPUDirect RDMA off on every host ({reason})", fix, {"reason": reason}), lines)
    elif ib:
        out.rule_out("GPUDirect RDMA: on for every network connection")


def _fewer_nics(f: Facts, sym: Symptom | None, out: Leads, rdma: list[str]) -> None:
    hca = f.settings.get("NCCL_IB_HCA")
    present = list(
        dict.fromkeys(
            n.name
            for n in f.nics
            if (n.link_layer in ("IB", "RoCE") or n.name.startswith(RDMA_NAMES)) and n.state != "DOWN"
        )
    )
    using = next((s for s in f.net if s.line.what == "ib-devices"), None)
    if hca is None and using is not None and present:
        found = {d.split("/")[0] for d in using.line.value.split()}
        if 0 < len(found) < len(present):
            ref = sym.expected_gbps if sym is not None else None
            what = f"NCCL found {len(found)} of the node's {len(present)} RDMA NICs ({', '.join(sorted(found))})"
            exp = ref * len(found) / len(present) if ref else None
            fix = "Check the missing ports are up (`ibstat`) and visible in the container (/dev/infiniband)."
            out.add("TD035", Candidate(what, fix, {"used": sorted(found), "present": present}, exp), (using.quote,))
        return
    if hca is None or not present:
        return
    value = hca[0].strip()
    if value.startswith("^"):
        return
    named = [v.split(":")[0].lstrip("=") for v in value.split(",") if v.strip()]
    used = [n for n in present if any(n.startswith(x) for x in named)]
    if 0 < len(used) < len(present):
        ref = sym.expected_gbps if sym is not None else None
        what = f"NCCL_IB_HCA={value} leaves NCCL {len(used)} of the node's {len(present)} RDMA NICs"
        exp = ref * len(used) / len(present) if ref else None
        out.add(
            "TD035",
            Candidate(what, "List every NIC in NCCL_IB_HCA, or unset it.", {"used": used, "present": present}, exp),
            (hca[1],),
        )


def setting_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """A setting that caps NCCL: channels, protocol, algorithm, threads, buffers (TD036)."""
    ref = sym.expected_gbps if sym is not None else None
    op = sym.subject if sym is not None and sym.kind == "collective" else ""
    s = f.settings
    default = max(2, round(2 * ref / SEARCH_CHANNEL_GBPS)) if ref else None
    # a cap is a cause only of a figure it explains: with none judged short it may cap, and is said so
    said: Severity | None = None if sym is not None else "info"
    for name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MAX_P2P_NCHANNELS"):
        if name in s and s[name][0].strip().isdigit():
            cap = int(s[name][0])
            if default is None or cap < default:
                exp = ref * cap / default if ref and default else None
                held = "holds NCCL to" if sym is not None else "may cap NCCL at"
                what = f"{name}={cap} {held} {plural(cap, 'channel')}" + (f" (about {default} here)" if default else "")
                if sym is None:
                    what += "; no figure shows it did (a bandwidth-bound size, 128M or more, would)"
                cand = Candidate(what, f"Unset {name}.", {"variable": name, "value": cap}, exp)
                out.add("TD036", cand, (s[name][1],), severity=said)
    if "NCCL_PROTO" in s:
        value = s["NCCL_PROTO"][0].strip()
        allowed = {p.strip().upper() for p in value.lstrip("^").split(",")}
        if not value.startswith("^") and "SIMPLE" not in allowed and op not in ("sendrecv", "alltoall", "all_to_all"):
            share = max((PROTO_SHARE[p] for p in PROTO_SHARE if p in allowed), default=1.0)
            exp = ref * share if ref else None
            arch = f.model.arch.lower() if f.model is not None else ""
            if exp is not None and allowed == {"LL"} and arch in LL_MAX_GBPS and (sym is None or sym.nodes == 1):
                exp = min(exp, LL_MAX_GBPS[arch])  # tuning.cc llMaxBws: what NCCL credits LL with on one node
            if share < 1.0:
                cand = Candidate(f"NCCL_PROTO={value} keeps NCCL off Simple", "Unset NCCL_PROTO.",
                                 {"variable": "NCCL_PROTO", "value": value}, exp)  # fmt: skip
                # without a figure: what the protocol costs large sizes is certain, that it cost this run is not
                out.add("TD036", cand, (s["NCCL_PROTO"][1],), severity=None if sym is not None else "warning")
    if "NCCL_ALGO" in s and sym is not None:  # a forced algorithm is a cause only of a figure short of its model
        value = s["NCCL_ALGO"][0]
        out.add(
            "TD036",
            Candidate(
                f"NCCL_ALGO={value} forces NCCL's algorithm",
                "Unset NCCL_ALGO.",
                {"variable": "NCCL_ALGO", "value": value},
                ref if "RING" in value.upper() else None,
                direct=True,
            ),
            (s["NCCL_ALGO"][1],),
        )
    if "NCCL_NTHREADS" in s and s["NCCL_NTHREADS"][0].strip().isdigit():
        t = int(s["NCCL_NTHREADS"][0])
        if t < DEFAULT_NTHREADS:
            exp = ref * t / DEFAULT_NTHREADS if ref else None
            out.add(
                "TD036",
                Candidate(
                    f"NCCL_NTHREADS={t} runs NCCL's kernels with {t} threads (512 by default)",
                    "Unset NCCL_NTHREADS.",
                    {"variable": "NCCL_NTHREADS", "value": t},
                    exp,
                ),
                (s["NCCL_NTHREADS"][1],),
                # fewer threads cost bandwidth where the links are fast (the guide: NVLink left idle); with no
                # figure to hold it against it is said, not blamed
                severity=None if sym is not None else "info",
            )
    if "NCCL_BUFFSIZE" in s and s["NCCL_BUFFSIZE"][0].strip().isdigit():
        b = int(s["NCCL_BUFFSIZE"][0])
        if b < DEFAULT_BUFFSIZE:
            out.add(
                "TD036",
                Candidate(
                    f"NCCL_BUFFSIZE={b} stages data in small buffers (4 MiB by default)",
                    "Unset NCCL_BUFFSIZE.",
                    {"variable": "NCCL_BUFFSIZE", "value": b},
                ),
                (s["NCCL_BUFFSIZE"][1],),
                severity=said,
            )
    if "NCCL_SHM_DISABLE" in s and s["NCCL_SHM_DISABLE"][0].strip() not in ("", "0"):
        # shm.cc: SHM refuses every connection, so ranks of a node without P2P between them (GPUs under
        # different CPU sockets, a GPU without P2P) are joined by the next transport, the network
        what = f"NCCL_SHM_DISABLE={s['NCCL_SHM_DISABLE'][0]} takes SHM away: ranks of one node without P2P between "
        what += "them (GPUs under different CPU sockets, or without P2P) go through the network (the NIC, or sockets)"
        fix = "Unset NCCL_SHM_DISABLE (it works around a failing /dev/shm, at a cost in speed)."
        cand = Candidate(what, fix, {"variable": "NCCL_SHM_DISABLE", "value": s["NCCL_SHM_DISABLE"][0]})
        out.add("TD036", cand, (s["NCCL_SHM_DISABLE"][1],), severity=said)


def _sizes_shown(f: Facts) -> list[int]:
    """The sizes the evidence shows measured: nccl-tests' rows, or the -e of its command line."""
    return [m.size_bytes for m in f.measured] + [x.max_bytes for x in f.launches if x.program and x.max_bytes]


def version_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """A release with a known regression at the sizes judged (TD037): the bandwidth-bound sizes of a
    short figure, or, with no figure to judge, a run whose sizes are all latency-bound; a regression with a
    symptom of its own (an algorithm, a setting, a model, the scale) where the evidence shows it."""
    regression_causes(f, sym, out)
    if not f.nccl_version:
        if sym is not None and sym.kind == "collective":  # a copy test runs no NCCL
            out.ask("the NCCL version (NCCL_DEBUG=VERSION, or nccl-tests' header)")
        return
    arch = f.model.arch if f.model is not None else ""
    found = regressions_of(f.nccl_version, arch, sym.nodes > 1 if sym is not None else None)
    for r in found:
        if r.sizes != "large" or sym is None or r.sign:  # one with a sign: evidence_search.py, where the log shows it
            continue
        if r.algo or r.setting[0] or r.models or r.ops or r.min_nodes:
            continue  # a symptom of its own: evidence_regressions.py, where the evidence shows it
        what = f"NCCL {f.nccl_version} has a known regression on {r.where}: {r.what}"
        out.add(
            "TD037",
            Candidate(
                what,
                f"Compare with NCCL {r.unaffected} ({r.source}).",
                {"source": r.source, "unaffected": r.unaffected},
                None,
                direct=False,
            ),
        )
    sizes = _sizes_shown(f)
    small = [r for r in found if r.sizes == "small"]
    if sym is None and small and sizes and max(sizes) < BANDWIDTH_BOUND_BYTES:
        what = f"NCCL {f.nccl_version} has a known regression at the latency-bound sizes this run measures "
        what += f"(up to {human_size(max(sizes))}): " + "; ".join(f"{r.what} (seen on {r.where})" for r in small)
        fix = "Compare with NCCL " + "; ".join(f"{r.unaffected} ({r.source})" for r in small) + "."
        ev = {"sources": [r.source for r in small], "unaffected": [r.unaffected for r in small]}
        out.add("TD037", Candidate(what, fix, ev, None, direct=False), severity="warning")


@dataclass(frozen=True)
class Swept:
    """The node a sweep's slow pairs point to: the runs (by index) that have it, all slow; the slow runs
    without it; and how it was found ("common": in every slow pair; "partners": every pair it joins is
    slow while each partner runs at full rate with another node)."""

    node: str
    slow: tuple[int, ...]
    apart: tuple[int, ...]
    how: str
    partners: tuple[str, ...] = ()


def sweep_cause(runs: Sequence[tuple[frozenset[str], float]]) -> Swept | None:
    """In a sweep of two-node runs (each its two hosts and busbw), the node every slow pair has and no
    healthy pair has, or else the one node whose every pair (two at least) is slow while each of its
    partners is healthy with another node; None where the sweep names no one node."""
    if len(runs) < 3:
        return None
    best = max(b for _, b in runs)
    slow = [k for k, (_, b) in enumerate(runs) if b < SLOW_PAIR * best]
    fast_hosts: set[str] = set().union(*(h for h, b in runs if b >= SLOW_PAIR * best))
    if not slow or not fast_hosts:
        return None
    common = set.intersection(*(set(runs[k][0]) for k in slow)) - fast_hosts
    if len(common) == 1:
        return Swept(common.pop(), tuple(slow), (), "common")
    found = []
    for node in sorted(set().union(*(runs[k][0] for k in slow)) - fast_hosts):
        mine = [k for k in slow if node in runs[k][0]]
        partners = set().union(*(runs[k][0] for k in mine)) - {node}
        if len(mine) >= 2 and partners <= fast_hosts:
            found.append(Swept(node, tuple(mine), tuple(k for k in slow if k not in mine), "partners",
                               tuple(sorted(partners))))  # fmt: skip
    return found[0] if len(found) == 1 else None


def one_gpu_slow(f: Facts, out: Leads) -> None:
    """One GPU whose copies to and from every peer run well under the others' (TD039)."""
    for c in f.copies:
        if c.unit != "GB/s" or c.p2p is False or len(c.rows) < 3 or c.rows != c.columns:
            continue
        per: dict[str, list[float]] = {}
        for i, r in enumerate(c.rows):
            for j, col in enumerate(c.columns):
                v = c.values[i][j] if i < len(c.values) and j < len(c.values[i]) else None
                if r != col and v is not None:
                    per.setdefault(r, []).append(v)
                    per.setdefault(col, []).append(v)
        typical = {g: median(vs) for g, vs in per.items() if vs}
        if len(typical) < 3:
            continue
        worst = min(typical, key=lambda g: typical[g])
        others = median([v for g, v in typical.items() if g != worst])
        if typical[worst] < SLOW_GPU * others:
            what = f"GPU{worst}'s copies run at {typical[worst]:.0f} GB/s against {others:.0f} for the others"
            out.add(
                "TD039",
                Candidate(
                    what,
                    f"Look for another process on GPU{worst} (nvidia-smi).",
                    {"gpu": worst, "gbps": typical[worst], "others_gbps": others},
                    None,
                    direct=False,
                ),
                (Quote(f.where.get(c.piece, c.tool), c.testcase),),
                f"GPU{worst}",
            )
            return
