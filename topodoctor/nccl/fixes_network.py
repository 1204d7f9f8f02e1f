"""Builders of `nccl-log` findings for what fails between processes and nodes: InfiniBand / RoCE
verbs calls and completion statuses, socket connections, peers that went away, ranks that
disagree (sizes, versions, GPUs). Data in, text out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.nccl.causes_registration import QUEUE_NO_MEMORY, REGISTER_REFUSED
from topodoctor.nccl.connect_retries import unroutable
from topodoctor.nccl.evidence import (
    IBV_WC_STATUS,
    Builder,
    LogContext,
    Said,
    odd_interfaces,
    older_than,
    with_general,
)
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.parse import Event
from topodoctor.nccl.socket_causes import CONNECT_WHY, FAMILY_CAUSES, FIREWALL_SAID

_LOCAL_GID = re.compile(r"localGid (\S+)")


def _verbs_dev(f: Mapping[str, str], ctx: LogContext) -> str:
    dev = f.get("dev", "")
    return f" on {dev}" if dev else (f" (devices in use: {', '.join(ctx.link_layers)})" if ctx.link_layers else "")


def _memlock(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD061",
        f"{f['call']} failed{_verbs_dev(f, ctx)}: Cannot allocate memory (registering memory for RDMA)",
        EXPLANATIONS["TD061"].fix,
        {"call": f["call"]},
    )


def _dmabuf(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD062",
        f"ibv_reg_dmabuf_mr failed{_verbs_dev(f, ctx)}: {f.get('err') or 'not supported'}",
        EXPLANATIONS["TD062"].fix,
    )


def _device(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    devs = f.get("dev") or ", ".join(ctx.link_layers)
    hca = f" NCCL used {devs}: check each with `ibstat`, keep only the active ones in NCCL_IB_HCA." if devs else ""
    if any(layer == "RoCE" for layer in ctx.link_layers.values()):
        hca += " The devices are RoCE: a port without an IP address has no usable GID."
    return Said(
        "TD063",
        f"{f['call']} failed{_verbs_dev(f, ctx)}: No such device",
        with_general("TD063", hca.strip()),
        {"call": f["call"]},
    )


def _qp(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    err = f.get("err", "")
    gid = ctx.env.get("NCCL_IB_GID_INDEX")
    if "timed out" in err:
        specific = (
            "The NICs never answered: on a rail-optimised fabric only NICs of the same rail reach each "
            "other, set NCCL_CROSS_NIC=0; on RoCE the GID in use must be routed between the nodes: a link-local "
            "(fe80::) or RoCE v1 GID is not, set NCCL_IB_GID_INDEX to the RoCE v2 GID of the routed IP."
        )
    elif "Invalid argument" in err or "No data available" in err:  # EINVAL / ENODATA: no GID at that index
        forced = f" (the log shows NCCL_IB_GID_INDEX={gid})" if gid else ""
        specific = f"The forced GID index is wrong{forced}: NCCL_IB_GID_INDEX=-1 lets NCCL pick the RoCE v2 GID."
    else:
        specific = (
            "No route to the peer's GID: on RoCE the GID index must select an address that is routed "
            "between the nodes (`show_gids`, NCCL_IB_GID_INDEX)."
        )
    specific += " `show_gids` lists each port's GIDs; `ibv_devinfo` their state."
    if any("IBext" in n for n in ctx.networks):  # the HPC-X / SHARP plugin's IB, not NCCL's own
        specific += (
            " The IB in use is the external plugin (IBext, nccl-rdma-sharp-plugins): it reads NCCL_IBEXT_DISABLE "
            "(NCCL_IB_DISABLE turns off only NCCL's own IB), and its own copies of the NCCL_IB_* settings."
        )
    return Said("TD064", f"ibv_modify_qp failed{_verbs_dev(f, ctx)}: {err}", specific, {"errno": err})


_REGISTER_COLLECT = (
    "`lsmod | grep peermem`, the NCCL_DEBUG=INFO lines that say whether GPU Direct RDMA is enabled for each NIC, "
    "`dmesg | grep -i -e iommu -e DMAR`"
)
_QUEUE_COLLECT = "`ulimit -l` inside the job, `ibv_devinfo -v` (max_cq, max_qp), the other RDMA libraries the job loads"


def _verbs(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    err = f.get("err") or "no errno given"
    extra: dict[str, object] = {"call": f["call"], "errno": err}
    said = f"{f['call']} failed{_verbs_dev(f, ctx)}: {err}"
    if f["call"].startswith("ibv_reg_mr") and f.get("err"):  # the errno names no limit: the site's causes, ranked
        what, listed, collect = "The NIC refused to register the buffer", REGISTER_REFUSED, _REGISTER_COLLECT
    elif "Cannot allocate memory" in err:  # a queue or its domain: the limit, or the adapter's finite queues
        what, listed, collect = "The verbs call could not allocate the queue", QUEUE_NO_MEMORY, _QUEUE_COLLECT
    else:
        return Said("TD065", said, EXPLANATIONS["TD065"].fix, extra)
    extra["candidates"] = list(listed)
    fix = f"{what} ({err}); candidates, most likely first: {numbered(listed)}. Collect next: {collect}."
    return Said("TD065", said, fix, extra)


def _roce(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> bool:
    hca = f.get("hca", "")
    return (
        ctx.link_layers.get(hca) == "RoCE"
        or (not hca and "RoCE" in ctx.link_layers.values())
        or any("localGid" in e.text or "::ffff:" in e.text for e in evs)
    )


def _roce_fix(evs: Sequence[Event], ctx: LogContext) -> str:
    """Status 12 on RoCE: which GID the log shows in use says where to look."""
    gid = ctx.env.get("NCCL_IB_GID_INDEX")
    now = f" (now {gid})" if gid else ""
    local = next((m.group(1) for e in evs if (m := _LOCAL_GID.search(e.text))), "")
    if local.startswith("::ffff:"):  # an IPv4-mapped GID: RoCE v2 is in use, the GID index is not the fault
        return (
            f"The link is RoCE v2 (local GID {local}): the GID index is right; the route between the two IPs, "
            "the switches' lossless class for RDMA (NCCL_IB_TC, PFC/ECN) or the link itself dropped the packets."
        )
    return (
        f"The link is RoCE: set NCCL_IB_GID_INDEX{now} to the RoCE v2 GID of the IP the nodes route "
        "(`show_gids`; 3 on most hosts) and NCCL_IB_TC to the class the switches carry losslessly."
    )


def _status(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    status = int(f.get("status", "-1"))
    hca = f" on {f['hca']}" if f.get("hca") else ""
    peer = f" from peer {f['peer']}" if f.get("peer") else ""
    what = IBV_WC_STATUS.get(status, "see ibv_wc_status")
    msg = f"RDMA completion{peer}{hca} with status {status}: {what}"
    extra: dict[str, object] = {"status": status, "peer": f.get("peer", "")}
    if status == 4:
        return Said("TD066", msg, EXPLANATIONS["TD066"].fix, extra)
    if status == 5:
        return Said("TD067", msg, EXPLANATIONS["TD067"].fix, extra)
    if status in (9, 10, 11, 13):
        return Said("TD068", msg, EXPLANATIONS["TD068"].fix, extra)
    if _roce(f, evs, ctx):
        specific = _roce_fix(evs, ctx)
    elif ctx.link_layers:
        specific = "The link is InfiniBand: check both ports (`ibstat`, `perfquery` error counters) and the cable."
    else:  # the log does not say which: the common cause of each
        specific = (
            "On RoCE set NCCL_IB_GID_INDEX to the RoCE v2 GID the nodes route (`show_gids`; 3 on most "
            "hosts); on InfiniBand check both ports (`ibstat`, error counters) and the cable."
        )
    return Said("TD045", msg, with_general("TD045", specific), extra)


def _ifname(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    ifname = ctx.env.get("NCCL_SOCKET_IFNAME") or ctx.shown.get("NCCL_SOCKET_IFNAME")
    if any("Address family not supported" in e.text for e in evs):  # socket(): the address's family, not a match
        return Said(
            "TD041",
            "NCCL could not open a socket of its interface's address family (Address family not supported)",
            f"Candidates, most likely first: {numbered(FAMILY_CAUSES)}. Collect next: `ip -br addr` on each node "
            "and NCCL_DEBUG=INFO's Bootstrap and NET lines (the address each node uses).",
            {"NCCL_SOCKET_IFNAME": ifname or "", "candidates": list(FAMILY_CAUSES)},
        )
    msg = "NCCL found no usable socket interface" + (f" matching NCCL_SOCKET_IFNAME={ifname}" if ifname else "")
    return Said("TD041", msg, EXPLANATIONS["TD041"].fix, {"NCCL_SOCKET_IFNAME": ifname or ""})


def _connect(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    err = f.get("err", "")
    to = f" to {f['addr']}" if f.get("addr") else ""
    why = CONNECT_WHY.get(
        err, "the packets to the peer got no answer: a firewall dropping the connection between the nodes"
    )
    check = _FIREWALL_CHECK if err in (*_FIREWALL_ERRNO, FIREWALL_SAID) else ""
    odd = odd_interfaces(ctx)
    if f.get("addr") and unroutable(f["addr"], ctx.socket_ifs, ctx.hosts):  # the address itself settles it
        odd = (
            f"The address connected to, {f['addr']}, is not one the nodes route (link-local, a bridge's or "
            "loopback): the peer advertised the address of an interface its NCCL sockets should not use. "
            f"{odd or 'Set NCCL_SOCKET_IFNAME to the interface the nodes route between them.'}"
        )
        why, check = "the refusal or timeout is that address answering from somewhere else, not the peer rank", ""
    specific = " ".join(x for x in (odd, why[0].upper() + why[1:] + ".", check) if x)
    extra: dict[str, object] = {"errno": err}
    msg = f"NCCL's connection{to} failed: {err}"
    if f.get("lone"):  # the paste holds the retries alone: the connection its poster saw fail
        msg += (
            ", retried (the paste holds only the retries)"
            if f.get("lone") == "1"
            else ", retried until the run failed, as the post says"
        )
    elif f.get("open"):  # a retry with attempts left, then the run failed: the connection never came
        msg += f" (retry {f['retries']}), then the run failed"
        extra["retries"] = f["retries"]
    elif retries := f.get("retries"):  # socket.cc's last retry: its failure ends the connection (ncclRemoteError)
        msg += f" on its last retry ({retries}); the WARN it ends in (exceeded error retry count) is not in the paste"
        extra["retries"] = retries
    return Said("TD072", msg, with_general("TD072", specific), extra)


_FIREWALL_ERRNO = ("No route to host", "Connection refused", "Connection timed out")
_FIREWALL_CHECK = (
    "From this node try the peer's address and port (`nc -zv HOST PORT`); on the peer list the firewall "
    "(`firewall-cmd --list-all`, `iptables -L -n`) and check the interface NCCL uses (NCCL_SOCKET_IFNAME)."
)


def _store(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD072",
        f"a rank could not fetch NCCL's unique id from torch's c10d store: {f.get('err', '')[:120]}",
        "Rank 0 holds the store: read its log first (it may have died before the others asked); then check that "
        "every node reaches MASTER_ADDR:MASTER_PORT (`nc MASTER_ADDR MASTER_PORT`) through the firewall.",
        {"errno": f.get("err", ""), "store": "MASTER_ADDR:MASTER_PORT"},
    )


def _peer_lost(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    peer = next((e.fields.get("peer") for e in evs if e.fields.get("peer")), "")
    msg = "a peer closed its connection" + (f" ({peer})" if peer else "") + ": remote process exited or a network error"
    if any("timed out" in e.fields.get("text", "") for e in evs):  # socket.cc's recv: the peer stopped answering
        msg = "a connection to a peer timed out: the peer stopped answering (it died or hung) or the network dropped it"
    fix = EXPLANATIONS["TD046"].fix
    if "bootstrap.cc" in ctx.trail_sources and older_than(ctx, (2, 27, 3)) is not False:
        msg += " during bootstrap"
        fix = (
            "During bootstrap this is either a rank that died at start or another program that connected to "
            "NCCL's port and left (a security scanner): NCCL before 2.27.3 fails on the latter, upgrade NCCL. " + fix
        )
    if odd := odd_interfaces(ctx):
        fix = f"{odd} {fix}"
    return Said("TD046", msg, fix)


_GROUP_SAID = {
    "gone": "the remote queue pair no longer exists (detected at the peer): the peer's process is usually no longer "
    "present",
    "unresponsive": "the receiver stopped answering: its process, its EFA device or its host is gone",
    "unreachable": "the EFA device never reached the remote: the security group or the subnet, or a peer no longer "
    "present",
    "refused": "the remote rejected the request's address or memory key: the peer's registrations or its EFA "
    "device went away, or the two sides disagree",
}


def _peer_gone(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    status = f.get("status", "")
    where = f" (peer host {f['peer_host']})" if f.get("peer_host") else ""
    msg = (
        f"the EFA provider reported '{f.get('said', '')}' (status {status}){where}: "
        f"{_GROUP_SAID.get(f.get('group', ''), 'the remote end went away')}; the cause is on the peer or between "
        "the two"
    )
    extra: dict[str, object] = {"status": status, "group": f.get("group", "")}
    if f.get("peer_host"):
        extra["peer_host"] = f["peer_host"]
    return Said("TD092", msg, EXPLANATIONS["TD092"].fix, extra)


def _mismatch(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if around := f.get("around") or f.get("around2"):  # NCCL 2.4's checks: the collectives differ between ranks
        return Said(
            "TD073",
            f"NCCL detected a collective mismatch: ranks running different collectives (around rank {around})",
            "The program called collectives in a different order, or with different sizes, on some ranks: check "
            "the calls at and around that rank (TORCH_DISTRIBUTED_DEBUG=DETAIL names them); different NCCL "
            "settings or versions between nodes do the same (compare `env | grep NCCL` on each).",
        )
    a, b = f.get("a") or f.get("a2", "?"), f.get("b") or f.get("b2", "?")
    return Said(
        "TD073", f"ranks disagree on a transfer: {a} bytes here, {b} bytes at the peer", EXPLANATIONS["TD073"].fix
    )


def _version_code(code: str) -> str:
    n = int(code) if code.isdigit() else 0
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}" if n >= 10000 else code


def _versions(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD048",
        f"rank {f.get('a')} runs NCCL {_version_code(f.get('va', ''))}, rank {f.get('b')} NCCL "
        f"{_version_code(f.get('vb', ''))}",
        EXPLANATIONS["TD048"].fix,
    )


def _net(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    net = ctx.env.get("NCCL_NET") or f.get("net")
    return Said(
        "TD040", f"no NCCL network could be initialised{f' (NCCL_NET={net})' if net else ''}", EXPLANATIONS["TD040"].fix
    )


def _dup(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    msg = (
        f"ranks {f['a']} and {f['b']} both use the GPU at bus {f['dev']}"
        if f.get("a") and f.get("dev")
        else f"ranks {f['a']} and {f['b']} both use one GPU"
        if f.get("a")
        else f"the launch names GPU {f['dev']} twice ({f.get('said', '').strip()[:80]}): two ranks share it, which "
        "NCCL refuses (invalid usage)"
        if f.get("from") == "words"
        else f"the post quotes NCCL's refusal ({f.get('said', '').strip()[:120]}): two ranks of one host use one GPU"
        if f.get("from") == "title"
        else "several ranks use the same GPU"
    )
    if ctx.overcommit:  # the launch line itself starts more processes than it leaves GPUs
        fix = f"The launch line starts more processes per node than the GPUs it leaves visible (`{ctx.overcommit}`): "
        fix += "make --nproc_per_node equal the GPUs in CUDA_VISIBLE_DEVICES (one process per GPU). "
        return Said("TD042", msg, fix + EXPLANATIONS["TD042"].fix)
    return Said("TD042", msg, EXPLANATIONS["TD042"].fix)


def _invalid_rank(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if root := f.get("rootn") or f.get("rootn2"):  # bootstrap.cc's root: ranks that disagree on the world size
        other = f.get("procn") or f.get("procn2")
        msg = f"ranks reaching NCCL's bootstrap root disagree on the world size ({root} and {other})"
        return Said("TD080", msg, _ROOT_FIX + " " + EXPLANATIONS["TD080"].fix, {"nranks": root, "ranks": []})
    if twice := f.get("twice"):
        msg = f"rank {twice} of {f.get('nranks', '?')} checked in twice at NCCL's bootstrap root"
        return Said(
            "TD080", msg, _ROOT_FIX + " " + EXPLANATIONS["TD080"].fix, {"nranks": f.get("nranks"), "ranks": [twice]}
        )
    ranks = sorted({int(e.fields["rank"]) for e in evs if e.fields.get("rank", "").lstrip("-").isdigit()})
    shown = ", ".join(str(r) for r in ranks[:6]) + ("..." if len(ranks) > 6 else "")
    n = f.get("nranks", "?")
    # the words without their numbers (a title): which rank and size, the message does not say
    who = (
        f"rank {shown} asked for a place in a communicator of {n} ranks"
        if ranks
        else "a rank outside the communicator was asked for"
    )
    return Said(
        "TD080",
        f"{who}: more processes than the world size",
        EXPLANATIONS["TD080"].fix,
        {"nranks": n, "ranks": ranks},
    )


def _sharp(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """sharp_plugin.c: sharp_coll_init (reaching SHARP's manager), sharp_coll_comm_init (the job's group in the
    switches), sharp_coll_reg_mr, with libsharp_coll's error string and number."""
    what = f.get("what", "SHARP failed")
    err = f" ({f['err'].strip()}, {f.get('num')})" if f.get("err") else ""
    step = {
        "SHARP coll init error": "libsharp_coll could not start for this job",
        "SHARP group create failed": "SHARP could not create the job's group in the switches",
    }.get(what, f"the SHARP plugin failed ({what})")
    return Said("TD957", f"{step}{err}", EXPLANATIONS["TD957"].fix, {"step": what})


# bootstrap.cc: every rank of one communicator reaches one root with the same unique id and world size
_ROOT_FIX = (
    "Two processes were given the same RANK, or two jobs (or two communicators' inits) reached one root: the same "
    "NCCL_COMM_ID or MASTER_ADDR:MASTER_PORT for both, a unique id reused; give each job its own port and each "
    "process its own rank."
)


def _skipped(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    devs = list(dict.fromkeys(e.fields["dev"] for e in evs if e.fields.get("dev")))
    which = ", ".join(devs) if devs else "an RDMA device"
    used = f"; NCCL went on with {', '.join(ctx.link_layers)}" if ctx.link_layers else ""
    return Said("TD081", f"NCCL could not open {which} and skipped it{used}", EXPLANATIONS["TD081"].fix)


NETWORK: dict[str, Builder] = {
    "ib-memlock": _memlock,
    "ib-dmabuf": _dmabuf,
    "ib-device": _device,
    "ib-qp-connect": _qp,
    "ib-verbs": _verbs,
    "ib-status-4": _status,
    "ib-status-5": _status,
    "ib-status-12": _status,
    "ib-status-remote": _status,
    "socket-ifname": _ifname,
    "sharp": _sharp,
    "connect": _connect,
    "peer-lost": _peer_lost,
    "net-peer-gone": _peer_gone,
    "store": _store,
    "collective-mismatch": _mismatch,
    "version-mismatch": _versions,
    "net-plugin": _net,
    "duplicate-gpu": _dup,
    "invalid-rank": _invalid_rank,
    "ib-device-skipped": _skipped,
}
