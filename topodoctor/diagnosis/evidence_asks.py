"""What a user's evidence leaves undecided, said as such: the candidates and the output that would tell
them apart, where a guess would be a confident wrong cause (TD022). Two runs of one test whose averages
differ while nothing else was posted (a warning: one is short of the other); a run split over hosts beside
the topology of one host that holds all its GPUs (machines, or containers of that host)."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.diagnosis.evidence_decide import (
    ACS_IOMMU,
    ACS_NIC,
    CHANNELS_NET,
    FEW_NICS,
    GDR,
    HOST_OTHER,
    IBSTAT,
    IFACES,
    IPERF_P,
    LSPCI,
    NCCL_LOG,
    NCCL_TESTS,
    NVLINK,
    NVLINK_DOWN,
    P2P_OFF,
    P2P_TEST,
    PATH,
    PCIE_DOWN,
    PORTS,
    SMI_Q,
    SMI_RUN,
    SOCKETS,
    STREAMS,
    TOPO,
    TOPO_DUMP,
    first_ask,
)
from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.diagnosis.evidence_hosts import candidate_line, described, host_causes, host_kinds
from topodoctor.diagnosis.evidence_leads import Symptom
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.evidence_sockets import tcp_said
from topodoctor.model.findings import Severity

PEERMEM = "`lsmod | grep -e nvidia_peermem -e nv_peer_mem` (the GPUDirect RDMA module)"
GIGABIT = 1.0  # Gb/s: a network stated at this rate or under is the bound of any GPU job across it
APART = 0.87  # two runs of one test whose averages differ more than this: one is short of the other


@dataclass(frozen=True)
class Ask:
    """A "cannot tell" the evidence leaves: severity, subject, message and evidence."""

    severity: Severity
    subject: str
    message: str
    evidence: dict[str, object]
    code: str = "TD022"


def differing_averages(f: Facts) -> list[Ask]:
    """Runs shown only by their Avg bus bandwidth lines, one well below another."""
    runs = f.averages
    if len(runs) < 2 or f.measured:
        return []
    low = min(runs, key=lambda r: r[1])
    high = max(runs, key=lambda r: r[1])
    if high[1] <= 0 or low[1] >= APART * high[1]:
        return []
    programs = {ln.program for ln in f.launches if ln.program}
    op = low[0] or high[0] or (programs.pop() if len(programs) == 1 else "the test")
    msg = f"cannot tell why {op} averages {low[1]:g} GB/s busbw in one run ({low[2].where}) and {high[1]:g} in "
    msg += f"another ({high[2].where}): {low[1] / high[1]:.2f} of it, and the pastes show only the averages. "
    msg += "Candidates, most likely first: a different NCCL version (a release's regression or changed tuning, "
    msg += "such as fewer channels per peer), different settings (NCCL_ALGO, NCCL_PROTO, channels), a different "
    msg += "transport or network path. To decide, post the NCCL_DEBUG=INFO output of both runs (the NCCL version "
    msg += "line, `channels per peer`, the `via` lines) and each run's whole table"
    ev = {"low_gbps": low[1], "high_gbps": high[1], "lines": [str(low[2]), str(high[2])],
          "post": ["NCCL_DEBUG=INFO output of both runs", "the NCCL version of each"]}  # fmt: skip
    return [Ask("warning", op, msg, ev)]


def split_launch(f: Facts) -> list[Ask]:
    """A launch over several hosts whose GPUs one host of the evidence holds, with no NCCL log to say
    how NCCL joined them."""
    if f.nccl_logged or not f.links:
        return []
    gpus = len({g for pair in f.links for g in pair})
    out = []
    for ln in f.launches:
        hosts = [h for h, _ in ln.hosts]
        slots = [n for _, n in ln.hosts if n]
        if len(set(hosts)) < 2 or not slots or max(slots) > gpus or any(x.launcher == "docker" for x in f.launches):
            continue
        named = ", ".join(f"{h} ({n} slots)" if n else h for h, n in ln.hosts)
        msg = f"cannot tell how the run over {named} joins its GPUs: the topology shown is one host's with "
        msg += f"{gpus} GPUs. If those hosts are separate machines, the network between them carries the ring; "
        msg += "if they are containers of this host, NCCL joins their GPUs through SHM or sockets instead of "
        msg += "NVLink, unless every container sees all the GPUs and shares the IPC namespace. To decide, post "
        msg += "NCCL_DEBUG=INFO output of the run (its `via P2P`, `via SHM`, `via NET` lines and nNodes) and the "
        msg += "`docker run` lines of the containers"
        ev = {"hosts": hosts, "gpus_shown": gpus,
              "post": ["NCCL_DEBUG=INFO output of the run", "the `docker run` lines"]}  # fmt: skip
        out.append(Ask("info", "launch", msg, ev))
        break
    return out


def candidates(f: Facts, sym: Symptom) -> list[tuple[str, str, str]]:
    """The causes a shortfall the evidence does not explain could have, most common first for its kind of
    run, each as (key, what, the output that would show it); those the evidence already rules out are left
    out. `evidence_decide.first_ask` picks which output tells the first two apart."""
    logged = f.nccl_logged
    via = {c.kind for c in f.conns}
    # the causes the host's description points to come first: the words name the kind of host, not the cause
    out: list[tuple[str, str, str]] = [(c.key, c.what, c.post) for _, c, _ in host_causes(f, sym.nodes > 1)]
    taken = {k for k, _, _ in out}
    return out + [c for c in _generic(f, sym, logged, via) if c[0] not in taken]


def _generic(f: Facts, sym: Symptom, logged: bool, via: set[str]) -> list[tuple[str, str, str]]:
    """The candidates of a run of the symptom's kind, whatever the host."""
    out: list[tuple[str, str, str]] = []
    if sym.subject.startswith("host-"):
        if not any(g.pcie_width for g in f.gpus) and not f.pcie:
            out.append((PCIE_DOWN, "the GPU's PCIe link trained down (width or generation)", SMI_Q))
        out.append((HOST_OTHER, "another process on that GPU, or a CPU far from it (NUMA)", SMI_RUN))
        return out
    if sym.kind == "collective" and sym.nodes > 1 and (rate := tcp_said(f)) is not None:
        return _tcp_candidates(rate)
    if sym.kind == "collective" and sym.nodes > 1:
        if not (logged and any(s.line.what in ("network", "socket", "ib-devices") for s in f.net)):
            out.append((SOCKETS, "NCCL on TCP sockets (`NET/Socket`) instead of the RDMA NICs (`NET/IB`)", NCCL_LOG))
        if "net" not in via and any("gdr" in c.checked for c in f.prose):
            # NCCL takes GPUDirect RDMA only where the GPU and the NIC are within NCCL_NET_GDR_LEVEL (PXB by
            # default) of each other (ncclTopoCheckGdr): whether it being off costs anything is the PCI path's
            what = "GPUDirect RDMA off (the reporter speaks of it): it matters only where the GPU and the NIC share "
            what += "a PCI switch (NCCL_NET_GDR_LEVEL, PXB by default), so the PCI topology decides"
            out.append((GDR, what, TOPO_DUMP))
        elif "net" not in via:
            out.append((GDR, "GPUDirect RDMA off, or on one node only", NCCL_LOG))
        hca = f.settings.get("NCCL_IB_HCA")
        named = [n for n in (hca[0].lstrip("=^").split(",") if hca else []) if n]
        if hca and not hca[0].startswith("^") and len(named) == 1:
            what = f"one NIC used of several (NCCL_IB_HCA={hca[0]}), or GPUs far from it (no GPUDirect RDMA)"
            out.append((FEW_NICS, what, TOPO))
        elif not f.nics and not f.nic_paths:
            what = "fewer NICs used than the host has, or GPUs far from the NIC used (no GPUDirect RDMA)"
            out.append((FEW_NICS, what, TOPO))
        if not any(n.state or n.port is not None for n in f.nics):
            out.append((PORTS, "NIC ports down, or below their rate", IBSTAT))
        if not any(p.acs_ctl for p in f.pcie):
            out.append((ACS_NIC, "ACS redirecting the NIC-GPU traffic (ATS/ACS settings in a VM)", LSPCI))
        return out
    if sym.kind == "collective" and "p2p" not in via and "shm" not in via:
        out.append((P2P_OFF, "P2P off: a variable, or containers that split the GPUs", NCCL_LOG))
    if not f.links:
        out.append((PATH, "the GPUs' path (PCIe switch, host bridge, the sockets)", TOPO))
    if not any(g.pcie_width for g in f.gpus) and not f.pcie:
        out.append((PCIE_DOWN, "a PCIe link trained down", SMI_Q))
    copies = {c.p2p for c in f.copies}
    # P2P and staged copies both shown: TD029 weighed them, and names ACS / IOMMU where P2P is slower
    if not (True in copies and False in copies) and not any(p.acs_ctl for p in f.pcie):
        out.append((ACS_IOMMU, "ACS or the IOMMU redirecting peer traffic", P2P_TEST))
    if f.model is not None and f.model.nvlink_links and not any(g.nvlinks_up is not None for g in f.gpus):
        out.append((NVLINK_DOWN, "NVLinks down against the model", NVLINK))
    return out


def _tcp_candidates(rate: float) -> list[tuple[str, str, str]]:
    """The candidates of a run between nodes short on a TCP network (net_socket.cc, connect.cc): the socket
    transport opens one connection per channel and peer, each of NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD
    streams (unset: one outside AWS and GCP), on one of the interfaces it found, so a run under the line rate
    has too few channels or streams to fill it, or its traffic on fewer or slower interfaces than the host has."""
    line = f"{rate:g} Gb/s"
    return [
        (CHANNELS_NET, f"too few channels (rings) for the {line} TCP network: each channel is a connection of its own "
         "through one interface, so a few channels leave the line, or a second NIC, part idle; raise them with "
         "NCCL_MIN_NCHANNELS=4 (NCCL_MIN_NRINGS in releases before 2.5, still read as its legacy name, connect.cc)",
         NCCL_LOG),
        (STREAMS, "one TCP stream per connection (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, unset outside AWS "
         "and GCP: net_socket.cc), so the rate of one stream, under the line's on many hosts; try "
         "NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4", IPERF_P),
        (IFACES, "the interfaces NCCL's sockets use (NET/Socket : Using ..., NCCL_SOCKET_IFNAME): one NIC of "
         "several, or a slower one", NCCL_LOG),
    ]  # fmt: skip


def asks_first(ranked: list[tuple[str, str, str]]) -> list[str]:
    """The outputs to post, the one that tells the two likeliest candidates apart first."""
    first = first_ask([k for k, _, _ in ranked])
    return list(dict.fromkeys(([first] if first else []) + [p for _, _, p in ranked]))


def unshown_network(f: Facts) -> list[Ask]:
    """A multi-node run shown only by its launch line, its NICs' listing or the reporter's words that it is
    slow: nothing says how NCCL ran between the nodes, so the candidates of a slow multi-node run are what to
    rule out."""
    if f.nccl_logged or f.measured or f.averages:
        return []
    spans = max((ln.nodes or 0 for ln in f.launches), default=0)
    listed = any(n.state or n.port is not None or n.measured_gbps is not None for n in f.nics)
    # a post about another library's run (UCX's, MPI's) is not NCCL's: what NCCL did is no question there
    slow_across = [c for c in f.prose if c.slow and (c.across_nodes or (c.nodes or 0) > 1)]
    said = any(not c.stack for c in slow_across)
    if spans < 2 and not listed and not said:
        return []  # another library's run between nodes: ``evidence_stacks`` asks for its own outputs
    shown = f"a launch over {spans} nodes" if spans >= 2 else "the NICs' listing or an RDMA test"
    shown = "the reporter's words of a slow multi-node run" if spans < 2 and not listed else shown
    probe = Symptom("collective", "network", 0.0, 0.0, "", 0, 2, Quote("the evidence"))
    ranked = candidates(f, probe)
    post = asks_first(ranked)
    msg = f"cannot tell how NCCL ran between the nodes: {shown}, but no figure and no NCCL log. First post "
    msg += f"{post[0]}: it tells the two likeliest causes apart. A slow multi-node run's candidates, most "
    msg += "common first: " + "; ".join(f"{w} (post {p})" for _, w, p in ranked)
    ev: dict[str, object] = {"post": post[:2], "candidates": [w for _, w, _ in ranked]}
    rate = tcp_said(f)
    if rate is not None and rate <= GIGABIT and said:
        # a gigabit network between GPU nodes: whatever NCCL chose, the line itself caps each node's traffic
        msg = (
            f"the nodes are joined by a {rate:g} Gb/s network ({'gigabit Ethernet, ' if rate == 1 else ''}"
            f"{rate / 8:g} GB/s a node, the reporter's words): the network bandwidth caps "
            "NCCL's traffic between nodes, which cannot go faster than the line, thousands of times below NVLink and a "
            "hundred times below one 100 Gb/s RDMA NIC (12.5 GB/s), so a job that exchanges its gradients or "
            "activations across it spends most of its time waiting on the network; it is the likeliest bound of the "
            "slow multi-node run. An RDMA "
            "network (InfiniBand or RoCE, 100 Gb/s or more a node) or keeping the job on one node's GPUs removes "
            f"it; {post[0]} shows what NCCL used."
        )
        ev["network_gbit_s"] = rate
    # the reporter says it is slow: a shortfall on their word, cause not found (warning, as for a short figure)
    return [Ask("warning" if spans < 2 and not listed else "info", "network", msg, ev)]


def gdr_unshown(f: Facts) -> list[Ask]:
    """NCCL took InfiniBand between hosts (`NET/IB : Using`) and the log shows neither a connection nor a GPUDirect
    RDMA line: whether the data goes NIC to GPU directly is what the lines left out say. Each channel's connection
    is logged at INIT (`via NET/IB/0/GDRDMA` with GPUDirect RDMA, `via NET/IB/0` without it: transport/net.cc),
    and the reason it is off at NET (`GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)`: net_ib.cc up to
    2.7, `NET/IB : GPU Direct RDMA Disabled for HCA` from topo.cc later), so a paste of the device lines alone
    cannot tell. Information: nothing in it is wrong."""
    if f.measured or f.averages or any(c.kind == "net" for c in f.conns):
        return []
    ib = [s for s in f.net if s.line.what == "ib-devices" and s.line.value]
    if not ib or any(s.line.what in ("gdr-on", "gdr-off") for s in f.net):
        return []
    hosts = sorted({s.host for s in f.net if s.host})
    if len(hosts) < 2 and (f.nccl_nodes or 0) < 2:
        return []
    on = f"on {', '.join(hosts[:4])}" if len(hosts) > 1 else f"across {f.nccl_nodes} nodes"
    msg = f"cannot tell whether GPUDirect RDMA is in use: NCCL took InfiniBand ({ib[0].quote.text[:80]!r}) {on}, "
    msg += "but no line shows how it connected the ranks (`via NET/IB/0/GDRDMA` with GPUDirect RDMA, `via NET/IB/0` "
    msg += "without it: the data then staged through host memory) nor a `GPU Direct RDMA Disabled for HCA` line. "
    msg += "First post "
    msg += f"{NCCL_LOG}, whole, with {PEERMEM} on each node"
    ev: dict[str, object] = {"lines": [str(ib[0].quote)], "post": [NCCL_LOG, PEERMEM]}
    return [Ask("info", "gdr", msg, ev)]


def version_only(f: Facts) -> list[Ask]:
    """An NCCL version with nothing of the run: which output would show how it ran."""
    if not f.nccl_version or f.nccl_logged or f.measured or f.averages or f.copies or f.links or f.nics:
        return []
    if f.launches or f.gpus or f.pcie:
        return []
    msg = f"only the NCCL version ({f.nccl_version}) is shown: nothing says how the run went. Post the run's "
    msg += "NCCL_DEBUG=INFO output (its network, transports and channels) and its figures (nccl-tests' table)"
    ev: dict[str, object] = {"post": ["NCCL_DEBUG=INFO output of the run"]}
    return [Ask("info", "nccl-version", msg, ev)]


def unmeasured_host(f: Facts) -> list[Ask]:
    """A host's topology or GPUs shown with no figure of the run: whether anything is slow at all is what
    the figure says, so it is what to post first."""
    if f.measured or f.averages or f.copies or f.nccl_logged or not (f.links or f.gpus):
        return []
    if any((ln.nodes or 0) >= 2 for ln in f.launches):
        return []  # a multi-node launch: unshown_network asks for what shows the network
    shown = "the GPUs' topology" if f.links else "the GPUs"
    msg = f"{shown} shown, but no figure of the run: nothing to judge against this hardware. First post "
    if tools := list(dict.fromkeys(t for c in f.prose for t in c.copy_tools)):  # the copy test the reporter ran
        said = f"{' and '.join(tools)}'s whole output (each Bandwidth Matrix or testcase table, with its header)"
        msg += f"{said}, as text, then {TOPO}"
        return [Ask("info", "figures", msg, {"post": [said, TOPO]})]
    msg += f"{NCCL_TESTS}, then, if it falls short, {NCCL_LOG}"
    return [Ask("info", "figures", msg, {"post": [NCCL_TESTS, NCCL_LOG]})]


def described_host(f: Facts, judged: bool) -> list[Ask]:
    """The reporter says the run is slow on a host whose kind is known for some causes, and no figure was
    judged (``judged``: a figure was, normal or short, and its own finding answers): cannot tell which, so the
    candidates ranked, with what tells them apart, and the one output to post first (TD986, warning)."""
    if judged or not any(c.slow for c in f.prose):
        return []
    across = any(c.across_nodes or (c.nodes or 0) > 1 for c in f.prose) or (f.nccl_nodes or 0) > 1
    causes = host_causes(f, across)
    if not causes:
        return []
    post = asks_first([(c.key, c.what, c.post) for _, c, _ in causes])
    kinds = tuple(dict.fromkeys(k for k, _, _ in causes))
    msg = f"cannot tell why the run is slow: the sentences describe {described(kinds)} and say it is slow, and "
    msg += "the words alone decide nothing. First post " + post[0] + ". What such a host is known for, most "
    msg += "telling first: " + "; ".join(candidate_line(c, said) for _, c, said in causes)
    ev: dict[str, object] = {"hosts": list(host_kinds(f)), "post": post[:2],
                             "candidates": [c.what for _, c, _ in causes]}  # fmt: skip
    return [Ask("warning", "host", msg, ev, "TD986")]
