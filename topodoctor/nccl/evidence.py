"""What a finding of `nccl-log` is built from: the context the logs give around a failure (the
NCCL variables set, the versions, the RDMA link layers, the topology file, the trail) and what a
builder returns (code, message, fix). The builders live in ``fixes_host`` and ``fixes_network``:
each fix names the evidence (the CUDA error, the verbs call and errno, the status and HCA, the
variable, the file), so two logs of one class with different evidence get different fixes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from topodoctor.nccl.connect_retries import BRIDGES
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.logfile import Sign
from topodoctor.nccl.parse import Event

RESULT = {
    1: "unhandled cuda error",
    2: "unhandled system error",
    3: "internal error",
    4: "invalid argument",
    5: "invalid usage",
    6: "remote process exited or there was a network error",
}
# ibv_wc_status (rdma-core's verbs.h): the statuses an NCCL completion error names
IBV_WC_STATUS = {
    4: "local protection error",
    5: "work request flushed",
    9: "remote invalid request",
    10: "remote access error",
    11: "remote operation error",
    12: "transport retry counter exceeded: the peer's NIC did not acknowledge in time",
    13: "RNR retry counter exceeded: the peer had no receive posted",
}


@dataclass(frozen=True)
class LogContext:
    """What the logs say around the failure: the NCCL variables set, NCCL versions, RDMA link
    layers (the failing host's where its line names it; else the devices every host names alike),
    the topology file, and per file whether work went on after the failure."""

    env: Mapping[str, str]
    versions: tuple[str, ...] = ()
    link_layers: Mapping[str, str] = field(default_factory=dict)
    topo_file: str = ""
    trail_sources: frozenset[str] = frozenset()
    socket_ifs: Mapping[str, str] = field(default_factory=dict)  # interface -> address NCCL's sockets use
    gpu_names: tuple[str, ...] = ()  # consumer GPUs the log names (GeForce, RTX workstation)
    hosts: int = 0  # hosts the logs name in NCCL's line prefix
    secondary: tuple[Event, ...] = ()  # the lines that follow a failure (a segment's summary, a proxy's report)
    info: bool = False  # a log at NCCL_DEBUG=INFO: NCCL printed the variables it read (NCCL_ALGO set by ...)
    networks: tuple[str, ...] = ()  # the networks NCCL said it uses ("Using network IBext_v8"), at INFO
    signs: tuple[Sign, ...] = ()  # INFO lines that tell a class's causes apart (``nccl.info_signs``)
    # host -> RDMA device -> IB or RoCE; ``link_layers`` is the failing host's (``on_host``)
    host_layers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    worked_first: bool = False  # a file shows work that progressed before its first failure line
    # every NCCL_* the logs show set: NCCL's own lines (``env``) and the command lines and exports pasted with them
    shown: Mapping[str, str] = field(default_factory=dict)
    launch_nodes: int = 0  # the hosts a pasted launch line asks for (torchrun --nnodes, mpirun -H), 0 where none
    frameworks: tuple[str, ...] = ()  # the frameworks whose own source the failure's lines name (TensorRT-LLM, ...)
    classes: tuple[str, ...] = ()  # NCCL's error classes the logs name, lower case ("unhandled cuda error")
    overcommit: str = ""  # a launch line starting more processes per node than it leaves GPUs visible, as written


@dataclass(frozen=True)
class Said:
    """A finding's code, message and fix, and what its evidence adds."""

    code: str
    message: str
    fix: str
    extra: dict[str, object] = field(default_factory=dict)


Builder = Callable[[Mapping[str, str], Sequence[Event], LogContext], Said]


def _version(v: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in v.split("+")[0].split(".")[:3])
    except ValueError:
        return ()


def older_than(ctx: LogContext, version: tuple[int, ...]) -> bool | None:
    """Whether every NCCL version the logs name is older than ``version``; None when none is named."""
    known = [t for t in (_version(v) for v in ctx.versions) if t]
    return all(t < version for t in known) if known else None


def with_general(code: str, specific: str) -> str:
    """The fix for ``code``: what the evidence adds first, then the class's general fix."""
    return f"{specific} {EXPLANATIONS[code].fix}" if specific else EXPLANATIONS[code].fix


def odd_names(ctx: LogContext) -> list[str]:
    """The sockets' interfaces that do not reach other nodes: a container bridge, a link-local
    address, loopback when the ranks are on several hosts (it is right for ranks of one host)."""
    return [
        n
        for n, a in ctx.socket_ifs.items()
        if n.startswith(BRIDGES) or a.startswith(("169.254.", "fe80:")) or (n == "lo" and ctx.hosts > 1)
    ]


def bridges_among(ctx: LogContext) -> bool:
    """NCCL's socket network lists container bridges or link-local interfaces beside a routed one: its socket
    transport takes every listed interface as a device of its own (net_socket.cc), so some channels between nodes
    go over interfaces that reach no other node. Two interfaces or more: the bootstrap names one alone."""
    odd = [n for n in odd_names(ctx) if n != "lo"]
    return bool(odd) and len(ctx.socket_ifs) >= 2 and len(odd) < len(ctx.socket_ifs)


def only_odd_interfaces(ctx: LogContext) -> bool:
    """Every interface NCCL's sockets use is a bridge or link-local one (loopback alone does not count)."""
    odd = odd_names(ctx)
    return bool(odd) and len(odd) == len(ctx.socket_ifs) and any(n != "lo" for n in odd)


def odd_interfaces(ctx: LogContext) -> str:
    """The sockets' interfaces that do not reach other nodes, as a sentence naming them and the
    others; "" when none is odd."""
    odd = odd_names(ctx)
    if not odd:
        return ""
    good = [n for n in ctx.socket_ifs if n not in odd]
    use = f" set NCCL_SOCKET_IFNAME={good[0]}" if good else " set NCCL_SOCKET_IFNAME to the routed interface"
    return f"NCCL's sockets use {', '.join(odd)} (a bridge, loopback or link-local address):{use}."


def agreed_layers(host_layers: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The link layer of each RDMA device that every host naming it names alike: a merged log of an
    InfiniBand host and a RoCE host holds no one layer for their common device name."""
    seen: dict[str, set[str]] = {}
    for layers in host_layers.values():
        for dev, layer in layers.items():
            seen.setdefault(dev, set()).add(layer)
    return {dev: next(iter(layers)) for dev, layers in seen.items() if len(layers) == 1}


def on_host(ctx: LogContext, host: str) -> LogContext:
    """The context of a failure printed on ``host``: that host's link layers where the logs show them."""
    if host and (layers := ctx.host_layers.get(host)):
        return replace(ctx, link_layers=dict(layers))
    return ctx
