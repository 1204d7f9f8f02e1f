"""NCCL's own account of a run, from its INFO log (``NCCL_DEBUG=INFO``, one file per rank
through ``NCCL_DEBUG_FILE``, or a job's output holding every rank). No torch, no NCCL: text in,
``NcclAccount`` out. The lines and their shapes are ``nccl.grammar``'s (NCCL 2.18 - 2.30 wording):
the version banner, the init and communicator lines, rings, trees, channel counts, each connection
and its transport, ``set by environment to``, WARN; and, per host (NCCL's ``host:pid:tid`` prefix),
``Using network``, the devices of ``NET/IB : Using`` and ``NET/Socket : Using``, ``NET/IB : No
device found`` and ``GPU Direct RDMA Enabled / Disabled for HCA``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topodoctor.core import fileio
from topodoctor.model.collective_ops import SPECS
from topodoctor.model.nccl_account import (
    Connection,
    GdrHca,
    NcclAccount,
    NcclChoice,
    NcclGraphSeen,
    NetDevice,
    RankSeat,
    Route,
)
from topodoctor.nccl import grammar as g
from topodoctor.nccl.choices import Choices, GraphSearch, parse_choices, predicted_busbw, traffic_bytes

MAX_LOG_BYTES = 16 << 20  # a TRACE log of a long run; INFO logs are tens of KB
_Conn = tuple[int, int, int, str, str, str, str]  # (from, to, channel, connIndex, via, side, printing host)


def transport_of(via: str) -> tuple[str, str, bool]:
    """(label, kind, gdr) for the text after ``via``: P2P/CUMEM/read -> ("P2P/CUMEM", "p2p")."""
    parts = via.strip().split("/")
    head = parts[0].upper()
    gdr = "GDRDMA" in via.upper()
    if head == "P2P":
        return "/".join(parts[:2]), "p2p", False
    if head == "SHM" or via.strip().startswith("direct shared memory"):  # 2.4: "via direct shared memory"
        return "SHM", "shm", False
    if head == "NET":
        return "/".join(parts[:2]), "net", gdr
    if head.startswith("COLLNET"):
        return "/".join(parts[:2]), "collnet", gdr
    return via.strip(), "other", gdr


@dataclass
class _Log:
    """What one rank's log says."""

    version: str | None = None
    comms: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # ptr -> (rank, nranks, nnodes, local)
    devices: dict[int, tuple[int, int | None]] = field(default_factory=dict)  # rank -> (cudaDev, nvmlDev)
    seats: dict[int, RankSeat] = field(default_factory=dict)
    ring_channels: int | None = None
    channels: int | None = None
    nvls_channels: int | None = None
    p2p_channels: int | None = None
    rings: list[str] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)
    conns: set[tuple[int, int, int, str, str]] = field(default_factory=set)  # (from, to, channel, connIndex, via)
    printed: set[_Conn] = field(default_factory=set)  # the same, with the side and the host that printed it
    other_conns: int = 0  # connection lines of other communicators (subgroups), not counted
    env: dict[str, str] = field(default_factory=dict)
    no_nvls: bool = False
    warnings: list[str] = field(default_factory=list)
    choices: Choices | None = None  # rank 0 alone logs the cost table and per-call choices
    networks: dict[str, str] = field(default_factory=dict)  # host -> "Using network"
    net_devices: dict[tuple[str, str, int, str], NetDevice] = field(default_factory=dict)
    gdr_hcas: dict[tuple[str, str, str, str], GdrHca] = field(default_factory=dict)
    ib_absent: dict[str, None] = field(default_factory=dict)


def parse_log(text: str) -> _Log:
    """One rank's log. Connection lines name ranks of their communicator, not of the world, and
    do not say which communicator: each belongs to the last one set up before it in the log
    (a subgroup's ranks 0 and 1 may be the world's 0 and 2). Only the first, largest one (the
    world's) is counted; subgroups' connections are left out."""
    log = _Log()
    state: list[object] = [None, None]  # the current communicator, the world's (comm, nranks)
    for line in text.splitlines():
        if "NCCL" not in line:
            continue
        line = line.rstrip()
        if g.NO_NVLS.search(line):
            log.no_nvls = True
        msg = g.info_message(line)
        if msg is None:
            if m := g.WARN.search(line):
                log.warnings.append(m["msg"].strip()[:200])
            continue
        _info(log, line, msg, state)
    if any(w in text for w in ("Bytes -> Algo", "Algorithm", "Pattern ", "Could not find a path", " :GPU/")):
        log.choices = parse_choices(text.splitlines())
    return log


def _info(log: _Log, line: str, msg: str, state: list[object]) -> None:
    """One INFO message into the log's account (``state``: the current and the world's communicator)."""
    current, world = state
    if m := g.CONN.match(msg):
        if isinstance(world, tuple) and current != world[0]:
            log.other_conns += 1
            return
        # "a -> b" is the direction data flows, whichever side logged it ([send] or [receive])
        a, b, ch, idx, via = int(m["src"]), int(m["dst"]), int(m["channel"]), m["conn"] or "-", m["via"].strip()
        log.conns.add((a, b, ch, idx, via))
        log.printed.add((a, b, ch, idx, via, m["side"] or "", g.origin_host(line)))
    elif m := g.RING.match(msg):
        log.ring_channels = int(m.group(2))
        ring = " ".join(m.group(3).split())
        if ring not in log.rings:
            log.rings.append(ring)
    elif m := g.CHANNELS.match(msg):
        coll, nvls, p2p = m.groups()
        log.channels, log.p2p_channels = int(coll), int(p2p)
        log.nvls_channels = int(nvls) if nvls is not None else log.nvls_channels
    elif m := g.COMM.search(msg):
        nranks = int(m["nranks"])
        log.comms[m["comm"]] = (int(m["rank"]), nranks, int(m["nnodes"]), int(m["local_ranks"]))
        state[0] = m["comm"]
        if not isinstance(world, tuple) or nranks > world[1]:
            state[1] = (m["comm"], nranks)
    elif m := g.INIT.search(msg):
        rank, cuda, nvml = int(m["rank"]), int(m["cuda"]), int(m["nvml"]) if m["nvml"] is not None else None
        log.devices[rank] = (cuda, nvml)
        log.seats.setdefault(rank, RankSeat(rank, g.origin_host(line), cuda, nvml, m["bus"] or ""))
    elif m := g.TREES.match(msg):
        for t in g.TREE.findall(m.group(1)):
            if t not in log.trees:
                log.trees.append(t)
    elif m := g.SET_BY_ENV.match(msg):
        log.env[m.group(1)] = m.group(2)
    elif msg.startswith("NCCL version") and (m := g.VERSION.match(msg)):
        log.version = m["v"] + (m["suffix"] or "")
    else:
        _network(log, line, msg)


def _network(log: _Log, line: str, msg: str) -> None:
    """What a host's INFO says of its network: the one in use, its devices, GPUDirect RDMA per HCA."""
    if "NET" not in msg and "Using network" not in msg and "GPU Direct" not in msg:
        return
    host = g.origin_host(line)
    if m := g.NETWORK.match(msg):
        log.networks[host] = m["net"]
    elif m := g.IB_USING.search(msg):
        for d in g.IB_DEV.finditer(m.group(1)):
            key = (host, "IB", int(d["index"]), d["dev"])
            log.net_devices[key] = NetDevice(host, "IB", int(d["index"]), d["dev"], int(d["port"]), d["layer"])
    elif m := g.NET_SOCKET_USING.search(msg):
        for n, d in enumerate(g.SOCK_IF.finditer(m.group(1))):
            i = int(d["index"]) if d["index"] is not None else n
            log.net_devices[(host, "Socket", i, d["name"])] = NetDevice(
                host, "Socket", i, d["name"], None, "", d["addr"]
            )
    elif g.IB_NO_DEVICE.search(msg):
        log.ib_absent[host] = None
    elif m := g.GDR.search(msg):
        net, on = m["net"] or "", m["state"] == "Enabled"
        if m["hca"] is not None:
            hca, name, gpu, rank = m["hca"], m["name"], "", None
        elif m["gpu"] is not None:  # 2.24 - 2.28 print the GPU's rank where 2.18 - 2.23 print its bus id
            hca, name, gpu, rank = m["nic"], "", m["gpu"], None
        else:
            hca, name, gpu, rank = m["net_id"], "", m["gpu_id"], int(m["rank"])
        log.gdr_hcas[(host, net, hca, gpu)] = GdrHca(host, net, hca, name, on, gpu, rank)


def _choices(logs: list[_Log], nranks: int | None) -> tuple[tuple[NcclChoice, ...], tuple[str, ...]]:
    """NCCL's choices per op and size, with its predicted busbw, and its graph searches."""
    found = next((lg.choices for lg in logs if lg.choices and (lg.choices.calls or lg.choices.costs)), None)
    if found is None or not nranks:
        return (), ()
    out: list[NcclChoice] = []
    for c in found.calls:
        spec = SPECS.get(c.op)
        size = traffic_bytes(c.op, c.size_bytes, nranks)
        cost = found.cost(c.op, c.algorithm, c.protocol)
        pred = predicted_busbw(cost, size, spec.bus_factor(nranks)) if cost and spec else None
        out.append(NcclChoice(c.op, size, c.algorithm, c.protocol, c.channels, pred, c.calls))
    return tuple(sorted(out, key=lambda c: (c.op, c.size_bytes))), _graph_words(found.graphs)


def _graph_words(graphs: Iterable[GraphSearch]) -> tuple[str, ...]:
    """The graph searches in a few words each ("ring 12 ch x 30/30 GB/s NVL/PIX"), the first eight."""
    return tuple(
        f"{g.pattern} {g.channels} ch x {g.bw_intra_gbps:g}/{g.bw_inter_gbps:g} GB/s {g.type_intra}/{g.type_inter}"
        + (" (no path found: simple order)" if g.fallback else "")
        for g in graphs
    )[:8]


def _searches(logs: list[_Log]) -> dict[str, Any]:
    """Each distinct graph line of the logs (every rank prints its own) as data, and the patterns whose
    search found no path; read whether or not the log has NCCL's TUNING lines."""
    seen: dict[GraphSearch, None] = {}
    failed: dict[int, None] = {}
    paths: dict[tuple[str, float], None] = {}
    for lg in logs:
        if lg.choices is None:
            continue
        seen.update(dict.fromkeys(lg.choices.graphs))
        failed.update(dict.fromkeys(lg.choices.failed))
        paths.update(dict.fromkeys(lg.choices.paths))
    searches = tuple(
        NcclGraphSeen(
            0,
            gs.number or None,
            gs.channels,
            gs.bw_intra_gbps,
            gs.bw_inter_gbps,
            gs.type_intra,
            gs.type_inter,
            gs.cross_nic,
            fallback=gs.fallback,
        )
        for gs in seen
    )
    return {"searches": searches[:16], "search_failed": tuple(failed), "gpu_paths": tuple(paths)[:32]}


def _says(lg: _Log) -> bool:
    """Whether a log says anything of a communicator; a paste of a few network lines (NET/Socket :
    Using, GPU Direct RDMA Disabled for HCA, NET/IB : No device found) does."""
    searched = lg.choices is not None and bool(lg.choices.graphs or lg.choices.failed or lg.choices.paths)
    return bool(
        lg.version or lg.comms or lg.conns or lg.networks or lg.net_devices or lg.gdr_hcas or lg.ib_absent or searched
    )


def account(texts: Iterable[str]) -> NcclAccount | None:
    """One account from every rank's log; None when no log says anything about NCCL."""
    logs = [parse_log(t) for t in texts]
    logs = [lg for lg in logs if _says(lg)]
    if not logs:
        return None
    comms = [c for lg in logs for c in lg.comms.values()]
    main = max(comms, key=lambda c: c[1]) if comms else None
    seen: set[tuple[int, int, int, str, str]] = set()
    conn_count: dict[tuple[int, int, str, str], int] = {}
    gdr: bool | None = None
    for lg in logs:
        for a, b, ch, idx, via in lg.conns:
            label, kind, flag = transport_of(via)
            if (a, b, ch, idx, label) in seen:  # both ends of a network connection log it
                continue
            seen.add((a, b, ch, idx, label))
            conn_count[(a, b, label, kind)] = conn_count.get((a, b, label, kind), 0) + 1
            if kind in ("net", "collnet"):
                gdr = bool(gdr) or flag
    env: dict[str, str] = {}
    for lg in logs:
        env.update(lg.env)
    channels = next((lg.channels for lg in logs if lg.channels is not None), None)
    if channels is None:
        channels = next((lg.ring_channels for lg in logs if lg.ring_channels is not None), None)
    nvls_ch = next((lg.nvls_channels for lg in logs if lg.nvls_channels is not None), None)
    if nvls_ch is not None and nvls_ch > 0:
        nvls: bool | None = True
    elif nvls_ch == 0 or any(lg.no_nvls for lg in logs):
        nvls = False
    else:
        nvls = None
    choices, graphs = _choices(logs, main[1] if main else None)
    found = _searches(logs)
    graphs = graphs or _graph_words(g for lg in logs if lg.choices for g in lg.choices.graphs)
    return NcclAccount(
        version=next((lg.version for lg in logs if lg.version), None),
        ranks=main[1] if main else None,
        nodes=main[2] if main else None,
        channels=channels,
        p2p_channels=next((lg.p2p_channels for lg in logs if lg.p2p_channels is not None), None),
        nvls_channels=nvls_ch,
        nvls=nvls,
        gdr=gdr,
        connections=tuple(
            Connection(rank, peer, label, n, kind)  # type: ignore[arg-type]
            for (rank, peer, label, kind), n in sorted(conn_count.items())
        ),
        rings=tuple(dict.fromkeys(r for lg in logs for r in lg.rings))[:8],
        trees=tuple(dict.fromkeys(t for lg in logs for t in lg.trees))[:8],
        env=dict(sorted(env.items())),
        logs=len(logs),
        warnings=tuple(dict.fromkeys(w for lg in logs for w in lg.warnings))[:10],
        choices=choices,
        graphs=graphs,
        local_ranks=main[3] if main else None,
        **found,
        **_hosts(logs),
    )


def _hosts(logs: list[_Log]) -> dict[str, Any]:
    """The account's per-host fields: where each rank ran, each host's connections as it printed them
    (the whole transport, /GDRDMA included), its network, devices and GPUDirect RDMA per HCA."""
    seats: dict[int, RankSeat] = {}
    for lg in logs:
        for rank, seat in lg.seats.items():
            seats.setdefault(rank, seat)
    per_route: dict[tuple[int, int, str, str, str], int] = {}
    for a, b, _, _, via, side, host in sorted({c for lg in logs for c in lg.printed}):
        per_route[(a, b, via, side, host)] = per_route.get((a, b, via, side, host), 0) + 1
    routes = []
    for (a, b, via, side, host), n in sorted(per_route.items()):
        _, kind, flag = transport_of(via)
        routes.append(Route(a, b, via, kind, flag, side, host, n))  # type: ignore[arg-type]
    return {
        "seats": tuple(seats[r] for r in sorted(seats)),
        "routes": tuple(routes),
        "networks": dict(sorted({h: n for lg in logs for h, n in lg.networks.items()}.items())),
        "net_devices": tuple(dict.fromkeys(d for lg in logs for d in lg.net_devices.values())),
        "gdr_hcas": tuple(dict.fromkeys(x for lg in logs for x in lg.gdr_hcas.values())),
        "ib_absent": tuple(dict.fromkeys(h for lg in logs for h in lg.ib_absent)),
    }


def read_logs(directory: Path | str) -> NcclAccount | None:
    """Every ``*.log`` NCCL wrote in ``directory`` (bounded reads: a log can be huge)."""
    d = Path(directory)
    texts = []
    for p in sorted(d.glob("*.log")):
        texts.append(fileio.read_text(p, "NCCL log", max_bytes=MAX_LOG_BYTES))
    return account(texts)


def nvml_devices(texts: Iterable[str]) -> dict[int, int]:
    """rank -> NVML index, as NCCL reported each rank's device (``nvmlDev``)."""
    out: dict[int, int] = {}
    for t in texts:
        for rank, (_, nvml) in parse_log(t).devices.items():
            if nvml is not None:
                out[rank] = nvml
    return out
