"""The distinct causes of the failure classes whose message fits several, read from the sites that
raise it (NCCL's net_ib / ibvwrap, shmutils and shm transport, graph/xml, the IB / SHARP plugin),
ranked, each with what tells it apart: a line the log itself may hold (the plugin's network, a GID
index set by environment, the GID in use, the NCCL versions, the file NCCL loaded) and the output
to collect where it does not. A class's finding names one cause only when the log holds the line
that singles it out; otherwise it names the candidates, most likely first, and what to collect
next (``cause.confidence`` is ``candidates``). Data and pure functions; no I/O."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from topodoctor.nccl.evidence import Context, Said, older_than
from topodoctor.nccl.parse import Event

Shows = Callable[[Sequence[Event], Context], str]  # the log's own line for a cause, "" when absent

# the GID in use: net_ib's completion WARN ("localGid ::ffff:a.b.c.d"), ibvwrap's modify_qp WARN ("local GID fe80::")
_LOCAL_GID = re.compile(r"local ?GID (?!index)(\S+?),?(?:\s|$)", re.I)


def _never(evs: Sequence[Event], ctx: Context) -> str:
    return ""


_GID_INDEX = re.compile(r"local GID index (\d+)", re.I)  # ibvwrap.cc's modify_qp WARN names the index in use


def _gid_forced(evs: Sequence[Event], ctx: Context) -> str:
    gid = ctx.env.get("NCCL_IB_GID_INDEX", "")
    if not gid or gid == "-1":
        gid = next((m.group(1) for e in evs if (m := _GID_INDEX.search(e.text))), "")
    return f"NCCL_IB_GID_INDEX={gid} is set" if gid and gid != "-1" else ""


def _local_gid(evs: Sequence[Event]) -> str:
    return next((m.group(1) for e in evs if (m := _LOCAL_GID.search(e.text))), "")


def _gid_link_local(evs: Sequence[Event], ctx: Context) -> str:
    gid = _local_gid(evs)
    return (
        f"the local GID in use is {gid}, a link-local address no router forwards"
        if gid.lower().startswith("fe80")
        else ""
    )


def _gid_routable(evs: Sequence[Event], ctx: Context) -> bool:
    """The GID in use is RoCE v2 (IPv4-mapped) or a global IPv6 one: the GID index is not the fault."""
    gid = _local_gid(evs).lower()
    return bool(gid) and not gid.startswith("fe80")


def _ibext(evs: Sequence[Event], ctx: Context) -> str:
    net = next((n for n in ctx.networks if "IBext" in n), "")
    return f"the network in use is {net}, the HPC-X / SHARP plugin's IB" if net else ""


def _versions_differ(evs: Sequence[Event], ctx: Context) -> str:
    seen = sorted({v.split("+")[0] for v in ctx.versions})
    return f"the logs name NCCL {' and '.join(seen)}" if len(seen) > 1 else ""


def _ib_timeout(evs: Sequence[Event], ctx: Context) -> str:
    value = ctx.env.get("NCCL_IB_TIMEOUT", "")
    return (
        f"NCCL_IB_TIMEOUT={value} is set (the default is 20 from 2.14, 18 before)"
        if value.isdigit() and int(value) < 18
        else ""
    )


def _ofi(evs: Sequence[Event], ctx: Context) -> bool:
    """aws-ofi-nccl is the network: on AWS instance types it hands NCCL a topology file of its own."""
    return any("Libfabric" in n or "OFI" in n for n in ctx.networks)


def _plugin_topo(evs: Sequence[Event], ctx: Context) -> str:
    f = ctx.topo_file
    return f"the file is the network plugin's own, {f}" if "aws-ofi-nccl" in f or "/proc/self/fd" in f else ""


def _user_topo(evs: Sequence[Event], ctx: Context) -> str:
    f = ctx.topo_file or ctx.env.get("NCCL_TOPO_FILE", "")
    return f"NCCL loaded {f}" if f and not _plugin_topo(evs, ctx) else ""


def _before_2_8(evs: Sequence[Event], ctx: Context) -> str:
    return f"the log's NCCL is {ctx.versions[0]}, before 2.8" if older_than(ctx, (2, 8, 0)) else ""


def _roce(evs: Sequence[Event], ctx: Context) -> bool:
    return "RoCE" in ctx.link_layers.values() or bool(_local_gid(evs))


def _ib_only(evs: Sequence[Event], ctx: Context) -> bool:
    return bool(ctx.link_layers) and "RoCE" not in ctx.link_layers.values() and not _local_gid(evs)


def _several_nics(evs: Sequence[Event], ctx: Context) -> bool:
    return len(ctx.link_layers) > 1


@dataclass(frozen=True)
class Cause:
    """One cause of a class: what it is and its fix, what tells it apart when the log does not,
    the line of the log that singles it out (``shows``), and when it is the likelier (``first``) or
    ruled out (``ruled_out``) by what the log shows."""

    what: str
    tells: str
    shows: Shows = _never
    first: Callable[[Sequence[Event], Context], bool] = lambda evs, ctx: False
    ruled_out: Callable[[Sequence[Event], Context], bool] = lambda evs, ctx: False


@dataclass(frozen=True)
class Causes:
    """The causes of one class's message, most likely first when the log shows nothing, and the
    output that tells them apart; ``applies`` limits it to one wording (an errno) of the class."""

    code: str
    causes: tuple[Cause, ...]
    collect: str
    applies: Callable[[Sequence[Event]], bool] = lambda evs: True


_GID = Cause(
    "the GID index selects a GID the peer cannot reach: a link-local (fe80::) or RoCE v1 GID is not routed; set "
    "NCCL_IB_GID_INDEX to the RoCE v2 GID of the IP the nodes route (often 3), or unset it",
    "`show_gids`: the type and address of the index in use on both nodes",
    _gid_link_local,
    first=lambda evs, ctx: _roce(evs, ctx) or bool(_gid_forced(evs, ctx)),
    ruled_out=lambda evs, ctx: _ib_only(evs, ctx) or _gid_routable(evs, ctx),
)
_IBEXT = Cause(
    "the IB in use is the external HPC-X / SHARP plugin (IBext), not NCCL's own: it reads NCCL_IBEXT_DISABLE "
    "(NCCL_IB_DISABLE turns off only NCCL's IB) and its own copies of the NCCL_IB_* settings; to leave IB, set "
    "NCCL_IBEXT_DISABLE=1 or NCCL_NET=Socket",
    "the `Using network IBext` line of NCCL_DEBUG=INFO",
    _ibext,
    ruled_out=lambda evs, ctx: bool(ctx.networks) and not _ibext(evs, ctx),
)
_RAIL = Cause(
    "a rail-optimised fabric where only NICs of the same rail reach each other: NCCL_CROSS_NIC=0",
    "whether NIC i of one node reaches every NIC of the other (`ib_write_bw` between rails)",
    first=_several_nics,
)
_ROUTE = Cause(
    "the two RoCE IPs are not routed to each other (different subnets, no neighbour entry, an ACL)",
    "`ping -I <RoCE interface> <peer RoCE IP>` and `ip route` on both nodes",
    first=_gid_routable,
    ruled_out=_ib_only,
)
_LINK = Cause(
    "a link that is down or flapping (cable, port, switch)",
    "`ibstat` (State Active, LinkUp), the port error counters (`perfquery`), `dmesg` for link down",
)
_LOSSLESS = Cause(
    "the switches do not carry RDMA losslessly (PFC/ECN, the traffic class): NCCL_IB_TC to the class they "
    "carry without loss",
    "the switch's PFC/ECN configuration, the NIC's pause and ECN counters (`ethtool -S`)",
    first=_gid_routable,
    ruled_out=_ib_only,
)
_PEER = Cause(
    "the peer's process or node failed first, so its NIC stopped answering",
    "the other ranks' logs: the first failure of the job",
)
_TIMEOUT = Cause(
    "NCCL_IB_TIMEOUT too low for the fabric's size or load",
    "the NCCL_IB_TIMEOUT the ranks run with; a large or congested fabric needs the default or more",
    _ib_timeout,
)
_VERSIONS = Cause(
    "the ranks run different NCCL versions or settings, so they disagree on the protocol",
    "every rank's NCCL version banner and NCCL_* settings",
    _versions_differ,
)
_NET_COLLECT = "every rank's log with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (the network, devices and GIDs in use)"

TABLE: tuple[Causes, ...] = (
    Causes(
        "TD064",
        (_GID, _RAIL, replace(_ROUTE, first=lambda evs, ctx: False), _IBEXT),
        f"`show_gids` and `ibv_devinfo -v` on both nodes, {_NET_COLLECT}",
        lambda evs: "Invalid argument" not in evs[0].text,
    ),
    Causes(
        "TD064",
        (
            Cause(
                "the forced GID index does not exist on this port or is not a usable RoCE GID: NCCL_IB_GID_INDEX=-1 "
                "lets NCCL pick the RoCE v2 GID",
                "`show_gids`: the indexes the port has",
                _gid_forced,
            ),
            _IBEXT,
        ),
        f"`show_gids` and `ibv_devinfo -v`, {_NET_COLLECT}",
        lambda evs: "Invalid argument" in evs[0].text,
    ),
    Causes(
        "TD045",
        (_GID, _ROUTE, _LOSSLESS, _LINK, _PEER, _RAIL, _TIMEOUT),
        f"`show_gids`, `ibstat` and the port counters on both nodes, {_NET_COLLECT}; whether it fails at the first "
        "transfer (configuration) or after hours (the link, the peer)",
        lambda evs: evs[0].fields.get("status", "12") == "12",
    ),
    Causes(
        "TD066",
        (
            Cause(
                "PCIe ACS (or an IOMMU in translation mode) on the path between the NIC and the GPU breaks GPUDirect "
                "RDMA: disable ACS on the switches, iommu=pt",
                "NCCL_NET_GDR_LEVEL=0 makes it go away (slower); `lspci -vvv | grep ACSCtl` shows SrcValid+ / "
                "ReqRedir+ on the bridges",
            ),
            Cause(
                "the NIC cannot use the GPU memory it registered (nvidia-peermem or DMA-BUF, a VM without ATS)",
                "`lsmod | grep peermem`, NCCL_DMABUF_ENABLE=0 against the default, the driver and OFED versions",
            ),
            Cause(
                "a buffer freed or re-registered while a transfer used it (user buffer registration)",
                "NCCL_LOCAL_REGISTER=0 / NCCL_GRAPH_REGISTER=0 make it go away if so",
            ),
        ),
        "`lspci -vvv | grep ACSCtl` on every bridge between NIC and GPU, `dmesg | grep -i -e DMAR -e iommu`, the run "
        "with NCCL_NET_GDR_LEVEL=0",
    ),
    Causes(
        "TD068",
        (
            _VERSIONS,
            Cause(
                "the peer's GPU memory registration (GPUDirect RDMA on the peer: ACS, nvidia-peermem)",
                "the peer with NCCL_NET_GDR_LEVEL=0",
            ),
            Cause("a peer that hung or had no receive posted (status 13)", "the peer's log and stack"),
        ),
        f"every rank's NCCL version banner, {_NET_COLLECT}",
    ),
    Causes(
        "TD069",
        (
            Cause(
                "the network plugin's own static topology file (aws-ofi-nccl before 1.11 ships one per instance type "
                "that lacks CPU attributes or GPUs the job leaves out): upgrade aws-ofi-nccl",
                "the `NET/OFI ... Setting NCCL_TOPO_FILE` line of NCCL_DEBUG=INFO",
                _plugin_topo,
                first=_ofi,
            ),
            Cause(
                "a file set by NCCL_TOPO_FILE (an image's or a hand-written one) missing what NCCL needs: regenerate "
                "it on the host with NCCL_TOPO_DUMP_FILE, or unset NCCL_TOPO_FILE",
                "`echo $NCCL_TOPO_FILE`, /etc/nccl.conf, the file itself",
                _user_topo,
            ),
            Cause(
                "NCCL before 2.8 failed on an injected topology whose CPUs the job did not use: upgrade NCCL to 2.8 "
                "or later",
                "the NCCL version banner",
                _before_2_8,
                ruled_out=lambda evs, ctx: older_than(ctx, (2, 8, 0)) is False,
            ),
        ),
        "NCCL_DEBUG=INFO (the NCCL_TOPO_FILE line: which file, set by whom) and the NCCL and plugin versions",
        lambda evs: bool(evs[0].fields.get("attr")),
    ),
    Causes(
        "TD074",
        (
            Cause(
                "the local ranks do not share /dev/shm (a container per rank without --ipc=host, a pod without a "
                "shared emptyDir)",
                "`ls /dev/shm` in each rank's container while the job runs",
            ),
            Cause(
                "systemd-logind's RemoveIPC=yes deleted the segments of a user that logged out",
                "RemoveIPC in /etc/systemd/logind.conf",
            ),
            Cause(
                "the local ranks run different NCCL versions, or a release with a regression here (one report was "
                "fixed by going back to 2.21.5)",
                "every local rank's NCCL version banner",
                _versions_differ,
            ),
            Cause("the peer's process exited first and removed its segments", "the peer's log: its last lines"),
        ),
        "every local rank's NCCL version banner, where each rank runs (container, pod), `df -h /dev/shm`",
    ),
    Causes(
        "TD087",
        (
            Cause(
                "cuMem host memory works on some local ranks and not others (NUMA hidden in the container): a rank "
                "that fell back to /dev/shm reads a peer's cuMem descriptor as a segment name; "
                "NCCL_CUMEM_HOST_ENABLE=0 in every rank, or give the container the host's NUMA view and IPC "
                "(--ipc=host)",
                "NCCL_DEBUG=INFO: 'CUMEM imported' beside 'MMAP imported' lines, or 'cuMem host allocations do not "
                "appear to be working'",
            ),
            _VERSIONS,
        ),
        "NCCL_DEBUG=INFO from every local rank, `numactl -H` in the container",
        lambda evs: not (evs[0].fields.get("msg") or evs[0].fields.get("num")),
    ),
)


def _seen(evs: Sequence[Event], ctx: Context) -> str:
    """What the log shows of the link, before the causes: its layer and the GID in use."""
    gid = _local_gid(evs)
    devices = ", ".join(ctx.link_layers)
    if gid:
        kind = "RoCE v2" if gid.lower().startswith("::ffff:") else "RoCE"
        return f"The link is {kind} (local GID {gid}). "
    if ctx.link_layers:
        kind = "RoCE" if "RoCE" in ctx.link_layers.values() else "InfiniBand"
        return f"The link is {kind} ({devices}). "
    return ""


def ranked(said: Said, evs: Sequence[Event], ctx: Context) -> Said:
    """``said`` with its causes weighed: one cause when the log shows the line that singles it out,
    else the candidates, ranked, with what tells them apart and what to collect. A finding that
    ranks its candidates already (a CUDA call's site) stays as it is."""
    if "candidates" in said.extra:
        return said
    entry = next((t for t in TABLE if t.code == said.code and t.applies(evs)), None)
    if entry is None:
        return said
    kept = [c for c in entry.causes if not c.ruled_out(evs, ctx)]
    shown = [(c, line) for c in kept if (line := c.shows(evs, ctx))]
    if shown:
        cause, line = shown[0]
        fix = f"{_seen(evs, ctx)}The log shows it: {line}; so {cause.what}."
        rest = "; ".join(f"({i}) {c.what}" for i, c in enumerate((c for c in kept if c is not cause), 1))
        if rest:
            fix += f" If not that, the other causes of this message: {rest}. Collect: {entry.collect}."
        return replace(said, fix=fix, extra={**said.extra, "narrowed_by": line})
    kept.sort(key=lambda c: not c.first(evs, ctx))  # stable: the table's order among equals
    listed = "; ".join(f"({i}) {c.what} [tells: {c.tells}]" for i, c in enumerate(kept, 1))
    fix = f"{_seen(evs, ctx)}The log does not show which cause; candidates, most likely first: {listed}. "
    fix += f"Collect: {entry.collect}."
    return replace(said, fix=fix, extra={**said.extra, "candidates": [c.what for c in kept], "collect": entry.collect})
