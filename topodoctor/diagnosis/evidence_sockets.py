"""A run between nodes over NCCL's socket transport: what the evidence says of the network it had (RDMA
NICs NCCL did not use, a network of TCP alone, or not shown), the fix that follows from it, and the
figure held against the Ethernet line rate `ethtool` shows.

What the socket transport makes of a line (src/transport/net_socket.cc, 2.18 - 2.30): each connection
of a channel sends over its own TCP streams, split evenly, so the rate is the slowest stream's times
the streams. The streams per connection are NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD; left unset,
NCCL picks by the NIC's PCI vendor: 2 threads x 8 sockets on AWS (0x1d0f), 4 x 1 on GCP (0x1ae0), and
otherwise no helper thread (the proxy sends on the connection's one stream). NCCL caps the threads at
16 (MAX_THREADS) and the sockets at 64 (MAX_SOCKETS, lowering NCCL_NSOCKS_PERTHREAD to fit). How fast
one TCP stream runs on a given host is no property of the line, so below the line rate the figure
cannot be judged from the line alone: what one stream reaches decides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from topodoctor.diagnosis.evidence_expect import BANDWIDTH_BOUND_BYTES
from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.diagnosis.evidence_leads import Symptom
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.findings import Severity

LINE_SHARE = 0.9  # a figure at or above this share of the line rate is the line's, whatever the streams
AUTO_STREAMS = {"AWS": 16, "GCP": 4}  # NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD chosen by vendor
MAX_THREADS = 16  # net_socket.cc MAX_THREADS: NCCL_SOCKET_NTHREADS above it is lowered to it
MAX_SOCKETS = 64  # net_socket.cc MAX_SOCKETS: threads x sockets per thread above it is lowered to it
SOCKET_TUNING = ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD")
IPERF = "`iperf3 -c NODE -P N` between two nodes (each stream's rate, N the streams NCCL opens)"
ASK_NICS = "`ibv_devinfo` of a node, or `nvidia-smi topo -m` with its NIC legend (whether the nodes have RDMA NICs)"

# libibverbs' warning in words: the verbs library loaded, the device's provider library (libmlx5, ...) did not
NO_PROVIDER = "libibverbs has no provider library (userspace device-specific driver)"

Network = Literal["rdma", "tcp", "unknown"]
# A network said in words at this line rate or under, with no RDMA named: Ethernet carrying TCP (RoCE and
# InfiniBand start above it: 25 GbE RoCE, IB EDR 100 Gb/s), so NCCL's socket transport between the nodes
TCP_SAID_GBIT_S = 10.0
_RDMA_WORDS = ("IB", "INFINIBAND", "ROCE", "ROCEV2", "EFA", "HDR", "HDR100", "NDR", "NDR200", "EDR", "FDR", "XDR")


def setting_value(f: Facts, name: str) -> str | None:
    """A variable's value as set, its first word only (a log line may run on after it)."""
    got = f.settings.get(name)
    if got is None:
        return None
    words = got[0].strip().rstrip(".").split()
    return words[0].rstrip(".") if words else ""


def rdma_fix(rdma: list[str]) -> str:
    """The fix where the nodes have RDMA NICs NCCL did not use."""
    named = f" ({', '.join(rdma[:4])})" if rdma else ""
    return (f"Give NCCL the RDMA NICs{named}: libibverbs (rdma-core) in the image, --device=/dev/infiniband "
            "(and --cap-add=IPC_LOCK) on the container, NCCL_IB_DISABLE unset, NCCL_IB_HCA unset or naming those "
            "NICs; NCCL then logs `NET/IB : Using`.")  # fmt: skip


def streams(f: Facts) -> tuple[int | None, str]:
    """The TCP streams per connection the settings shown make (None where NCCL picks), in words."""
    threads, socks = (setting_value(f, n) for n in SOCKET_TUNING)
    if threads is not None and socks is not None and threads.isdigit() and socks.isdigit():
        t = min(int(threads), MAX_THREADS)
        s = min(int(socks), MAX_SOCKETS // t) if t else int(socks)
        n = t * s
        return n, f"{n} streams per connection (NCCL_SOCKET_NTHREADS={threads} x NCCL_NSOCKS_PERTHREAD={socks})"
    return None, "the streams NCCL picks by the NIC's vendor (16 on AWS, 4 on GCP, else one per connection)"


def tcp_fix(f: Facts) -> str:
    """The fix on a network of TCP alone: the socket transport's own limits, never "enable RDMA"."""
    n, said = streams(f)
    now = f"; this run: {said}" if n is not None else ""
    return ("The socket transport sets the rate on a TCP-only network: NCCL splits each connection's data "
            "evenly over its TCP streams, so it runs at the slowest stream's rate times the streams "
            f"(NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, at most {MAX_THREADS} threads and {MAX_SOCKETS} "
            f"sockets in all; unset: 2 x 8 on AWS, 4 x 1 on GCP, else one stream{now}). Measure one stream with "
            "`iperf3 -P N`, tune the TCP stack for steady single flows rather than their sum, try more streams "
            "(NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4); beyond that only an RDMA network goes faster."
            )  # fmt: skip


def network_of(f: Facts, rdma: list[str]) -> tuple[Network, str]:
    """What the evidence says of the nodes' network, and why: RDMA NICs listed (ibstat, ibv_devinfo, topo -m's
    NIC legend, NCCL's NET/IB lines), a network of TCP alone (interfaces listed with no RDMA device, the socket
    transport tuned by hand), or not shown."""
    if rdma:
        return "rdma", f"the nodes have RDMA NICs ({', '.join(rdma[:4])})"
    ethernet = sorted({n.name for n in f.nics if n.link_layer == "Ethernet"})
    tuned = [n for n in SOCKET_TUNING if n in f.settings]
    if ethernet:
        # a RoCE NIC's netdev is Ethernet to ethtool too: only the absence of any RDMA listing makes it TCP
        return "tcp", (f"the interfaces listed ({', '.join(ethernet[:3])}) are Ethernet and no RDMA device is "
                       "listed (`ibv_devinfo` would list a RoCE NIC's)")  # fmt: skip
    if tuned:
        return "tcp", f"the socket transport is tuned by hand ({', '.join(tuned)}) and no RDMA device is listed"
    hca = setting_value(f, "NCCL_IB_HCA")
    if hca and not hca.startswith("^"):  # the user named the NICs: whether they exist is still not shown
        return "unknown", f"no NIC listing shows the RDMA NICs NCCL_IB_HCA names ({hca[:60]})"
    return "unknown", "no NIC listing shows whether the nodes have RDMA NICs"


def tcp_said(f: Facts) -> float | None:
    """The line rate (Gb/s) of a network the sentences state as Ethernet-class (TCP, or 10 Gb/s and under) where
    nothing in the evidence names RDMA (no RDMA word, no IB or RoCE port listed, no NET/IB line); None otherwise."""
    if any(c.nic_kind.upper() in _RDMA_WORDS for c in f.prose):
        return None
    if any(n.link_layer in ("IB", "RoCE") for n in f.nics) or any(s.line.what.startswith("ib-") for s in f.net):
        return None
    rates = [c.nic_gbit_s for c in f.prose if c.nic_gbit_s and (c.nic_gbit_s <= TCP_SAID_GBIT_S or c.nic_kind == "TCP")]
    return min(rates) if rates else None


@dataclass(frozen=True)
class SocketCause:
    """TD025 as the evidence shows it: the candidate, its severity and the outputs that would decide."""

    candidate: Candidate
    severity: Severity | None
    asks: tuple[str, ...]


def socket_cause(f: Facts, sym: Symptom | None, nodes: int | None, rdma: list[str], why: list[str]) -> SocketCause:
    """Sockets between nodes, with the fix the network shown calls for: the RDMA fix where RDMA NICs are
    listed (error); the socket transport's limits on a TCP-only network (warning); both, and the listing that
    tells them apart, where neither is shown (warning)."""
    kind, basis = network_of(f, rdma)
    what = "NCCL's network " + ("between nodes " if nodes else "") + "is TCP sockets"
    what += f" ({'; '.join(why)})" if why else ""
    share, asks = socket_share(f, sym)
    ev: dict[str, object] = {"rdma": rdma, "why": why, "network": kind}
    if kind == "rdma":
        fix = rdma_fix(rdma)
        severity: Severity | None = None
        if any(w.startswith(NO_PROVIDER) for w in why):
            # the warning shows a device without its provider; on one node (or nodes not shown) NCCL's
            # network may carry nothing, so the missing provider is said at warning, not blamed
            severity = None if nodes and nodes > 1 else "warning"
            fix = (
                "Install the verbs provider in the image (Debian/Ubuntu: ibverbs-providers, which holds libmlx5; "
                "RHEL and its kin: libibverbs, built from rdma-core): libibverbs finds the device but cannot "
                f"open it without its driver library, so NCCL has no IB device and falls back to sockets. {fix}"
            )
        cand = Candidate(what + f" though {basis}" + share, fix, ev)
        return SocketCause(cand, severity, tuple(asks))
    if kind == "tcp":
        what += f"; {basis}: a TCP-only network, where the socket transport's streams set the rate" + share
        return SocketCause(Candidate(what, tcp_fix(f), ev, None, direct=False), "warning", tuple(asks))
    what += f"; {basis}: post {ASK_NICS}" + share
    fix = f"If `ibv_devinfo` lists RDMA devices: {rdma_fix([])} If it lists none: {tcp_fix(f)}"
    return SocketCause(Candidate(what, fix, ev, None, direct=False), "warning", (ASK_NICS, *asks))


def socket_share(f: Facts, sym: Symptom | None) -> tuple[str, list[str]]:
    """What the line rate says of a socket run's figure, and the output that would decide the rest."""
    rates = [n.rate_gbps for n in f.nics if n.link_layer == "Ethernet" and n.rate_gbps and n.state != "DOWN"]
    if sym is not None and sym.kind == "collective":
        busbw = sym.measured_gbps
    else:  # no shortfall judged: the largest size measured between nodes
        across = [
            m
            for m in f.measured
            if ((m.nodes or 0) > 1 or len(set(m.rank_hosts)) > 1) and m.size_bytes >= BANDWIDTH_BOUND_BYTES
        ]  # a latency-bound size says nothing of the line
        busbw = max(across, key=lambda m: m.size_bytes).busbw_gbps if across else 0.0
    if not rates or busbw <= 0:
        return "", []
    line_gbytes = min(rates) / 8
    share = busbw / line_gbytes
    said = f"; busbw {busbw:.1f} GB/s is {share:.2f} of the {min(rates):g} Gb/s Ethernet line"
    said += f" ({line_gbytes:g} GB/s, ethtool)"
    if share >= LINE_SHARE:
        return said + ": the line itself is the ceiling", []
    said += f"; over sockets the rate is the slowest TCP stream's times {streams(f)[1]}, so how far under the line"
    said += f" it may fall is one stream's rate on these hosts, which the evidence does not show (post {IPERF})"
    return said, [IPERF]
