"""NIC port rules (TD420-TD429): RDMA ports down, slow, or losing their link.

Each port of each RDMA device (InfiniBand or RoCE) is judged on its own: state, physical
state, rate, and the rise of its error counters between the two readings of the check.
Port counters are 8 to 32 bits wide and the narrow ones stop at their maximum, so a raw
count says nothing about today; only a rise does.
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.probed import Unsupported
from topodoctor.model.fitness import NicPort
from topodoctor.model.snapshot import Nic
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.baseline import port_since

# A rise of these means the link itself failed during the check.
LINK_LOSS = ("link_downed", "symbol_error", "link_error_recovery")
# A rise of these means traffic was dropped or damaged, on a link that stayed up.
TRAFFIC_ERRORS = (
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)


def _ports(nic: Nic) -> tuple[NicPort, ...]:
    """The device's ports; a snapshot from before ports were probed has the first port's state
    and rate on the device itself, which stand for port 1."""
    if nic.ports:
        return nic.ports
    none = Unsupported("NOT_PROBED")
    return (NicPort(1, nic.state, none, nic.rate_gbps, none, None, none),)


def _rdma(ctx: Context) -> list[Nic]:
    return [n for n in ctx.snap.nics if n.kind in ("infiniband", "roce")]


def _subject(nic: Nic, port: NicPort) -> str:
    return f"nic:{nic.name}/{port.port}"


@rule(
    "TD420",
    "nic-port-down",
    "error",
)
def nic_port_down(ctx: Context) -> Iterator[Issue]:
    """An RDMA port is down.

    An RDMA port is not ACTIVE, its physical link is not LinkUp, or (RoCE) its net device is not up.

    Why it matters: NCCL builds its rings and trees over every RDMA port it finds: a port that is
    down makes its rail unusable and the job hangs, falls back to TCP sockets, or crawls.

    How to fix: check the cable, the transceiver and the switch port (ibstat, ibportstate, the
    switch's logs); for InfiniBand make sure the subnet manager runs.
    """
    for nic in _rdma(ctx):
        for p in _ports(nic):
            where = _subject(nic, p)
            state = ctx.need(p.state, where, "state")
            phys = ctx.need(p.phys_state, where, "phys_state")
            net = ctx.need(p.netdev_state, where, "netdev_state") if nic.kind == "roce" else None
            bad = []
            if state is not None and state != "ACTIVE":
                bad.append(f"state {state}")
            if phys is not None and phys != "LinkUp":
                bad.append(f"physical state {phys}")
            if net is not None and net not in ("up", "unknown"):
                bad.append(f"net device {p.netdev} {net}")
            if bad:
                yield Issue(
                    where,
                    f"NIC {nic.name} port {p.port} is down: {', '.join(bad)}",
                    {"state": state, "phys_state": phys, "netdev_state": net},
                )


@rule(
    "TD421",
    "nic-port-slow",
    "error",
)
def nic_port_slow(ctx: Context) -> Iterator[Issue]:
    """An RDMA port runs below its expected rate.

    An active RDMA port runs below the rate expected of it: the rate the expectations file holds for
    that port, or, without one, the fastest port of the same kind of device (HCA type and link
    layer) on the host.

    Why it matters: a port that trained at half rate halves its rail's share of every collective;
    the whole job runs at the speed of its slowest rail.

    How to fix: check the cable and transceiver (a damaged lane trains the link at half or quarter
    width), reseat them, and check the switch port's configured speed.
    """
    groups: dict[tuple[str, str], float] = {}
    for nic in _rdma(ctx):
        for p in _ports(nic):
            if isinstance(p.rate_gbps, float):
                key = _kind(nic, p)
                groups[key] = max(groups.get(key, 0.0), p.rate_gbps)
    expected = ctx.expect.nic_rate_gbps if ctx.expect is not None else {}
    for nic in _rdma(ctx):
        for p in _ports(nic):
            where = _subject(nic, p)
            rate = ctx.need(p.rate_gbps, where, "rate_gbps")
            if rate is None or p.state != "ACTIVE":
                continue
            want = expected.get(f"{nic.name}/{p.port}")
            basis = "the expectations file"
            if want is None:
                want, basis = groups.get(_kind(nic, p)), "the fastest port of its kind on this host"
            if want is not None and rate < want:
                yield Issue(
                    where,
                    f"NIC {nic.name} port {p.port} runs at {rate:g} Gb/s, below the {want:g} Gb/s of {basis}",
                    {"rate_gbps": rate, "expected_gbps": want, "basis": basis},
                )


def _kind(nic: Nic, p: NicPort) -> tuple[str, str]:
    hca = nic.hca_type if isinstance(nic.hca_type, str) else nic.kind
    layer = p.link_layer if isinstance(p.link_layer, str) else nic.kind
    return hca, layer


def _rises(ctx: Context, nic: Nic, p: NicPort, names: tuple[str, ...]) -> dict[str, int]:
    """What ``names`` rose by during the check, or else since the baseline (check --baseline)."""
    during = _during(ctx, nic, p, names)
    since = port_since(ctx.baseline, nic, p)
    return during or ({k: v for k, v in since.rise.items() if k in names} if since is not None else {})


def _during(ctx: Context, nic: Nic, p: NicPort, names: tuple[str, ...]) -> dict[str, int]:
    where = _subject(nic, p)
    rose: dict[str, int] = {}
    for name in names:
        a, b = p.counters_start.get(name), p.counters_end.get(name)
        if a is None or b is None:
            continue  # a counter this driver does not have
        va, vb = ctx.need(a, where, f"counters_start.{name}"), ctx.need(b, where, f"counters_end.{name}")
        if va is not None and vb is not None and vb > va:
            rose[name] = vb - va
    return rose


@rule(
    "TD422",
    "nic-link-errors-rising",
    "error",
)
def nic_link_errors_rising(ctx: Context) -> Iterator[Issue]:
    """An RDMA port lost its link or took symbol errors during the check or since the baseline.

    An RDMA port's link_downed, symbol_error or link_error_recovery counter rose during the check
    (or since the baseline, with `check --baseline`).

    Why it matters: the link went down, retrained, or took physical-layer errors while the check
    ran: traffic over it stalls for as long as the link recovers, and NCCL may time out.

    How to fix: check the cable, the transceiver and the switch port; drain the node until the link
    holds.
    """
    for nic in _rdma(ctx):
        for p in nic.ports:
            rose = _rises(ctx, nic, p, LINK_LOSS)
            if rose:
                text = ", ".join(f"{k} +{v}" for k, v in rose.items())
                yield Issue(_subject(nic, p), f"NIC {nic.name} port {p.port} lost its link: {text}", {"rise": rose})


@rule(
    "TD423",
    "nic-port-errors-rising",
    "warning",
)
def nic_port_errors_rising(ctx: Context) -> Iterator[Issue]:
    """An RDMA port's traffic error counters rose on a link that stayed up.

    An RDMA port's receive-error, remote physical error, transmit discard, link integrity or buffer
    overrun counter rose during the check (or since the baseline), on a link that stayed up.

    Why it matters: damaged or dropped packets are retransmitted by the transport: bandwidth drops
    and latency rises before anything fails outright.

    How to fix: read the port's error counters over a longer window (perfquery, ethtool -S) and
    check the fabric around it; receive errors and discards point at the cable, the remote port or
    congestion.
    """
    for nic in _rdma(ctx):
        for p in nic.ports:
            rose = _rises(ctx, nic, p, TRAFFIC_ERRORS)
            if rose:
                text = ", ".join(f"{k} +{v}" for k, v in rose.items())
                yield Issue(
                    _subject(nic, p),
                    f"NIC {nic.name} port {p.port} errors rose: {text}",
                    {"rise": rose},
                )
