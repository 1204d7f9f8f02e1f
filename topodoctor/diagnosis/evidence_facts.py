"""The facts the causes weigh, in one shape whether they came from a user's evidence (``facts_of``) or
from topodoctor's own probe and run (``facts_of_run``): GPU pairs and their paths, NCCL's peer
connections, the settings, the network NCCL chose, the figures measured. Each fact keeps a ``Quote``
(input and line) so a finding can show where it stands."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from topodoctor.diagnosis.evidence_seen import Quote, Searched
from topodoctor.model.evidence import (
    SAID_SETTING,
    CollectiveRun,
    CopyMatrix,
    Evidence,
    GpuSeen,
    HorovodBuild,
    Launch,
    NcclLine,
    NcclSaid,
    NicSeen,
    OsuRun,
    PcieSeen,
    SweepPair,
)
from topodoctor.model.evidence_prose import ProseSaid
from topodoctor.model.nccl_account import NcclAccount
from topodoctor.nccl.lines import NetLine, net_line, peer_line
from topodoctor.topology.gpu_models import GpuModel, model_of

KINDS = {"P2P": "p2p", "SHM": "shm", "NET": "net"}  # a connection's transport by the head of NCCL's "via"


@dataclass(frozen=True)
class Conn:
    """A peer connection NCCL reported: both ranks, their GPUs where known, the transport."""

    ranks: tuple[int, int]
    kind: str  # p2p, shm, net, collnet, other
    transport: str  # P2P/CUMEM, SHM, NET/IB, NET/Socket
    channels: int = 1
    gpus: tuple[int, int] | None = None  # NVML index (or CUDA device) of each rank's GPU on one host
    devices: tuple[str, str] = ("", "")  # what NCCL printed in brackets: CUDA device, or bus id before 2.12
    same_node: bool | None = None
    host: str = ""  # the host that logged it
    gdr: bool = False
    side: str = ""  # send, receive, "" (P2P and SHM lines)
    quote: Quote | None = None


@dataclass(frozen=True)
class Measured:
    """One collective's figure at one size, as nccl-tests (or topodoctor) printed it."""

    op: str
    size_bytes: int
    busbw_gbps: float
    nranks: int | None
    nodes: int | None
    quote: Quote
    rank_hosts: tuple[str, ...] = ()  # the host of each rank, where the header listed them
    run_gpus: tuple[int, ...] = ()  # the GPUs of its first host by nvidia-smi's index, where the bus ids tell
    time_us: float | None = None  # nccl-tests' time column of the figure's side (out-of-place or in-place)


@dataclass(frozen=True)
class NetSeen:
    """A line about the network: which, with the host that logged it."""

    host: str
    line: NetLine
    quote: Quote


@dataclass(frozen=True)
class Facts:
    """Everything the causes weigh. Empty or None where the evidence did not show it."""

    names: tuple[str, ...] = ()  # GPU names as printed
    model: GpuModel | None = None
    hosts: tuple[str, ...] = ()
    gpus_per_node: int | None = None
    links: Mapping[tuple[int, int], str] = field(default_factory=dict)  # (a < b) -> NV18, PIX, SYS ...
    links_quote: Quote | None = None
    nic_paths: Mapping[tuple[int, str], str] = field(default_factory=dict)  # (GPU, NIC name) -> PIX, SYS ...
    peer_denied: frozenset[tuple[int, int]] = frozenset()  # (a < b) pairs shown without peer access
    peer_allowed: frozenset[tuple[int, int]] = frozenset()  # ... and with it (topo -p2p OK, CAN Access Peer)
    peer_said: Mapping[tuple[int, int], str] = field(default_factory=dict)  # a denied pair's answer: CNS, no
    cut: tuple[tuple[str, str], ...] = ()  # (kind, what was cut) of each piece read partly
    gpus: tuple[GpuSeen, ...] = ()
    pcie: tuple[PcieSeen, ...] = ()
    nics: tuple[NicSeen, ...] = ()
    settings: Mapping[str, tuple[str, Quote]] = field(default_factory=dict)
    conns: tuple[Conn, ...] = ()
    net: tuple[NetSeen, ...] = ()
    channels: int | None = None
    nvls_channels: int | None = None
    nccl_version: str = ""
    nccl_logged: bool = False  # an NCCL INFO log was among the inputs
    nccl_nodes: int | None = None  # the most nodes NCCL counted (nNodes)
    nccl_ranks: int | None = None  # the most ranks NCCL counted (nRanks)
    measured: tuple[Measured, ...] = ()
    averages: tuple[tuple[str, float, Quote], ...] = ()  # (op, busbw) of runs shown by their average line alone
    copies: tuple[CopyMatrix, ...] = ()
    launches: tuple[Launch, ...] = ()
    # each launch with the nccl-tests results of the runs after it in its input: (launch, [(op, avg, hosts, quote)])
    results: tuple[tuple[Launch, tuple[tuple[str, float | None, frozenset[str], Quote], ...]], ...] = ()
    sweeps: tuple[tuple[SweepPair, Quote], ...] = ()  # two-node sweeps' pairs, each with its line
    osu: tuple[OsuRun, ...] = ()  # the OSU bandwidth tests' runs
    horovod: tuple[HorovodBuild, ...] = ()  # Horovod's builds (`--check-build`)
    prose: tuple[ProseSaid, ...] = ()  # what the reporter's sentences claim (diagnosis/evidence_prose.py)
    said: tuple[NcclSaid, ...] = ()  # what they name by NCCL's and nvidia-smi's words (an algorithm, a release)
    searched: Searched | None = None  # what NCCL's log says of its graph search (evidence_search.py)
    where: Mapping[int, str] = field(default_factory=dict)  # piece -> "path:first-last"

    def link(self, a: int, b: int) -> str | None:
        """The path class between two GPUs as topo -m prints it, or None where not shown."""
        return self.links.get((min(a, b), max(a, b)))


def path_class(label: str) -> str:
    """NV18 -> NV; PIX, PXB, PHB, NODE, SYS (SOC on old drivers) as they are."""
    up = label.strip().upper()
    return "NV" if up.startswith("NV") else ("SYS" if up == "SOC" else up)


def where_of(ev: Evidence, piece: int, line: int | None = None) -> str:
    """Where a piece of the evidence stands, as a finding quotes it: ``path:line``, or ``path:first-last``."""
    if not 0 <= piece < len(ev.pieces):
        return "the evidence"
    p = ev.pieces[piece]
    if line is not None:
        return f"{p.source}:{line}"
    return f"{p.source}:{p.first_line}-{p.last_line}"


def _gpu_index(name: str) -> int | None:
    return int(name[3:]) if name.upper().startswith("GPU") and name[3:].isdigit() else None


def _cuda(name: str) -> int | None:
    """cuda0 -> 0: a device as a CUDA program (p2pBandwidthLatencyTest) names it."""
    return int(name[4:]) if name.lower().startswith("cuda") and name[4:].isdigit() else None


def _links(ev: Evidence) -> tuple[dict[tuple[int, int], str], dict[tuple[int, str], str], Quote | None]:
    links: dict[tuple[int, int], str] = {}
    nic_paths: dict[tuple[int, str], str] = {}
    quote = None
    alias = {n.alias: n.name for n in ev.nics if n.alias}
    first_host = ev.pairs[0].host if ev.pairs else ""
    for p in ev.pairs:
        if not p.link or p.link.strip().upper() == "X" or p.host != first_host:
            continue
        a, b = _gpu_index(p.a), _gpu_index(p.b)
        quote = quote or Quote(where_of(ev, p.piece), "nvidia-smi topo -m")
        if a is not None and b is not None:
            links[(min(a, b), max(a, b))] = p.link.strip()
        elif a is not None or b is not None:
            gpu, nic = (a, p.b) if a is not None else (b, p.a)
            assert gpu is not None
            nic_paths[(gpu, alias.get(nic, nic))] = p.link.strip()
    return links, nic_paths, quote


def _settings(ev: Evidence) -> dict[str, tuple[str, Quote]]:
    out: dict[str, tuple[str, Quote]] = {}
    for acc in ev.nccl:
        for k, v in acc.env.items():
            out.setdefault(k, (v, Quote("NCCL's log", f"{k} set by environment to {v}")))
    for s in ev.settings:
        if (
            not s.how.startswith(SAID_SETTING) or s.name not in out
        ):  # a tool's output showing it stands over the reporter's word
            out[s.name] = (s.value, Quote(where_of(ev, s.piece), f"{s.how or 'set'} {s.name}={s.value}".strip()))
    for line in ev.nccl_lines:  # NCCL's own word on what it read wins: it names the line
        if " set by environment to " in line.text and (name := line.text.split(" INFO ", 1)[-1].split(" ")[0]):
            value = line.text.split(" set by environment to ", 1)[1].strip().rstrip(".")
            out[name] = (value, Quote(where_of(ev, line.piece, line.line), line.text))
    return out


def _rank_hosts(ev: Evidence, lines: Iterable[NcclLine]) -> dict[int, str]:
    hosts: dict[int, str] = {}
    for run in ev.collectives:
        for r in run.ranks:
            hosts.setdefault(r.rank, r.node or r.host)
    for ln in lines:
        pl = peer_line(ln.text)
        if pl is not None and ln.host:
            hosts.setdefault(pl.peer if pl.side == "receive" else pl.rank, ln.host)
    return hosts


def _conns(ev: Evidence) -> tuple[Conn, ...]:
    hosts = _rank_hosts(ev, ev.nccl_lines)
    out: list[Conn] = []
    for ln in ev.nccl_lines:
        pl = peer_line(ln.text)
        if pl is None:
            continue
        head = pl.via.split("/")[0].upper()
        kind = KINDS.get(head, "collnet" if head.startswith("COLLNET") else "other")
        transport = "/".join(pl.via.split("/")[:2]) if kind in ("p2p", "net") else head
        ha, hb = hosts.get(pl.rank), hosts.get(pl.peer)
        same = (ha == hb) if ha and hb else (True if kind in ("p2p", "shm") else None)
        devs = (pl.rank_dev, pl.peer_dev)
        gpus = (int(devs[0]), int(devs[1])) if all(d.isdigit() and len(d) <= 2 for d in devs) else None
        out.append(
            Conn(
                (pl.rank, pl.peer),
                kind,
                transport,
                1,
                gpus,
                devs,
                same,
                ln.host,
                "GDRDMA" in pl.via.upper(),
                pl.side,
                Quote(where_of(ev, ln.piece, ln.line), ln.text),
            )
        )
    if out:
        return tuple(out)
    for acc, piece in zip(ev.nccl, ev.nccl_pieces or range(len(ev.nccl))):
        out += _account_conns(acc, hosts, Quote(where_of(ev, piece), "NCCL's channel connections"))
    return tuple(out)


def _account_conns(acc: NcclAccount, hosts: Mapping[int, str], quote: Quote) -> list[Conn]:
    one_node = acc.nodes == 1
    out = []
    for c in acc.connections:
        ha, hb = hosts.get(c.rank), hosts.get(c.peer)
        same = True if one_node else ((ha == hb) if ha and hb else None)
        out.append(Conn((c.rank, c.peer), c.kind, c.transport, c.channels, None, ("", ""), same, "", False, "", quote))
    return out


def bus_key(bus_id: str) -> tuple[int, int] | None:
    """(bus, device) of a PCI address as printed: 00000000:18:00.0, [0000:18:00], [0x18] (device 0)."""
    text = bus_id.strip().strip("[]").lower()
    try:
        if text.startswith("0x"):
            return int(text, 16), 0
        parts = text.split(".")[0].split(":")
        return (int(parts[-2], 16), int(parts[-1], 16)) if len(parts) >= 3 else None
    except ValueError:
        return None


def _run_gpus(ev: Evidence, run: CollectiveRun) -> tuple[int, ...]:
    """The run's GPUs of its first host as nvidia-smi numbers them (a run under CUDA_VISIBLE_DEVICES=0,1,4,6
    is GPUs 0, 1, 4, 6 of topo -m), by bus id; empty where the evidence cannot tell."""
    first = run.ranks[0].host if run.ranks else ""
    index = {k: g.index for g in ev.gpus if (k := bus_key(g.bus_id)) is not None}
    keys = [bus_key(r.bus_id or "") for r in run.ranks if r.host == first]
    got = [index.get(k) for k in keys if k is not None]
    if not got or len(got) != len(keys) or None in got or len(set(got)) != len(got):
        return ()
    return tuple(sorted(g for g in got if g is not None))


def _measured(ev: Evidence) -> tuple[Measured, ...]:
    out = []
    for run in ev.collectives:
        hosts = tuple(r.host for r in sorted(run.ranks, key=lambda r: r.rank))
        gpus = _run_gpus(ev, run)
        for row in run.rows:
            best = row.best
            if best is None:
                continue
            q = Quote(where_of(ev, run.piece), f"{row.op} at {row.size_bytes} B: busbw {best.busbw_gbps:g} GB/s")
            out.append(Measured(row.op, row.size_bytes, best.busbw_gbps, run.nranks, run.nodes, q, hosts, gpus,
                                best.time_us))  # fmt: skip
    return tuple(out)


def _results(ev: Evidence) -> tuple[tuple[Launch, tuple[tuple[str, float | None, frozenset[str], Quote], ...]], ...]:
    """Each launch with the nccl-tests runs that follow it in its input, before the next launch there."""

    def at(piece: int) -> tuple[str, int]:
        p = ev.pieces[piece] if 0 <= piece < len(ev.pieces) else None
        return (p.source, p.first_line) if p else ("", 0)

    out = []
    for ln in ev.launches:
        source, first = at(ln.piece)
        later = [at(x.piece)[1] for x in ev.launches if x is not ln and at(x.piece)[0] == source]
        end = min((x for x in later if x > first), default=None)
        runs = tuple(
            (r.op, r.avg_busbw_gbps, frozenset(k.host for k in r.ranks if k.host), Quote(where_of(ev, r.piece)))
            for r in ev.collectives
            if at(r.piece)[0] == source and at(r.piece)[1] >= first and (end is None or at(r.piece)[1] < end)
        )
        out.append((ln, runs))
    return tuple(out)


def facts_of(ev: Evidence) -> Facts:
    """The facts a user's evidence shows."""
    ranked = [r.device_name for c in ev.collectives for r in c.ranks if r.device_name]
    names = tuple(dict.fromkeys([g.name for g in ev.gpus if g.name] + ranked))
    model = next((m for n in names if (m := model_of(n)) is not None), None)
    hosts = tuple(dict.fromkeys(r.host for run in ev.collectives for r in run.ranks if r.host))
    per_node: int | None = None
    if ev.collectives and ev.collectives[0].ranks:
        run = ev.collectives[0]
        per_node = max(sum(1 for r in run.ranks if r.host == h) for h in {r.host for r in run.ranks})
    elif ev.gpus:
        per_node = len({g.index for g in ev.gpus if g.host == ev.gpus[0].host})
    links, nic_paths, links_quote = _links(ev)
    denied, allowed = set(), set()
    words: dict[tuple[int, int], str] = {}
    for p in ev.pairs:
        a, b = (
            _gpu_index(p.a) if p.a.upper().startswith("GPU") else _cuda(p.a),
            (_gpu_index(p.b) if p.b.upper().startswith("GPU") else _cuda(p.b)),
        )
        said = [v.strip().upper() for k, v in p.p2p.items() if k in ("r", "w", "can-access-peer")]
        if a is not None and b is not None and a != b and any(v not in ("OK", "YES") for v in said):
            denied.add((min(a, b), max(a, b)))
            words.setdefault((min(a, b), max(a, b)), next(v for v in said if v not in ("OK", "YES")))
        elif a is not None and b is not None and a != b and said:
            allowed.add((min(a, b), max(a, b)))
    accounts = ev.nccl
    net = tuple(
        NetSeen(ln.host, meaning, Quote(where_of(ev, ln.piece, ln.line), ln.text))
        for ln in ev.nccl_lines
        if (meaning := net_line(ln.text)) is not None
    )
    version = next((v for v in [a.version for a in accounts] + [r.nccl_version for r in ev.collectives] if v),
                   ev.nccl_version)  # fmt: skip
    return Facts(
        names=names,
        model=model,
        hosts=hosts,
        gpus_per_node=per_node,
        links=links,
        links_quote=links_quote,
        nic_paths=nic_paths,
        peer_denied=frozenset(denied),
        peer_allowed=frozenset(allowed),
        peer_said=words,
        cut=tuple((p.kind, p.cut) for p in ev.pieces if p.cut),
        gpus=ev.gpus,
        pcie=ev.pcie,
        nics=ev.nics,
        settings=_settings(ev),
        conns=_conns(ev),
        net=net,
        channels=next((a.channels for a in accounts if a.channels is not None), None),
        nvls_channels=next((a.nvls_channels for a in accounts if a.nvls_channels is not None), None),
        nccl_version=version,
        nccl_logged=bool(accounts or ev.nccl_lines),
        nccl_nodes=max((a.nodes for a in accounts if a.nodes), default=None),
        nccl_ranks=max((a.ranks for a in accounts if a.ranks), default=None),
        measured=_measured(ev),
        averages=tuple(
            (r.op, r.avg_busbw_gbps, Quote(where_of(ev, r.piece), f"Avg bus bandwidth {r.avg_busbw_gbps:g}"))
            for r in ev.collectives
            if r.avg_busbw_gbps is not None and not r.rows
        ),
        copies=ev.copies,
        launches=ev.launches,
        results=_results(ev),
        sweeps=tuple(
            (p, Quote(where_of(ev, p.piece, p.line or None), f"{p.a},{p.b} {p.busbw_gbps:g}")) for p in ev.sweeps
        ),
        osu=ev.osu,
        horovod=ev.horovod,
        where={i: where_of(ev, i) for i in range(len(ev.pieces))},
        prose=ev.prose,
        said=ev.nccl_said,
    )


P2P_SHOWN = 1.2  # peer copies this far above the staged ones: P2P works here


def no_peer_access(f: Facts) -> bool:
    """Whether the GPUs have no peer access: a model without it (GeForce), unless the evidence shows
    it working (a patched driver: cudaDeviceCanAccessPeer yes, peer copies well above staged ones)."""
    m = f.model
    if m is None or m.p2p_pcie:
        return False
    if f.peer_allowed or any(path_class(lb) == "NV" for lb in f.links.values()):  # a bridge carries P2P (3090)
        return False
    if any(c.kind == "p2p" for c in f.conns) or any("p2p-on" in p.checked for p in f.prose):
        return False  # NCCL's own `via P2P` lines, or the reporter's word that peer access works (a patched driver)
    on = [c for c in f.copies if c.p2p is True and c.unit == "GB/s"]
    off = [c for c in f.copies if c.p2p is False and c.unit == "GB/s"]

    def off_diagonal(cs: list[CopyMatrix]) -> list[float]:
        return [v for c in cs for i, row in enumerate(c.values) for j, v in enumerate(row) if i != j and v]

    a, b = off_diagonal(on), off_diagonal(off)
    return not (a and b and min(a) >= P2P_SHOWN * max(b))
