"""NCCL's graph search judged against the hardware the evidence shows (TD984, TD985).

NCCL's INFO log states what NCCL itself expects of the host: the search's result for each pattern
(``Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX``: channels of one speed, in
GB/s per channel, over the worst path type inside the node and to the NIC), or that it found none (``Could
not find a path for pattern 1, falling back to simple order``: search.cc then builds one channel in rank
order at 0.1 GB/s over SYS, and since init.cc gives every collective min(tree, ring) channels, a tree that
fell back leaves the ring one channel too). The ring's channels times their speed is what NCCL fills of a
GPU's links; the topology's model (topology/busbw.py, through the ``Layout`` evidence_expect.py builds)
fills the same links with the same speeds, so the two are held against each other, with the path type
the links give (NVL where NVLink or NVSwitch joins every pair, the worst PCIe class of topo -m
otherwise). A search that found what the hardware allows is the evidence of a normal run (information).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from topodoctor.diagnosis.evidence_expect import NORMAL_SHARE, layout_of
from topodoctor.diagnosis.evidence_facts import Facts, path_class
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_seen import Quote, Searched
from topodoctor.diagnosis.perf_regressions import REGRESSIONS, regressions_of
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Severity
from topodoctor.model.nccl_account import NcclGraphSeen
from topodoctor.nccl import grammar as g
from topodoctor.nccl.choices import FALLBACK_GBPS, PATH_TYPES, PATTERNS
from topodoctor.topology.busbw import SPEEDS_OLDER, channel_fill, layout_bottleneck

RING = 4  # NCCL_TOPO_PATTERN_RING
# NCCL's path type for each of nvidia-smi's classes between two GPUs (paths.cc: a host bridge is PHB,
# within a socket or across; SYS crosses the sockets)
NCCL_TYPE_OF = {"NV": "NVL", "PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
# the settings that narrow the paths or NICs the search may use (paths.cc, search.cc), each with what it does
PATH_SETTINGS = {
    "NCCL_P2P_LEVEL": "limits the GPU-to-GPU paths P2P may take; beyond it the ring goes through the CPU",
    "NCCL_P2P_DISABLE": "takes P2P away: every GPU pair goes through the CPU",
    "NCCL_CROSS_NIC": "decides whether a ring may leave by one NIC and come back by another",
    "NCCL_PXN_DISABLE": "takes away PXN (reaching a NIC through a peer GPU over NVLink)",
    "NCCL_NET_GDR_LEVEL": "limits the GPU-NIC distance GPUDirect RDMA may span; beyond it through the CPU",
    "NCCL_TOPO_FILE": "replaces the topology NCCL detects with the file's",
    "NCCL_NET_MERGE_LEVEL": "merges NICs into fused devices the search places",
}
TOPO_DUMP = "NCCL_TOPO_DUMP_FILE=topo.xml (the topology NCCL saw)"
SearchFinding = tuple[str, Severity, str, str, dict[str, object]]  # (code, severity, subject, message, evidence)


@dataclass(frozen=True)
class Allowed:
    """What this hardware allows NCCL's ring inside one node: its channels' total, the path type, why."""

    ring_gbps: float | None  # None where the links are not known well enough to fill (a mesh, PCIe classes)
    type_intra: str  # NVL, PIX, PXB, PHB, SYS; "" where the evidence does not show it
    basis: str


def searched_of(ev: Evidence) -> Searched:
    """The search as the evidence shows it: the result lines as nccl/'s account read them, each pattern whose
    search found no path, the graph dumps, NCCL's paths between GPUs, and a device it could not place."""
    out: list[tuple[NcclGraphSeen, Quote]] = []

    def source(piece: int) -> str:
        return ev.pieces[piece].source if 0 <= piece < len(ev.pieces) else "the evidence"

    unplaced = next((ln for ln in ev.nccl_lines if g.NO_REAL_PATH.search(ln.text)), None)
    for acc, piece in zip(ev.nccl, ev.nccl_pieces, strict=False):
        lines = [ln for ln in ev.nccl_lines if ln.piece == piece]
        for gs in acc.searches:
            at = next((ln for ln in lines if (m := g.PATTERN.search(ln.text)) and _same(gs, m.groups())), None)
            out.append((gs, Quote(f"{source(piece)}:{at.line}" if at else source(piece), at.text if at else "")))
        for n in acc.search_failed:
            at = next((ln for ln in lines if (m := g.SEARCH_FAILED.search(ln.text)) and int(m.group(1)) == n), None)
            failed = NcclGraphSeen(piece, n, fallback=True)
            out.append((failed, Quote(f"{source(piece)}:{at.line}" if at else source(piece), at.text if at else "")))
    for d in ev.graphs:
        out.append((d, Quote(source(d.piece), f'<graph pattern="{d.pattern}" nchannels="{d.channels}" ...>')))
    return Searched(
        tuple(out),
        Quote(f"{source(unplaced.piece)}:{unplaced.line}", unplaced.text) if unplaced is not None else None,
        tuple(dict.fromkeys(p for acc in ev.nccl for p in acc.gpu_paths)),
        shared_pci_links(ev),
    )


SHARED = 0.85  # a link under this share of the nets below it cannot carry a ring per NIC


def shared_pci_links(ev: Evidence) -> tuple[tuple[str, float, tuple[tuple[str, float], ...], Quote], ...]:
    """The PCI links of NCCL's printed topology (topo.cc ncclTopoPrintRec: each node's links indented under it)
    with two nets or more below them, no GPU, and a rate under the nets' total: every GPU's traffic to those
    NICs crosses the link, and the search (paths.cc followPath) takes each ring's bandwidth off it."""
    found: dict[tuple[str, str], tuple[str, float, tuple[tuple[str, float], ...], Quote]] = {}

    def source(piece: int) -> str:
        return ev.pieces[piece].source if 0 <= piece < len(ev.pieces) else "the evidence"

    stacks: dict[str, list[tuple[int, str, str, float, list[tuple[str, float]], list[bool], Quote]]] = {}

    def close(who: str, down_to: int) -> None:
        stack = stacks.get(who, [])
        while stack and stack[-1][0] >= down_to:
            _, kind, node, bw, nets, gpu, q = stack.pop()
            total = sum(b for _, b in nets)
            if kind == "PCI" and len(nets) >= 2 and not gpu and bw < SHARED * total:
                found.setdefault((who.split(":")[0], node), (node, bw, tuple(nets), q))

    for ln in ev.nccl_lines:
        who = f"{ln.host}:{ln.piece}:{ln.device}"  # each process prints its own tree
        m = g.TOPO_LINK.search(ln.text)
        if m is None:
            close(who, -1)
            continue
        depth = len(m.group("indent"))
        close(who, depth)
        node = f"{m.group('node')}/{m.group('id')}"
        bw = float(m.group("bw"))
        for entry in stacks.get(who, []):
            if m.group("node") == "NET":
                entry[4].append((node, bw))
            elif m.group("node") == "GPU":
                entry[5].append(True)
        q = Quote(f"{source(ln.piece)}:{ln.line}", ln.text)
        stacks.setdefault(who, []).append((depth, m.group("type"), node, bw, [], [], q))
    for who in list(stacks):
        close(who, -1)
    return tuple(found.values())


def _same(gs: NcclGraphSeen, groups: tuple[str | None, ...]) -> bool:
    p, _, nch, bi, _, ti, _, _ = groups
    return (int(p or 0), int(nch or 0), float(bi or 0), ti) == (gs.pattern, gs.channels, gs.speed_intra_gbps,
                                                                  gs.type_intra)  # fmt: skip


def _per_node(f: Facts) -> int:
    if f.gpus_per_node:
        return f.gpus_per_node
    if f.nccl_ranks and f.nccl_nodes:
        return max(1, f.nccl_ranks // f.nccl_nodes)
    return 0


def allowed(f: Facts) -> Allowed | None:
    """The ring this hardware allows inside one node, from the topology's model; None where the evidence
    shows neither the GPUs' model nor their links."""
    per_node = _per_node(f)
    if per_node < 2:
        return None
    got = layout_of(f, per_node)
    if got is None:
        return _nccl_paths(f)
    lay, crosses = got
    classes = {path_class(lb) for lb in f.links.values()}
    if lay.nvlinks > 0 and not crosses:
        b = layout_bottleneck(lay)
        mesh = f.model is not None and f.model.fabric == "mesh"
        return Allowed(None if b is None or mesh else b.ring_gbps, "NVL", b.what if b else lay.what)
    if classes and "NV" not in classes:
        worst = max((NCCL_TYPE_OF.get(c, "SYS") for c in classes), key=lambda t: PATH_TYPES.get(t, 99))
        b = layout_bottleneck(lay)
        under_switch = worst in ("PIX", "PXB")  # PCIe within a switch: the GPU's own link bounds the ring
        ring = b.ring_gbps if b is not None and under_switch else None
        return Allowed(ring, worst, f"topo -m: {', '.join(sorted(classes))}" + (f"; {b.what}" if b and ring else ""))
    return _nccl_paths(f)


def _nccl_paths(f: Facts) -> Allowed | None:
    """Where the evidence shows neither the GPUs' model nor their links, on one node as NCCL counts them: its
    own paths between its GPUs (its GRAPH log). The search cannot beat them: the ring takes the worst path type
    among them, and its channels fill at least the slowest path (a floor: rings over a NVLink mesh take several)."""
    paths = f.searched.paths if f.searched is not None else ()
    if not paths or f.nccl_nodes != 1:  # NCCL's own count of nodes: a search across them is bound by the NICs
        return None
    worst = max((kind for kind, _ in paths), key=lambda t: PATH_TYPES.get(t, 99))
    slowest = min(bw for _, bw in paths)
    ring = min(channel_fill(slowest), channel_fill(slowest, SPEEDS_OLDER))
    return Allowed(ring, worst, f"NCCL's own paths between the GPUs: the slowest {slowest:g} GB/s, over {worst}")


def _one_node(f: Facts) -> bool:
    """Whether the run is of one node: NCCL's own count, else no network connection and one host named (a
    single node logs `Using network` too, so that line does not tell)."""
    if f.nccl_nodes is not None:
        return f.nccl_nodes == 1
    return not any(c.kind in ("net", "collnet") for c in f.conns) and len(f.hosts) <= 1


def _ring(found: list[tuple[NcclGraphSeen, Quote]]) -> tuple[NcclGraphSeen, Quote] | None:
    """The ring graph most lines show (every rank prints its communicator's), fallbacks apart."""
    rings = [(gs, q) for gs, q in found if gs.pattern == RING and not gs.fallback and gs.channels]
    if not rings:
        return None
    common = Counter((gs.channels, gs.speed_intra_gbps, gs.type_intra) for gs, _ in rings).most_common(1)[0][0]
    return next(r for r in rings if (r[0].channels, r[0].speed_intra_gbps, r[0].type_intra) == common)


def _candidates(
    f: Facts, failed: tuple[int, ...], unplaced: Quote | None = None
) -> tuple[list[tuple[str, str, bool]], list[str]]:
    """The causes the source gives for a search short of the hardware, each (what, what to post, shown
    by the evidence), the likeliest first; and the lines that show them. A release whose search is known
    to fail shows by its sign (the pattern that fell back): named where the log's version is in its range,
    first among the candidates where the log names no version."""
    shown: list[tuple[str, str, bool]] = []
    signed: list[tuple[str, str, bool]] = []
    lines: list[str] = []
    arch = f.model.arch if f.model is not None else ""
    nodes = f.nccl_nodes > 1 if f.nccl_nodes else None
    for r in REGRESSIONS:
        if not r.sign or not any(r.sign.endswith(f"pattern {n}") for n in failed):
            continue
        if (r.arch and arch and arch not in r.arch) or (r.multinode and nodes is False):
            continue
        span = ".".join(map(str, r.first)) + " - " + ".".join(map(str, r.last))
        if not f.nccl_version:
            what = f"if the job runs NCCL {span}: its known regression on {r.where} (unaffected: {r.unaffected})"
            signed.append((what, f"the NCCL version (NCCL_DEBUG=VERSION), then a run with {r.unaffected}", False))
        elif r in regressions_of(f.nccl_version, arch, nodes):
            release = f.nccl_version.split("+")[0]
            what = f"NCCL {release}'s known regression on {r.where} ({span}, unaffected: {r.unaffected})"
            shown.append((what, f"the same run with NCCL {r.unaffected} ({r.source})", True))
    for name, does in PATH_SETTINGS.items():
        if name in f.settings:
            value, quote = f.settings[name]
            shown.append((f"{name}={value} (set for the run: it {does})", f"the same run without {name}", True))
            lines.append(str(quote))
    if unplaced is not None:  # NCCL said it could not place a device: the topology it searched is incomplete
        what = "NCCL's topology detection could not place a device in its PCI tree (`Could not find real path`: a "
        what += "bus id the host or VM does not have, or /sys hidden), so the search ran on an incomplete topology"
        shown.append((what, TOPO_DUMP, True))
        lines.append(str(unplaced))
    rest = [
        ("the topology NCCL saw: a virtual machine's flat PCI tree, or GPUs or NICs it did not detect", TOPO_DUMP,
         False),
        ("NVLinks down or not seen by NCCL", "`nvidia-smi nvlink -s` and `nvidia-smi topo -m`", False),
    ]  # fmt: skip
    if not any(n in f.settings for n in PATH_SETTINGS):
        rest.append(("a variable limiting paths (NCCL_P2P_LEVEL, NCCL_CROSS_NIC, NCCL_PXN_DISABLE, "
                     "NCCL_NET_GDR_LEVEL) set where the log does not print it", "the job's NCCL_* environment",
                     False))  # fmt: skip
    return shown + signed + rest, lines


def _said(cands: list[tuple[str, str, bool]]) -> str:
    first = [c for c in cands if c[2]]
    if len(first) == 1:
        return f"; likely: {first[0][0]} (to confirm, post {first[0][1]})"
    ranked = first + [c for c in cands if not c[2]]
    return "; cannot tell among: " + "; ".join(f"{w} (post {p})" for w, p, _ in ranked)


def search_findings(f: Facts, normal: bool) -> list[SearchFinding]:
    """(code, severity, subject, message, evidence) for what NCCL's graph search found: TD985 where it found
    no path; TD984 where the ring is short of this hardware or takes a worse path type (a warning; information
    where a measured figure is ``normal`` all the same), or, as information, where it is what the hardware allows."""
    found = list(f.searched.graphs) if f.searched is not None else []
    unplaced = f.searched.unplaced if f.searched is not None else None
    out: list[SearchFinding] = []
    failed = tuple(dict.fromkeys(gs.pattern for gs, _ in found if gs.fallback and gs.pattern is not None))
    cands, lines = _candidates(f, failed, unplaced)
    if failed:
        names = ", ".join(f"{n} ({PATTERNS.get(n, '?')})" for n in failed)
        quote = next(q for gs, q in found if gs.fallback)
        msg = f"NCCL's graph search found no path for pattern {names} and fell back to its simple order: one "
        msg += f"channel at {FALLBACK_GBPS:g} GB/s over SYS"
        if any(n != RING for n in failed):
            msg += ", and since every collective gets the fewer of the tree's and the ring's channels, one channel "
            msg += "for all of them"
        if f.channels is not None:
            msg += f" (the log: {f.channels} coll channels)"
        msg += _said(cands)
        ev: dict[str, object] = {"patterns": list(failed), "coll_channels": f.channels, "lines": [str(quote), *lines],
              "candidates": [w for w, _, _ in cands], "post": [p for _, p, _ in cands][:2]}  # fmt: skip
        out.append(("TD985", "warning", "nccl-search", msg, ev))
    ring = _ring(found)
    hw = allowed(f)
    if ring is None:
        return out
    gs, quote = ring
    total = (gs.channels or 0) * (gs.speed_intra_gbps or 0.0)
    what = f"{gs.channels} channels x {gs.speed_intra_gbps:g} GB/s = {total:g} GB/s over {gs.type_intra}"
    if hw is None:
        if unplaced is not None and not failed:  # no expectation, but NCCL said its topology is incomplete
            msg = f"NCCL's ring search found {what} on a topology it could not read whole" + _said(cands)
            ev2: dict[str, object] = {"found_gbps": total, "channels": gs.channels, "lines": [str(quote), *lines],
                  "candidates": [w for w, _, _ in cands], "post": [p for _, p, _ in cands][:2]}  # fmt: skip
            out.append(("TD984", "warning", "nccl-search", msg, ev2))
        return out
    if not _one_node(f):  # across nodes the ring's channels are the NICs' to fill: only the path type inside is held
        hw = Allowed(None, hw.type_intra, hw.basis)
        if not hw.type_intra:
            return out
    short = hw.ring_gbps is not None and total < NORMAL_SHARE * hw.ring_gbps
    worse = bool(hw.type_intra) and PATH_TYPES.get(gs.type_intra, 99) > PATH_TYPES.get(hw.type_intra, 99)
    allows = (f"about {hw.ring_gbps:g} GB/s" if hw.ring_gbps is not None else "") + (
        f" over {hw.type_intra}" if hw.type_intra else ""
    )
    judged: dict[str, object] = {
        "found_gbps": total,
        "channels": gs.channels,
        "speed_gbps": gs.speed_intra_gbps,
        "type": gs.type_intra,
        "allowed_gbps": hw.ring_gbps,
        "allowed_type": hw.type_intra,
        "basis": hw.basis,
        "lines": [str(quote)],
    }
    if short or worse:
        msg = f"NCCL's ring search found {what}, where this hardware allows {allows.strip()} ({hw.basis})"
        sev: Severity = "info" if normal else "warning"
        if normal:
            msg += "; the run's figure is normal all the same"
        else:
            msg += _said(cands)
            judged |= {"candidates": [w for w, _, _ in cands], "post": [p for _, p, _ in cands][:2]}
        out.append(("TD984", sev, "nccl-search", msg, judged))
    elif not failed:
        msg = f"NCCL's ring search found {what}: what this hardware allows ({allows.strip()}; {hw.basis})"
        out.append(("TD984", "info", "nccl-search", msg, judged))
    return out


def search_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """A short collective's candidate from the search: a fallback, or a ring short of the hardware."""
    if sym is None or sym.kind != "collective":
        return
    for code, severity, _, msg, ev in search_findings(f, False):
        if severity == "warning":
            shown = ev.get("lines")
            lines = tuple(Quote(*str(x).split(": ", 1)) for x in shown) if isinstance(shown, list) else ()
            fix = f"Post {TOPO_DUMP} with the job's NCCL_* settings; with a setting or release named, change it."
            out.add(code, Candidate(msg.split("; ")[0], fix, {k: v for k, v in ev.items() if k != "lines"}), lines)
