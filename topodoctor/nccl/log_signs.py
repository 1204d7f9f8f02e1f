"""What a log shows that tells one cause of a failure class from another: the records of a class's
causes (``ClassCause``, ``ClassCauses``) and the tests on the log's lines and context each cause is singled out,
ranked up or ruled out by (the plugin's network, a GID index set by environment, the GID in use, the
NCCL versions, the topology file NCCL loaded). Data and pure functions; no I/O."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from topodoctor.nccl.evidence import LogContext, odd_interfaces, older_than
from topodoctor.nccl.parse import Event

Shows = Callable[[Sequence[Event], LogContext], str]  # the log's own line for a cause, "" when absent

# the GID in use: net_ib's completion WARN ("localGid ::ffff:a.b.c.d"), ibvwrap's modify_qp WARN ("local GID fe80::")
LOCAL_GID = re.compile(r"local ?GID (?!index)(\S+?),?(?:\s|$)", re.I)


def never(evs: Sequence[Event], ctx: LogContext) -> str:
    return ""


GID_INDEX = re.compile(r"local GID index (\d+)", re.I)  # ibvwrap.cc's modify_qp WARN names the index in use


def gid_set_by_env(evs: Sequence[Event], ctx: LogContext) -> str:
    """A GID index forced by the environment (-1 is NCCL's own choice)."""
    gid = ctx.env.get("NCCL_IB_GID_INDEX", "")
    return f"NCCL_IB_GID_INDEX={gid} is set by the environment" if gid and gid != "-1" else ""


def gid_forced(evs: Sequence[Event], ctx: LogContext) -> str:
    """A GID index the log shows in use: forced by the environment, or named by ibvwrap's WARN."""
    if forced := gid_set_by_env(evs, ctx):
        return forced
    gid = next((m.group(1) for e in evs if (m := GID_INDEX.search(e.text))), "")
    return f"the WARN names local GID index {gid}" if gid else ""


def local_gid(evs: Sequence[Event]) -> str:
    return next((m.group(1) for e in evs if (m := LOCAL_GID.search(e.text))), "")


def gid_link_local(evs: Sequence[Event], ctx: LogContext) -> str:
    gid = local_gid(evs)
    return (
        f"the local GID in use is {gid}, a link-local address no router forwards"
        if gid.lower().startswith("fe80")
        else ""
    )


def gid_routable(evs: Sequence[Event], ctx: LogContext) -> bool:
    """The GID in use is RoCE v2 (IPv4-mapped) or a global IPv6 one: the GID index is not the fault."""
    gid = local_gid(evs).lower()
    return bool(gid) and not gid.startswith("fe80")


def ibext(evs: Sequence[Event], ctx: LogContext) -> str:
    net = next((n for n in ctx.networks if "IBext" in n), "")
    return f"the network in use is {net}, the HPC-X / SHARP plugin's IB" if net else ""


def versions_differ(evs: Sequence[Event], ctx: LogContext) -> str:
    seen = sorted({v.split("+")[0] for v in ctx.versions})
    return f"the logs name NCCL {' and '.join(seen)}" if len(seen) > 1 else ""


def ib_timeout(evs: Sequence[Event], ctx: LogContext) -> str:
    value = ctx.env.get("NCCL_IB_TIMEOUT", "")
    return (
        f"NCCL_IB_TIMEOUT={value} is set (the default is 20 from 2.14, 18 before)"
        if value.isdigit() and int(value) < 18
        else ""
    )


def ofi(evs: Sequence[Event], ctx: LogContext) -> bool:
    """aws-ofi-nccl is the network: on AWS instance types it hands NCCL a topology file of its own."""
    return any("Libfabric" in n or "OFI" in n for n in ctx.networks)


def plugin_topo(evs: Sequence[Event], ctx: LogContext) -> str:
    f = ctx.topo_file
    return f"the file is the network plugin's own, {f}" if "aws-ofi-nccl" in f or "/proc/self/fd" in f else ""


def user_topo(evs: Sequence[Event], ctx: LogContext) -> str:
    f = ctx.topo_file or ctx.env.get("NCCL_TOPO_FILE", "")
    return f"NCCL loaded {f}" if f and not plugin_topo(evs, ctx) else ""


def before_2_8(evs: Sequence[Event], ctx: LogContext) -> str:
    return f"the log's NCCL is {ctx.versions[0]}, before 2.8" if older_than(ctx, (2, 8, 0)) else ""


def odd_ifs(evs: Sequence[Event], ctx: LogContext) -> str:
    return odd_interfaces(ctx).rstrip(".")


def roce(evs: Sequence[Event], ctx: LogContext) -> bool:
    return "RoCE" in ctx.link_layers.values() or bool(local_gid(evs))


def ib_only(evs: Sequence[Event], ctx: LogContext) -> bool:
    return bool(ctx.link_layers) and "RoCE" not in ctx.link_layers.values() and not local_gid(evs)


def several_nics(evs: Sequence[Event], ctx: LogContext) -> bool:
    return len(ctx.link_layers) > 1


@dataclass(frozen=True)
class ClassCause:
    """One cause of a class: what it is and its fix, what tells it apart when the log does not,
    the line of the log that singles it out (``shows``), and when it is the likelier (``first``) or
    ruled out (``ruled_out``) by what the log shows."""

    what: str
    tells: str
    shows: Shows = never
    first: Callable[[Sequence[Event], LogContext], bool] = lambda evs, ctx: False
    ruled_out: Callable[[Sequence[Event], LogContext], bool] = lambda evs, ctx: False


@dataclass(frozen=True)
class ClassCauses:
    """The causes of one class's message, most likely first when the log shows nothing, and the
    output that tells them apart; ``applies`` limits it to one wording (an errno) of the class."""

    code: str
    causes: tuple[ClassCause, ...]
    collect: str
    applies: Callable[[Sequence[Event]], bool] = lambda evs: True


VERSIONS = ClassCause(
    "the ranks run different NCCL versions or settings, so they disagree on the protocol",
    "every rank's NCCL version banner and NCCL_* settings",
    versions_differ,
)
NET_COLLECT = "every rank's log with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (the network, devices and GIDs in use)"
