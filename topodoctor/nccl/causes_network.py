"""The causes of the network classes whose message fits several (net_ib's completion statuses, ibvwrap's
ibv_modify_qp and device errors, the socket connect), most likely first, with what tells each apart.
Data; ``nccl.causes`` weighs them against a log."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from topodoctor.nccl.connect_retries import link_local
from topodoctor.nccl.evidence import LogContext, older_than
from topodoctor.nccl.log_signs import (
    NET_COLLECT,
    VERSIONS,
    ClassCause,
    ClassCauses,
    gid_forced,
    gid_link_local,
    gid_routable,
    gid_set_by_env,
    ib_only,
    ib_timeout,
    ibext,
    no_gdrdma,
    no_user_registration,
    not_ibext,
    odd_ifs,
    rails_kept,
    roce,
    roce_v1,
    several_nics,
    worked_first,
)
from topodoctor.nccl.parse import Event

# ibv_modify_qp at RTR with a GID index the port's table does not hold: EINVAL (out of range, a bad attribute) or
# ENODATA (the kernel's rdma_get_gid_attr on an empty entry)
_BAD_GID_ERRNO = re.compile(r"Invalid argument|No data available")

_PORT_NOT_ACTIVE = ClassCause(
    "a port that is down or not Active: keep only the active ones in NCCL_IB_HCA",
    "`ibstat` / `ibv_devinfo` (State Active, LinkUp) on every node",
)
_DEVICE_GONE = ClassCause(
    "the device went away under NCCL (a VF removed, a driver reload, a NIC reset)",
    "`dmesg` for mlx5 resets, `ls /sys/class/infiniband` before and after",
)
_GID = ClassCause(
    "the GID index selects a GID the peer cannot reach: a link-local (fe80::) or RoCE v1 GID is not routed; set "
    "NCCL_IB_GID_INDEX to the RoCE v2 GID of the IP the nodes route (often 3), or unset it",
    "`show_gids`: the type and address of the index in use on both nodes; NCCL_DEBUG_SUBSYS=NET prints the index "
    "and GID of each queue pair (`NET/IB: ... GID 3 (0/...)`)",
    gid_link_local,
    first=lambda evs, ctx: roce(evs, ctx) or bool(gid_forced(evs, ctx)) or roce_v1(evs, ctx),
    ruled_out=lambda evs, ctx: ib_only(evs, ctx) or gid_routable(evs, ctx),
)
_IBEXT = ClassCause(
    "the IB in use is the external HPC-X / SHARP plugin (IBext), not NCCL's own: it reads NCCL_IBEXT_DISABLE "
    "(NCCL_IB_DISABLE turns off only NCCL's IB) and its own copies of the NCCL_IB_* settings; to leave IB, set "
    "NCCL_IBEXT_DISABLE=1 or NCCL_NET=Socket",
    "the `Using network IBext` or `NET/Plugin: Loaded net plugin IBext` line of NCCL_DEBUG=INFO",
    ibext,
    ruled_out=not_ibext,
)
_RAIL = ClassCause(
    "a rail-optimised fabric where only NICs of the same rail reach each other: NCCL_CROSS_NIC=0",
    "whether NIC i of one node reaches every NIC of the other (`ib_write_bw` between rails)",
    first=several_nics,
    ruled_out=rails_kept,
)
_ROUTE = ClassCause(
    "the two RoCE IPs are not routed to each other (different subnets, no neighbour entry, an ACL)",
    "`ping -I <RoCE interface> <peer RoCE IP>` and `ip route` on both nodes",
    first=gid_routable,
    ruled_out=ib_only,
)
_LINK = ClassCause(
    "a link that is down or flapping (cable, port, switch)",
    "`ibstat` (State Active, LinkUp), the port error counters (`perfquery`), `dmesg` for link down",
)
_LOSSLESS = ClassCause(
    "the switches do not carry RDMA losslessly (PFC/ECN, the traffic class): NCCL_IB_TC to the class they "
    "carry without loss",
    "the switch's PFC/ECN configuration, the NIC's pause and ECN counters (`ethtool -S`)",
    first=gid_routable,
    ruled_out=ib_only,
)
# NCCL sets each queue pair's path MTU to the port's active_mtu (net_ib.cc), which RoCE takes from the interface's
_MTU = ClassCause(
    "the MTU: the NIC's RoCE MTU (its port's active_mtu, from the interface's MTU) larger than a switch port on "
    "the path carries, so full-size packets are dropped while small ones pass; set one MTU end to end",
    "`ibv_devinfo` (active_mtu) and `ip link` (mtu) on both nodes against the MTU of the switch ports between them",
    first=roce,
    ruled_out=ib_only,
)
_PEER = ClassCause(
    "the peer's process or node failed first, so its NIC stopped answering (a queue pair destroyed with its process "
    "drops what arrives, and the sender's retries run out)",
    "the other ranks' logs: the first failure of the job; on the peer's host `dmesg -T | grep -i -e oom -e 'killed "
    "process'`",
    first=worked_first,
)
_TIMEOUT = ClassCause(
    "NCCL_IB_TIMEOUT too low for the fabric's size or load",
    "the NCCL_IB_TIMEOUT the ranks run with; a large or congested fabric needs the default or more",
    ib_timeout,
)


def _before_work(cause: ClassCause) -> Callable[[Sequence[Event], LogContext], bool]:
    """``cause``'s own ranking, dropped where the job ran before the failure: no configuration waits for hours."""
    return lambda evs, ctx: cause.first(evs, ctx) and not ctx.worked_first


# the survivor's side of a peer that went away (TD092 the EFA provider's statuses, TD046 NCCL's sockets)
_PEER_PROCESS = ClassCause(
    "the peer's process failed first and is gone: out of memory (a CUDA out of memory error in its own "
    "training step, the kernel's OOM killer, the container's or the job's memory limit), a crash, or an exit on an "
    "error of its own",
    "the peer rank's own log and its last lines; on its host `dmesg -T | grep -i -e oom -e 'killed process'`, "
    "`kubectl describe pod` (OOMKilled) or `sacct -j JOB -o State,MaxRSS` (OUT_OF_MEMORY); the launcher's exit codes",
)
_PEER_ENDED = ClassCause(
    "the peer was ended by its launcher after a third rank failed: the job's first error is on another rank",
    "every rank's first error, by time; the launcher's table of failures (its first observed failure)",
)
_PEER_HARDWARE = ClassCause(
    "the peer's EFA device or instance failed (a hardware event)",
    "the peer instance's status checks and its kernel log for the EFA driver (`dmesg | grep -i efa`)",
)
_SECURITY_GROUP = ClassCause(
    "the security group does not let all traffic between the instances, or the instances are in different subnets "
    "(EFA reaches only its own subnet)",
    "the security group's inbound and outbound rules (all traffic to and from the group itself), each instance's "
    "subnet; `fi_pingpong -p efa` between the two hosts",
)
_PEER_NODE = ClassCause(
    "the peer's node went down or rebooted", "the node's uptime, the scheduler's node state, its kernel log"
)
_SOCKET_PATH = ClassCause(
    "the network between the nodes dropped the connection: the interface the sockets use (NCCL_SOCKET_IFNAME), a "
    "firewall or a connection-tracking timeout, a link that went down",
    "`ip route get <peer IP>` from each node, the Bootstrap / NET/Socket lines of NCCL_DEBUG=INFO, the link's counters",
    odd_ifs,
    first=lambda evs, ctx: bool(odd_ifs(evs, ctx)),
)
_STRAY_CONNECTION = ClassCause(
    "during bootstrap, a program that is not NCCL (a security scanner, a health check) connected to NCCL's port and "
    "closed: NCCL before 2.27.3 fails on it, upgrade NCCL",
    "the bootstrap.cc lines of the trail; the version banner; the same job on NCCL 2.27.3 or later",
    first=lambda evs, ctx: "bootstrap.cc" in ctx.trail_sources and older_than(ctx, (2, 27, 3)) is not False,
    ruled_out=lambda evs, ctx: "bootstrap.cc" not in ctx.trail_sources or older_than(ctx, (2, 27, 3)) is False,
)
PEER_CAUSES = (
    ClassCauses(
        "TD092",
        (_PEER_PROCESS, _PEER_ENDED, _PEER_HARDWARE),
        "the peer host's log (its host id in the line) and every rank's first error",
        lambda evs: evs[0].fields.get("group") == "gone",
    ),
    ClassCauses(
        "TD092",
        (_PEER_PROCESS, _PEER_HARDWARE, _PEER_ENDED, _SECURITY_GROUP),
        "the peer host's log (its host id in the line), the peer instance's health and every rank's first error",
        lambda evs: evs[0].fields.get("group") == "unresponsive",
    ),
    ClassCauses(
        "TD092",
        (_SECURITY_GROUP, _PEER_PROCESS, _PEER_HARDWARE),
        "the security group's rules and the subnets of both instances; the peer host's log",
        lambda evs: evs[0].fields.get("group") == "unreachable",
    ),
    ClassCauses(
        "TD092",
        (
            _PEER_PROCESS,
            _PEER_HARDWARE,
            ClassCause(
                "the two hosts run different aws-ofi-nccl or libfabric releases, or a release's own registration bug",
                "`fi_info --version` and the plugin's `NET/OFI Initializing aws-ofi-nccl` line on both hosts",
            ),
        ),
        "the peer host's log (its host id in the line), the peer instance's health and both hosts' EFA software",
        lambda evs: evs[0].fields.get("group") == "refused",
    ),
    ClassCauses(
        "TD046",
        (_STRAY_CONNECTION, _PEER_PROCESS, _SOCKET_PATH, _PEER_NODE),
        "the peer rank's log (its first error) and every rank's first error, by time; the Bootstrap / NET/Socket lines "
        "of NCCL_DEBUG=INFO on both nodes",
    ),
)

NETWORK_CAUSES: tuple[ClassCauses, ...] = (
    ClassCauses(  # ibv_modify_qp's ENODEV: the kernel finds no network device behind the GID the QP's path names
        "TD063",
        (
            ClassCause(
                "the GID index the queue pair uses (NCCL_IB_GID_INDEX; NCCL before 2.21 uses 0 unless it is set) "
                "has no network device behind it in this host or container: a forced index that is another node's or "
                "another pod's (GID tables differ per node and per pod), or a RoCE port whose interface has no IP "
                "address: set NCCL_IB_GID_INDEX per node from `show_gids` (/etc/nccl.conf), unset it on NCCL 2.21 "
                "and later (NCCL picks the RoCE v2 GID itself), or leave the port out with NCCL_IB_HCA",
                "`show_gids` on each node and in each pod: the index of the RoCE v2 GID of the IP in use, beside the "
                "NCCL_IB_GID_INDEX the rank runs with (NCCL_DEBUG_SUBSYS=NET prints `GID <index>` per queue pair)",
                gid_set_by_env,
                ruled_out=ib_only,
            ),
            _PORT_NOT_ACTIVE,
            _DEVICE_GONE,
        ),
        f"`show_gids` and `ibv_devinfo -v` on the node (in the pod where the rank runs), {NET_COLLECT}",
        lambda evs: "ibv_modify_qp" in evs[0].text and "No such device" in evs[0].text,
    ),
    ClassCauses(
        "TD063",
        (
            ClassCause(
                "a RoCE port whose interface has no IP address has no usable GID: give it the address, or leave it "
                "out with NCCL_IB_HCA",
                "`show_gids` (an empty GID list for the port), `ip -br addr` of its netdev",
                first=roce,
                ruled_out=ib_only,
            ),
            _PORT_NOT_ACTIVE,
            _DEVICE_GONE,
        ),
        f"`ibv_devinfo -v` and `show_gids` on the node, {NET_COLLECT}",
    ),
    ClassCauses(  # a connect to loopback or a link-local address: this host's own, or only its own link's
        "TD072",
        (
            ClassCause(
                "the interface NCCL's sockets chose has an address the nodes do not route: loopback (127.x, this "
                "host itself) or link-local (169.254.x or fe80::, reached only on its own link; a node-local agent's "
                "169.254 address is the same on every node): the peer advertised it and the connect reaches this "
                "node's own service or nothing; set NCCL_SOCKET_IFNAME to the interface the nodes route (or exclude "
                "that one: NCCL_SOCKET_IFNAME=^name)",
                "the NET/Socket / Bootstrap lines of NCCL_DEBUG=INFO on both nodes (the interfaces and addresses), "
                "`ip -br addr` on each node",
                odd_ifs,  # the sockets' own list names that interface: it is the one chosen
            ),
            ClassCause(
                "the peer's process was not listening (not started yet, or failed first: its own log)",
                "the peer rank's own log and first error",
                # loopback in a log of one host: ranks of one node reach each other there
                first=lambda evs, ctx: ctx.hosts == 1 and evs[0].fields.get("addr", "").startswith("127."),
            ),
            ClassCause("a firewall rejecting or dropping the port", "`nc -zv <peer IP> <port>`, the firewall's rules"),
        ),
        "the NET/Socket and Bootstrap lines of NCCL_DEBUG=INFO on every node, and the peer rank's log",
        lambda evs: (
            evs[0].kind == "connect" and (link_local(addr := evs[0].fields.get("addr", "")) or addr.startswith("127."))
        ),
    ),
    ClassCauses(  # a refused connect retried, pasted alone: nothing listened at the peer's address and port
        "TD072",
        (
            ClassCause(
                "the peer's process never reached its listen: it failed or hung at start (its own log: a GPU driver, "
                "a network plugin or its daemon that fails there, such as GPUDirect-TCPX's receive-datapath manager "
                "on a driver or CUDA newer than the image supports), or it is not started yet",
                "the peer rank's own log from its start; the driver and CUDA versions against the image's "
                "(`nvidia-smi`), the plugin's daemon's log",
                ruled_out=lambda evs, ctx: ctx.worked_first,
            ),
            ClassCause(
                "the address or port is not the peer's: the interface NCCL's sockets chose (NCCL_SOCKET_IFNAME; for "
                "GPUDirect-TCPX NCCL_GPUDIRECTTCPX_SOCKET_IFNAME), or MASTER_ADDR / NCCL_COMM_ID",
                "the Bootstrap / NET/Socket lines of NCCL_DEBUG=INFO on both nodes, `ip route get <peer IP>`",
                odd_ifs,
                first=lambda evs, ctx: bool(odd_ifs(evs, ctx)),
            ),
            ClassCause(
                "a firewall rejecting the port (an iptables REJECT with tcp-reset)",
                "`nc -zv <peer IP> <port>`, `iptables -L -n` on the peer",
            ),
        ),
        "the peer rank's log from its start and the first error of every rank; NCCL_DEBUG=INFO "
        "NCCL_DEBUG_SUBSYS=INIT,NET (the interfaces and addresses each side uses)",
        lambda evs: evs[0].fields.get("lone") == "1" and "refused" in evs[0].fields.get("err", ""),
    ),
    ClassCauses(
        "TD072",
        (
            ClassCause(
                "a firewall or security group dropping NCCL's ports between the nodes",
                "`nc -zv <peer IP> <port>` from one node to the other, the security group's rules",
            ),
            ClassCause(
                "the interface NCCL's sockets use is not routed between the nodes: NCCL_SOCKET_IFNAME to the routed "
                "one",
                "`ip route get <peer IP>` from each node, the Bootstrap / NET/Socket lines of NCCL_DEBUG=INFO",
                odd_ifs,
            ),
            ClassCause("the peer's node is down or unreachable", "`ping <peer IP>`, the peer's own log"),
        ),
        "the Bootstrap / NET/Socket lines of NCCL_DEBUG=INFO on both nodes (the interface and address each uses)",
        lambda evs: "timed out" in evs[0].fields.get("err", ""),
    ),
    ClassCauses(
        "TD064",
        (  # a QP that never reached RTR: a GID index the environment forced is the line that singles it out
            replace(_GID, shows=lambda evs, ctx: gid_link_local(evs, ctx) or gid_set_by_env(evs, ctx)),
            _RAIL,
            replace(_ROUTE, first=lambda evs, ctx: False),
            _IBEXT,
        ),
        f"`show_gids` and `ibv_devinfo -v` on both nodes, {NET_COLLECT}",
        lambda evs: not _BAD_GID_ERRNO.search(evs[0].text),
    ),
    ClassCauses(
        "TD064",
        (
            ClassCause(
                "the forced GID index does not exist on this port or is not a usable RoCE GID: NCCL_IB_GID_INDEX=-1 "
                "lets NCCL pick the RoCE v2 GID",
                "`show_gids`: the indexes the port has",
                gid_forced,
            ),
            _IBEXT,
        ),
        f"`show_gids` and `ibv_devinfo -v`, {NET_COLLECT}",
        lambda evs: bool(_BAD_GID_ERRNO.search(evs[0].text)),
    ),
    ClassCauses(
        "TD045",
        # a configuration fails the first transfer; a failure after the job ran puts the peer and the link first
        (
            *(replace(c, first=_before_work(c)) for c in (_GID, _ROUTE, _LOSSLESS, _MTU)),
            _PEER,
            replace(_LINK, first=worked_first),
            _RAIL,
            _TIMEOUT,
        ),
        f"`show_gids`, `ibstat` and the port counters on both nodes, {NET_COLLECT}; whether it fails at the first "
        "transfer (configuration) or after hours (the link, the peer)",
        lambda evs: evs[0].fields.get("status", "12") == "12",
    ),
    ClassCauses(
        "TD066",
        (
            ClassCause(
                "PCIe ACS (or an IOMMU in translation mode) on the path between the NIC and the GPU breaks GPUDirect "
                "RDMA: disable ACS on the switches, iommu=pt",
                "NCCL_NET_GDR_LEVEL=0 makes it go away (slower); `lspci -vvv | grep ACSCtl` shows SrcValid+ / "
                "ReqRedir+ on the bridges",
                ruled_out=no_gdrdma,  # connections without /GDRDMA: the NIC never touches GPU memory
            ),
            ClassCause(
                "the NIC cannot use the GPU memory it registered (nvidia-peermem or DMA-BUF, a VM without ATS)",
                "`lsmod | grep peermem`, NCCL_DMABUF_ENABLE=0 against the default, the driver and OFED versions",
                ruled_out=no_gdrdma,
            ),
            ClassCause(
                "a buffer freed or re-registered while a transfer used it (user buffer registration)",
                "NCCL_LOCAL_REGISTER=0 / NCCL_GRAPH_REGISTER=0 make it go away if so",
                ruled_out=no_user_registration,
            ),
        ),
        "`lspci -vvv | grep ACSCtl` on every bridge between NIC and GPU, `dmesg | grep -i -e DMAR -e iommu`, the run "
        "with NCCL_NET_GDR_LEVEL=0",
    ),
    ClassCauses(
        "TD068",
        (
            VERSIONS,
            ClassCause(
                "the peer's GPU memory registration (GPUDirect RDMA on the peer: ACS, nvidia-peermem)",
                "the peer with NCCL_NET_GDR_LEVEL=0",
                # the logs of both nodes show every connection without /GDRDMA: the peer's NIC reads host memory
                ruled_out=lambda evs, ctx: ctx.hosts > 1 and no_gdrdma(evs, ctx),
            ),
            ClassCause("a peer that hung or had no receive posted (status 13)", "the peer's log and stack"),
        ),
        f"every rank's NCCL version banner, {NET_COLLECT}",
    ),
)
