"""A run between nodes over NCCL's socket transport, held against the Ethernet line rate `ethtool` shows.

What the socket transport makes of a line (src/transport/net_socket.cc): each connection of a channel
sends over its own TCP streams (one or more), split evenly, so the rate is the slowest stream's times the streams.
The streams per connection are NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD; left unset, NCCL picks by the
NIC's PCI vendor: 2 threads x 8 sockets on AWS (0x1d0f), 4 x 1 on GCP (0x1ae0), and otherwise no helper
thread (0 sockets: the proxy sends on the connection's one stream). How fast one TCP stream runs on a
given host is no property of the line, so below the line rate the figure cannot be judged from the line
alone: what one stream reaches decides it.
"""

from __future__ import annotations

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.diagnosis.evidence_leads import Symptom

LINE_SHARE = 0.9  # a figure at or above this share of the line rate is the line's, whatever the streams
AUTO_STREAMS = {"AWS": 16, "GCP": 4}  # NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD chosen by vendor
IPERF = "`iperf3 -c NODE -P N` between two nodes (each stream's rate, N the streams NCCL opens)"


def _streams(f: Facts) -> str:
    """The TCP streams per connection as the settings shown make them, in words."""
    threads = f.settings.get("NCCL_SOCKET_NTHREADS")
    socks = f.settings.get("NCCL_NSOCKS_PERTHREAD")
    if threads and socks and threads[0].isdigit() and socks[0].isdigit():
        n = int(threads[0]) * int(socks[0])
        return f"{n} streams per connection (NCCL_SOCKET_NTHREADS={threads[0]} x NCCL_NSOCKS_PERTHREAD={socks[0]})"
    return "the streams NCCL picks by the NIC's vendor (16 on AWS, 4 on GCP, else one per connection)"


def socket_share(f: Facts, sym: Symptom | None) -> tuple[str, list[str]]:
    """What the line rate says of a socket run's figure, and the output that would decide the rest."""
    rates = [n.rate_gbps for n in f.nics if n.link_layer == "Ethernet" and n.rate_gbps and n.state != "DOWN"]
    if sym is not None and sym.kind == "collective":
        busbw = sym.measured_gbps
    else:  # no shortfall judged: the largest size measured between nodes
        across = [m for m in f.measured if (m.nodes or 0) > 1 or len(set(m.rank_hosts)) > 1]
        busbw = max(across, key=lambda m: m.size_bytes).busbw_gbps if across else 0.0
    if not rates or busbw <= 0:
        return "", []
    line_gbytes = min(rates) / 8
    share = busbw / line_gbytes
    said = f"; busbw {busbw:.1f} GB/s is {share:.2f} of the {min(rates):g} Gb/s Ethernet line"
    said += f" ({line_gbytes:g} GB/s, ethtool)"
    if share >= LINE_SHARE:
        return said + ": the line itself is the ceiling", []
    said += f"; over sockets the rate is the slowest TCP stream's times {_streams(f)}, so how far under the line"
    said += f" it may fall is one stream's rate on these hosts, which the evidence does not show (post {IPERF})"
    return said, [IPERF]
