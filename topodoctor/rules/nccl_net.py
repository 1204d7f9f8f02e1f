"""NCCL network selection rules: interfaces and RDMA devices named by NCCL's filters."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.rules.context import Context
from topodoctor.rules.nccl_env import env_issue, evidence, int_is, setting
from topodoctor.rules.registry import Issue, rule


@rule(
    "TD604",
    "nccl-ib-disabled",
    "warning",
)
def nccl_ib_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_IB_DISABLE reads as non-zero on a host with InfiniBand or RoCE NICs.

    Why it matters: without its RDMA NICs NCCL falls back to TCP sockets between nodes, at a
    fraction of the bandwidth and with far more CPU load.

    How to fix: unset NCCL_IB_DISABLE.
    """
    v = int_is(ctx, "NCCL_IB_DISABLE", lambda n: n != 0)
    rdma = [n.name for n in ctx.snap.nics if n.kind in ("infiniband", "roce")]
    if v and rdma:
        yield env_issue(ctx, "NCCL_IB_DISABLE", v, f"NCCL_IB_DISABLE={v} but the host has {', '.join(rdma)}", nics=rdma)


def _filter(spec: str) -> tuple[bool, list[tuple[bool, str]]]:
    """NCCL's interface / HCA filter: leading ^ excludes; '=' makes an entry exact."""
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    entries = []
    for raw in body.split(","):
        raw = raw.strip()
        if raw:
            exact = raw.startswith("=")
            entries.append((exact, raw.lstrip("=")))
    return exclude, entries


def _matches(name: str, exact: bool, pattern: str) -> bool:
    return name == pattern if exact else name.startswith(pattern)


@rule(
    "TD605",
    "nccl-socket-ifname-nomatch",
    "error",
)
def nccl_socket_ifname(ctx: Context) -> Iterator[Issue]:
    """NCCL_SOCKET_IFNAME selects no network interface that is up: NCCL fails to bootstrap.

    Why it matters: NCCL's bootstrap (and its socket transport) uses only the interfaces the
    variable selects; with none up, ranks cannot find each other and every communicator fails to
    init.

    How to fix: set NCCL_SOCKET_IFNAME to an interface that is up (see `ip -br link`), or unset it.
    """
    v = setting(ctx, "NCCL_SOCKET_IFNAME")
    if not v:
        return
    up = [i.name for i in ctx.snap.interfaces if i.operstate in ("up", "unknown")]
    exclude, entries = _filter(v)
    if exclude:
        left = [n for n in up if n != "lo" and not any(_matches(n, e, p) for e, p in entries)]
    else:
        left = [n for n in up if any(_matches(n, e, p) for e, p in entries)]
    if not left:
        yield Issue(
            "env:NCCL_SOCKET_IFNAME",
            f"NCCL_SOCKET_IFNAME={v} selects no interface that is up (up: {', '.join(up) or 'none'})",
            dict(evidence(ctx, "NCCL_SOCKET_IFNAME", v), up=up),
        )


@rule(
    "TD606",
    "nccl-ib-hca-nomatch",
    "error",
)
def nccl_ib_hca_nomatch(ctx: Context) -> Iterator[Issue]:
    """An NCCL_IB_HCA entry matches no RDMA device on the host.

    Why it matters: NCCL uses only the devices the list selects: an entry that names none selects
    nothing, so the NIC it was meant for carries no traffic of the job (and with no entry matching,
    NCCL finds no RDMA device at all).

    How to fix: name devices that exist (see `ls /sys/class/infiniband`), e.g.
    NCCL_IB_HCA==mlx5_0,=mlx5_1.
    """
    for v, devs, exact, pat, hits in _hca_entries(ctx):
        if not any(_matches(d, exact, pat.split(":")[0]) for d in hits):
            yield Issue(
                "env:NCCL_IB_HCA",
                f"NCCL_IB_HCA entry {pat!r} matches no RDMA device (present: {', '.join(devs) or 'none'})",
                dict(evidence(ctx, "NCCL_IB_HCA", v), entry=pat),
            )


def _hca_entries(ctx: Context) -> Iterator[tuple[str, list[str], bool, str, list[str]]]:
    """(value, RDMA devices, exact?, entry, devices the entry's name is a prefix of), per entry."""
    v = setting(ctx, "NCCL_IB_HCA")
    if not v:
        return
    devs = [n.name for n in ctx.snap.nics if n.kind in ("infiniband", "roce")]
    for exact, pat in _filter(v)[1]:
        yield v, devs, exact, pat, [d for d in devs if d.startswith(pat.split(":")[0])]


@rule(
    "TD607",
    "nccl-ib-hca-ambiguous",
    "warning",
)
def nccl_ib_hca_ambiguous(ctx: Context) -> Iterator[Issue]:
    """A bare NCCL_IB_HCA entry is a prefix that matches several devices (mlx5_1 also picks mlx5_10..).

    Why it matters: NCCL matches a bare entry as a prefix, so it uses devices nobody meant, such as
    a storage or management NIC, for the job's traffic.

    How to fix: prefix each entry with '=' for an exact match (NCCL_IB_HCA==mlx5_1), or list every
    device you mean.
    """
    for v, _, exact, pat, hits in _hca_entries(ctx):
        if not exact and len(hits) > 1:
            yield Issue(
                "env:NCCL_IB_HCA",
                f"NCCL_IB_HCA entry {pat!r} matches {', '.join(hits)}",
                dict(evidence(ctx, "NCCL_IB_HCA", v), entry=pat, matches=hits),
            )


@rule(
    "TD621",
    "nccl-net-ib-absent",
    "error",
)
def nccl_net_ib_absent(ctx: Context) -> Iterator[Issue]:
    """NCCL_NET=IB on a host with no InfiniBand or RoCE device: every communicator fails to init.

    Why it matters: NCCL_NET picks the network plugin by name (strcasecmp, src/plugin/net.cc); with
    no RDMA device the IB plugin does not initialise and NCCL stops with "Failed to initialize any
    NET plugin" instead of falling back to sockets.

    How to fix: unset NCCL_NET (NCCL then uses IB where an RDMA device is up, else sockets) or set
    NCCL_NET=Socket; if the host should have InfiniBand, check its driver (`ibv_devinfo`, `ls
    /sys/class/infiniband`).
    """
    v = setting(ctx, "NCCL_NET")
    if not v or v.lower() != "ib":
        return
    for err in ctx.host_errors("list /sys/class/infiniband"):
        ctx.missing("host", "nics", err.error, err.call)
        return
    if not any(n.kind in ("infiniband", "roce") for n in ctx.snap.nics):
        yield env_issue(ctx, "NCCL_NET", v, f"NCCL_NET={v} but the host has no InfiniBand or RoCE device")
