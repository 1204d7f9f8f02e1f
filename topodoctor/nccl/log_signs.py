"""What a log shows that tells one cause of a failure class from another: the records of a class's
causes (``ClassCause``, ``ClassCauses``) and the tests on the log's lines and context each cause is singled out,
ranked up or ruled out by (the plugin's network or the plugin loaded, a GID index or RoCE version set by
environment, the GID in use as a WARN or net_ib's queue-pair line names it, the NCCL versions, the topology
file NCCL loaded, cuMem and /dev/shm imports of host buffers, connections without GPUDirect RDMA: the signs
``nccl.info_signs`` reads). Data and pure functions; no I/O."""

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
    """No line of any log singles this cause out: it stays a candidate."""
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
    """The local GID a failing line of ``evs`` names, or ""."""
    return next((m.group(1) for e in evs if (m := LOCAL_GID.search(e.text))), "")


def _on(host: str) -> str:
    return f" on {host}" if host else ""


def gids_in_use(ctx: LogContext) -> list[tuple[str, str, str]]:
    """(host, GID index, GID) of every RoCE queue pair net_ib's INFO line names."""
    return [(s.host, *s.value.split(" ", 1)) for s in ctx.signs if s.kind == "gid"]  # type: ignore[misc]


def listed_gid(evs: Sequence[Event], ctx: LogContext) -> tuple[str, str, str]:
    """(index, GID, RoCE version) of the GID index the log shows forced (NCCL_IB_GID_INDEX, or the WARN's
    ``local GID index N``) as the pasted GID table or a sentence lists it; ("", "", "") when not listed."""
    forced = ctx.env.get("NCCL_IB_GID_INDEX", "")
    index = forced if forced and forced != "-1" else next((m[1] for e in evs if (m := GID_INDEX.search(e.text))), "")
    listed = [s.value.split(" ") for s in ctx.signs if s.kind == "gid-listed"]
    return next(((i, gid, ver) for i, gid, ver in listed if i == index), ("", "", ""))


def gid_link_local(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words when the GID in use is link-local (fe80::) or RoCE v1, which no router forwards."""
    gid = local_gid(evs)
    if gid.lower().startswith("fe80"):
        return f"the local GID in use is {gid}, a link-local address no router forwards"
    host, index, addr = next(((h, i, a) for h, i, a in gids_in_use(ctx) if a.startswith("fe80")), ("", "", ""))
    if addr:
        return f"NET/IB{_on(host)} uses GID index {index}, {addr}, a link-local address no router forwards"
    index, addr, ver = listed_gid(evs, ctx)
    if addr.startswith(("fe80", "link-local")) or ver == "v1":
        what = ", ".join(p for p in (addr if addr != "-" else "", f"RoCE {ver}" if ver != "-" else "") if p)
        return f"the GID index in use, {index}, is listed as {what}: a GID no router forwards"
    return ""


def roce_v1(evs: Sequence[Event], ctx: LogContext) -> bool:
    """The environment asks for RoCE v1 GIDs, which no router forwards, or IPv6 ones (a link-local may match)."""
    return ctx.env.get("NCCL_IB_ROCE_VERSION_NUM", "") == "1" or ctx.env.get("NCCL_IB_ADDR_FAMILY", "") == "AF_INET6"


def gid_routable(evs: Sequence[Event], ctx: LogContext) -> bool:
    """The GID in use is RoCE v2 (IPv4-mapped) or a global IPv6 one: the GID index is not the fault. net_ib's
    line gives the address, not its RoCE version: it counts only where NCCL chose the GID itself, as v2."""
    gid = local_gid(evs).lower()
    if gid:
        return not gid.startswith("fe80")
    _, addr, ver = listed_gid(evs, ctx)
    if ver == "v2" and not addr.startswith(("fe80", "link-local")):
        return True  # the forced index is listed as a RoCE v2 GID
    seen = [a for _, _, a in gids_in_use(ctx)]
    chosen = not gid_set_by_env(evs, ctx) and not roce_v1(evs, ctx)
    return chosen and bool(seen) and all(a != "::" and not a.startswith("fe80") for a in seen)


def ibext(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words when the network in use is the HPC-X / SHARP plugin's IB (IBext)."""
    net = next((n for n in ctx.networks if "IBext" in n), "")
    if net:
        return f"the network in use is {net}, the HPC-X / SHARP plugin's IB"
    s = next((s for s in ctx.signs if s.kind == "net-plugin" and "IBext" in s.value), None)
    return f"NCCL loaded the net plugin {s.value}{_on(s.host)}, the HPC-X / SHARP plugin's IB" if s else ""


def not_ibext(evs: Sequence[Event], ctx: LogContext) -> bool:
    """The log shows the network or the plugin NCCL used, and it is not IBext: NCCL's own IB, or another plugin."""
    if ibext(evs, ctx):
        return False
    return bool(ctx.networks) or any(s.kind in ("net-plugin", "no-net-plugin") for s in ctx.signs)


def cumem_mixed(evs: Sequence[Event], ctx: LogContext) -> str:
    """cuMem host memory that works on some local ranks only: NCCL's own line, or both kinds of import."""
    if s := next((s for s in ctx.signs if s.kind == "cumem-host-fails"), None):
        return f"NCCL said{_on(s.host)}: {s.said}"
    cu = next((s for s in ctx.signs if s.kind == "cumem-import"), None)
    mm = next((s for s in ctx.signs if s.kind == "mmap-import"), None)
    if cu and mm and not any(s.kind == "multi-gpu-process" for s in ctx.signs):  # one rank per process
        return f"local peers' host buffers came through cuMem ('{cu.said}') and as /dev/shm files ('{mm.said}')"
    return ""


def cumem_host_off(evs: Sequence[Event], ctx: LogContext) -> bool:
    """cuMem host memory turned off by the environment, and no rank imported a buffer through it."""
    off = "0" in (ctx.env.get("NCCL_CUMEM_HOST_ENABLE"), ctx.env.get("NCCL_CUMEM_ENABLE"))
    return off and not any(s.kind == "cumem-import" for s in ctx.signs)


def shm_open_names(evs: Sequence[Event], ctx: LogContext) -> bool:
    """A segment named as NCCL before 2.12 names it (include/shm.h's shm_open of nccl-shm-<hash>-...: the same
    name again for the same ranks), not 2.12+'s mkstemp file /dev/shm/nccl-XXXXXX."""
    seg = evs[0].fields.get("seg", "")
    return seg.startswith("nccl-shm-") or older_than(ctx, (2, 12, 0)) is True


def mkstemp_names(evs: Sequence[Event], ctx: LogContext) -> bool:
    """The segment is 2.12+'s mkstemp file, whose name differs every time: the negation of shm_open_names."""
    return not shm_open_names(evs, ctx)


def before_shm_register_summary(evs: Sequence[Event], ctx: LogContext) -> bool:
    """Before 2.16 a refused cudaHostRegister of the segment skips the summary line (shm.h's and
    shmutils.cc's cudaError label): the summary alone is no CUDA failure there."""
    return shm_open_names(evs, ctx) or older_than(ctx, (2, 16, 0)) is True


def before_cumem_host(evs: Sequence[Event], ctx: LogContext) -> bool:
    """cuMem host memory for the SHM transport came with 2.23 (NCCL_CUMEM_HOST_ENABLE)."""
    return shm_open_names(evs, ctx) or older_than(ctx, (2, 23, 0)) is True


def mapping_refused(evs: Sequence[Event], ctx: LogContext) -> bool:
    """The summary's errno (2.22+) says the memory was refused, not the room in /dev/shm."""
    return evs[0].fields.get("errno") == "12"


def no_gdrdma(evs: Sequence[Event], ctx: LogContext) -> bool:
    """No network connection runs GPUDirect RDMA (none shows /GDRDMA, or NCCL_NET_GDR_LEVEL=0 / LOC): the NIC
    never reads or writes GPU memory."""
    return ctx.env.get("NCCL_NET_GDR_LEVEL") in ("0", "LOC") or any(s.kind == "no-gdrdma" for s in ctx.signs)


def no_user_registration(evs: Sequence[Event], ctx: LogContext) -> bool:
    """User buffer registration turned off, both kinds (NCCL_LOCAL_REGISTER=0, NCCL_GRAPH_REGISTER=0)."""
    return ctx.env.get("NCCL_LOCAL_REGISTER") == "0" and ctx.env.get("NCCL_GRAPH_REGISTER") == "0"


def rails_kept(evs: Sequence[Event], ctx: LogContext) -> bool:
    """NCCL_CROSS_NIC=0 already keeps each ring on one rail."""
    return ctx.env.get("NCCL_CROSS_NIC") == "0"


def at_destroy(evs: Sequence[Event], ctx: LogContext) -> bool:
    """The logs show a failure in a communicator's destroy or abort (init.cc's commReclaim WARN)."""
    return any(s.kind == "at-destroy" for s in ctx.signs)


def versions_differ(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words when its ranks name more than one NCCL version."""
    seen = sorted({v.split("+")[0] for v in ctx.versions})
    return f"the logs name NCCL {' and '.join(seen)}" if len(seen) > 1 else ""


def ib_timeout(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words when NCCL_IB_TIMEOUT is set."""
    value = ctx.env.get("NCCL_IB_TIMEOUT", "")
    return (
        f"NCCL_IB_TIMEOUT={value} is set (the default is 20 from 2.14, 18 before)"
        if value.isdigit() and int(value) < 18
        else ""
    )


def ofi(evs: Sequence[Event], ctx: LogContext) -> bool:
    """aws-ofi-nccl is the network: on AWS instance types it hands NCCL a topology file of its own."""
    plugins = [s.value for s in ctx.signs if s.kind == "net-plugin"]
    return any("Libfabric" in n or "OFI" in n for n in (*ctx.networks, *plugins)) or any(
        s.kind == "ofi-provider" for s in ctx.signs
    )


def plugin_topo(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words when the topology file NCCL loaded is the network plugin's own."""
    f = ctx.topo_file
    return f"the file is the network plugin's own, {f}" if "aws-ofi-nccl" in f or "/proc/self/fd" in f else ""


def user_topo(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words when NCCL loaded a topology file of the user's (NCCL_TOPO_FILE)."""
    f = ctx.topo_file or ctx.env.get("NCCL_TOPO_FILE", "")
    return f"NCCL loaded {f}" if f and not plugin_topo(evs, ctx) else ""


def before_2_8(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words when its NCCL is older than 2.8."""
    return f"the log's NCCL is {ctx.versions[0]}, before 2.8" if older_than(ctx, (2, 8, 0)) else ""


def odd_ifs(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words for interfaces NCCL should not use (docker bridges, veths), or ""."""
    return odd_interfaces(ctx).rstrip(".")


def roce(evs: Sequence[Event], ctx: LogContext) -> bool:
    """Whether the log shows RoCE: a RoCE link layer, a local GID, or GIDs in use."""
    return "RoCE" in ctx.link_layers.values() or bool(local_gid(evs)) or bool(gids_in_use(ctx))


def ib_only(evs: Sequence[Event], ctx: LogContext) -> bool:
    """The link is InfiniBand: every device NCCL lists is IB, or net_ib's queue-pair lines name LIDs, not GIDs."""
    lids = any(s.kind == "ib-lid" for s in ctx.signs)
    return (bool(ctx.link_layers) or lids) and not roce(evs, ctx)


def worked_first(evs: Sequence[Event], ctx: LogContext) -> bool:
    """Whether the job made progress (steps, test rows) before it failed: a path that carried traffic, then broke."""
    return ctx.worked_first


def several_nics(evs: Sequence[Event], ctx: LogContext) -> bool:
    """Whether the log shows more than one RDMA device."""
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


LOCALHOST = ("localhost", "localhost.localdomain")


def one_name_two_hosts(ctx: LogContext) -> str:
    """The log's words when two machines share one host name: one name whose sockets bind two addresses of one
    interface, or ranks all named localhost in a launch over several hosts. NCCL tells nodes apart by a hash of the
    host name (the boot ID too in later releases; NCCL_HOSTID overrides both), so it joins ranks of two machines
    by P2P or SHM as if they shared a node, and CUDA IPC between them fails. "" when the log shows neither."""
    seen: dict[tuple[str, str], list[str]] = {}
    for s in ctx.signs:
        if s.kind == "host-address" and s.host:
            iface, addr = s.value.split(" ", 1)
            if addr not in (got := seen.setdefault((s.host, iface), [])) and not addr.startswith(("127.", "::1")):
                got.append(addr)
    if two := next(((h, i, a) for (h, i), a in seen.items() if len(a) > 1), None):
        host, iface, addrs = two
        two_of = f"two machines (or network namespaces) named {host}"
        return f"ranks named {host} bind {iface} at {addrs[0]} and at {addrs[1]}: {two_of}"
    hosts = {s.host for s in ctx.signs if s.host}
    if ctx.launch_nodes > 1 and len(hosts) == 1 and (name := next(iter(hosts))) in LOCALHOST:
        return f"every rank's lines are of host {name} in a launch over {ctx.launch_nodes} hosts: the machines share it"
    return ""


# the frameworks whose own source paths a log's lines carry (a failed call's file, a traceback's frame)
FRAMEWORK_PATHS = (
    ("TensorRT-LLM", re.compile(r"tensorrt_llm[/.]")),
    ("vLLM", re.compile(r"/vllm/|\bvllm\.(?:distributed|worker|executor|model_executor)\b")),
    ("SGLang", re.compile(r"/sglang/|\bsglang\.srt\b")),
    ("DeepSpeed", re.compile(r"/deepspeed/|\bdeepspeed\.(?:comm|runtime)\b")),
    ("Megatron-LM", re.compile(r"/megatron/(?:core|training)/")),
    ("Horovod", re.compile(r"/horovod/")),
    ("PaddlePaddle", re.compile(r"paddle/fluid/|/paddle/(?:distributed|phi)/")),
)


def frameworks_named(events: Sequence[Event]) -> tuple[str, ...]:
    """The frameworks whose own source the failure's lines name, in the order first seen."""
    return tuple(dict.fromkeys(name for e in events for name, rx in FRAMEWORK_PATHS if rx.search(e.text)))


def two_wheels(ctx: LogContext) -> str:
    """The post's package listing where it holds two NCCL wheels (nvidia-nccl-cu11 beside nvidia-nccl-cu12): which
    libnccl a process loads first is then the order of the paths, not the one its torch was built with; ""."""
    wheels = [s.value.split() for s in ctx.signs if s.kind == "nccl-wheel"]
    if len(wheels) < 2:
        return ""
    older = min(wheels, key=lambda w: tuple(int(x) for x in w[1].split(".")))
    return (
        f"The paste lists {' and '.join(' '.join(w) for w in wheels)}: a process that finds the older first loads "
        f"it. Keep the wheel torch depends on (`pip show torch`) and uninstall the other (`pip uninstall "
        f"{older[0]}` where the older is the extra one). "
    )
