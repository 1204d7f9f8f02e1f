"""NCCL's own account of a run, from its INFO log (``NCCL_DEBUG=INFO``, one file per rank
through ``NCCL_DEBUG_FILE``). No torch, no NCCL: text in, ``NcclAccount`` out.

Lines read (NCCL 2.18 - 2.28 wording)::

    NCCL INFO NCCL version 2.28.9+cuda13.0
    NCCL INFO ncclCommInitRankConfig comm 0x.. rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60 ...
    NCCL INFO comm 0x.. rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
    NCCL INFO Channel 00/24 : 0 1                                   (a ring, and the channel count)
    NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] ...
    NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, ...
    NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM             (connIndex 0: rings/trees, 1: p2p)
    NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
    NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0   (NET/IB/0/GDRDMA with GPUDirect RDMA)
    NCCL INFO ncclCommSplit comm 0x.. rank 0 nranks 2 ... parent 0x..  (a subgroup's communicator)
    NCCL INFO NCCL_P2P_DISABLE set by environment to 1
    NCCL INFO NVLS multicast support is not available on dev 0
    NCCL WARN ...
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from topodoctor.core import fileio
from topodoctor.model.collective_ops import SPECS
from topodoctor.model.collectives import Connection, NcclAccount, NcclChoice
from topodoctor.nccl.choices import Choices, parse_choices, predicted_busbw, traffic_bytes

MAX_LOG_BYTES = 16 << 20  # a TRACE log of a long run; INFO logs are tens of KB

_VERSION = re.compile(r"NCCL INFO NCCL version (\S+)")
_INIT = re.compile(r"ncclCommInit\w* comm (0x[0-9a-f]+) rank (\d+) nranks (\d+) cudaDev (-?\d+)(?: nvmlDev (-?\d+))?")
_COMM = re.compile(r"comm (0x[0-9a-f]+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)")
_RING = re.compile(r"NCCL INFO Channel (\d+)/(\d+) : ([\d ]+)$")
_CONN = re.compile(
    r"NCCL INFO Channel (\d+)(?:/(\d+))? : (\d+)\[[^\]]*\] -> (\d+)\[[^\]]*\](?: \[(send|receive)\])? via (\S.*)$"
)
_CHANNELS = re.compile(r"NCCL INFO (\d+) coll channels, .*?(\d+) nvls channels, (\d+) p2p channels")
_TREES = re.compile(r"NCCL INFO Trees (.*)$")
_ENV = re.compile(r"NCCL INFO (NCCL_\w+) set by environment to (.*?)\.?\s*$")
_NO_NVLS = re.compile(r"NVLS multicast support is not available")
_WARN = re.compile(r"NCCL WARN (.*)$")


def transport_of(via: str) -> tuple[str, str, bool]:
    """(label, kind, gdr) for the text after ``via``: P2P/CUMEM/read -> ("P2P/CUMEM", "p2p")."""
    parts = via.strip().split("/")
    head = parts[0].upper()
    gdr = "GDRDMA" in via.upper()
    if head == "P2P":
        return "/".join(parts[:2]), "p2p", False
    if head == "SHM":
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
    comms: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # ptr -> (rank, nranks, nnodes)
    devices: dict[int, tuple[int, int | None]] = field(default_factory=dict)  # rank -> (cudaDev, nvmlDev)
    ring_channels: int | None = None
    channels: int | None = None
    nvls_channels: int | None = None
    p2p_channels: int | None = None
    rings: list[str] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)
    conns: set[tuple[int, int, int, str, str]] = field(default_factory=set)  # (from, to, channel, connIndex, via)
    other_conns: int = 0  # connection lines of other communicators (subgroups), not counted
    env: dict[str, str] = field(default_factory=dict)
    no_nvls: bool = False
    warnings: list[str] = field(default_factory=list)
    choices: Choices | None = None  # rank 0 alone logs the cost table and per-call choices


def parse_log(text: str) -> _Log:
    """One rank's log. Connection lines name ranks of their communicator, not of the world, and
    do not say which communicator: each belongs to the last one set up before it in the log
    (a subgroup's ranks 0 and 1 may be the world's 0 and 2). Only the first, largest one (the
    world's) is counted; subgroups' connections are left out."""
    log = _Log()
    current: str | None = None
    world: tuple[str, int] | None = None  # (comm, nranks)
    for line in text.splitlines():
        if "NCCL" not in line:
            continue
        line = line.rstrip()
        if m := _CONN.search(line):
            if world is not None and current != world[0]:
                log.other_conns += 1
                continue
            # "a -> b" is the direction data flows, whichever side logged it ([send] or [receive])
            ch, idx, a, b, _, via = m.groups()
            log.conns.add((int(a), int(b), int(ch), idx or "-", via.strip()))
        elif m := _RING.search(line):
            log.ring_channels = int(m.group(2))
            ring = " ".join(m.group(3).split())
            if ring not in log.rings:
                log.rings.append(ring)
        elif m := _CHANNELS.search(line):
            log.channels, log.nvls_channels, log.p2p_channels = (int(g) for g in m.groups())
        elif m := _COMM.search(line):
            ptr, rank, nranks, nnodes, _ = m.groups()
            log.comms[ptr] = (int(rank), int(nranks), int(nnodes))
            current = ptr
            if world is None or int(nranks) > world[1]:
                world = (ptr, int(nranks))
        elif m := _INIT.search(line):
            _, rank, _, cuda, nvml = m.groups()
            log.devices[int(rank)] = (int(cuda), int(nvml) if nvml is not None else None)
        elif m := _TREES.search(line):
            for t in re.findall(r"\[\d+\] (\S+)", m.group(1)):
                if t not in log.trees:
                    log.trees.append(t)
        elif m := _ENV.search(line):
            log.env[m.group(1)] = m.group(2)
        elif m := _VERSION.search(line):
            log.version = m.group(1)
        elif _NO_NVLS.search(line):
            log.no_nvls = True
        elif m := _WARN.search(line):
            log.warnings.append(m.group(1).strip()[:200])
    if "Bytes -> Algo" in text or "Algorithm" in text:
        log.choices = parse_choices(text.splitlines())
    return log


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
    graphs = tuple(
        f"{g.pattern} {g.channels} ch x {g.bw_intra_gbps:g}/{g.bw_inter_gbps:g} GB/s {g.type_intra}/{g.type_inter}"
        for g in found.graphs
    )
    return tuple(sorted(out, key=lambda c: (c.op, c.size_bytes))), graphs[:8]


def account(texts: Iterable[str]) -> NcclAccount | None:
    """One account from every rank's log; None when no log says anything about NCCL."""
    logs = [parse_log(t) for t in texts]
    logs = [lg for lg in logs if lg.version or lg.comms or lg.conns]
    if not logs:
        return None
    comms = [c for lg in logs for c in lg.comms.values()]
    main = max(comms, key=lambda c: c[1]) if comms else None
    seen: set[tuple[int, int, int, str, str]] = set()
    conn_count: dict[tuple[int, int, str, str], int] = {}
    gdr: bool | None = None
    for lg in logs:
        for a, b, ch, idx, via in lg.conns:
            label, kind, g = transport_of(via)
            if (a, b, ch, idx, label) in seen:  # both ends of a network connection log it
                continue
            seen.add((a, b, ch, idx, label))
            conn_count[(a, b, label, kind)] = conn_count.get((a, b, label, kind), 0) + 1
            if kind in ("net", "collnet"):
                gdr = bool(gdr) or g
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
    )


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
