"""NICs that NCCL's topology puts behind one PCI link, so its search builds fewer rings than NICs (TD993).

NCCL rates each PCI link at width x lane rate / 80 GB/s (topo.cc ncclTopoAddPci: Gen4 x16 is 24 GB/s) and
each NIC at its speed (an HDR port 25 GB/s). The ring search (search.cc ncclTopoCompute, ncclTopoSearchRec)
takes each channel's bandwidth off every link of its path (paths.cc followPath), so NICs whose nets sit under
one `<pci>` element of the dump share that link: two HDR ports behind one Gen4 x16 link fit one 24 GB/s ring
where two links would fit two, and the log's graph line says so (``Pattern 4, crossNic 0, nChannels 1, bw
24.000000/24.000000``). One dual-port card has one link for its two ports by its build, so the same dump is
the hardware's own limit there; two cards the detection merged, or placed under one link they do not share
(a PCIe switch NCCL could not read, a VM's flat tree), are NCCL's view only, and NCCL_TOPO_FILE with the
host's real tree (each NIC on its own link under the switch) gives the search its rings back.
"""

from __future__ import annotations

from collections import defaultdict

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_search import TOPO_DUMP
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.evidence import NicSeen

SHARED = 0.85  # a link under this share of its nets' total cannot carry a ring per NIC
RING = 4  # NCCL_TOPO_PATTERN_RING
POST = (
    f"{TOPO_DUMP}, NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH (its `Pattern 4, ... nChannels` lines) and `lspci -tv`"
)
FIX = (
    "Where each NIC has its own link (two cards under a PCIe switch), give NCCL the host's real topology: write the "
    "dump NCCL_TOPO_DUMP_FILE gives, put each NIC's pci element under the switch with its own link_width and "
    "link_speed, and set NCCL_TOPO_FILE to it; one dual-port card shares its one link by design (then the link is "
    "the limit)."
)


def _shared(f: Facts) -> list[tuple[str, float, list[NicSeen]]]:
    """(busid, link GB/s, nets) of each PCI link of NCCL's dump that carries several NICs' nets, under their total."""
    under: dict[str, list[NicSeen]] = defaultdict(list)
    for n in f.nics:
        if n.pci_busid and n.pci_link_gbps:
            under[n.pci_busid].append(n)
    out = []
    for busid, nets in under.items():
        total = sum((n.rate_gbps or 0.0) / 8 for n in nets)
        link = nets[0].pci_link_gbps or 0.0
        if len(nets) >= 2 and link < SHARED * total:
            out.append((busid, link, nets))
    return out


def _rings(f: Facts) -> tuple[int, float, Quote] | None:
    """The channels and speed of the ring NCCL's log shows across nodes, with its line."""
    graphs = list(f.searched.graphs) if f.searched is not None else []
    rings = [(gs, q) for gs, q in graphs if gs.pattern == RING and not gs.fallback and gs.channels]
    if not rings or not (f.nccl_nodes or 0) > 1:
        return None
    gs, q = min(rings, key=lambda r: r[0].channels or 0)
    return gs.channels or 0, gs.speed_inter_gbps or gs.speed_intra_gbps or 0.0, q


def nic_link_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """TD993 from NCCL's topology dump (NICs under one PCI link), with the log's ring line beside it where
    shown, or from the reporter's words (NCCL used fewer of the NICs they name than there are)."""
    if sym is not None and sym.nodes < 2:
        return
    shared = _shared(f)
    rings = _rings(f)
    logged = f.searched.pci_shared if f.searched is not None else ()
    if not shared and logged:
        node, link, under, line = logged[0]
        names = ", ".join(n for n, _ in under)
        total = sum(b for _, b in under)
        what = f"NCCL's topology (its log) puts {names} behind one PCI link ({node}, {link:g} GB/s) that no GPU sits "
        what += f"under, where the NICs give {total:g} GB/s: every ring to them crosses that link, so the search fits "
        what += "fewer rings than NICs"
        if rings is not None:
            what += f" (the log: {rings[0]} ring channel{'s' if rings[0] != 1 else ''} at {rings[1]:g} GB/s)"
        exp = sym.expected_gbps * link / total if sym is not None and total else None
        lines = (line,) + ((rings[2],) if rings is not None else ())
        ev = {"node": node, "link_gbps": link, "nets": [n for n, _ in under], "post": POST}
        out.add("TD993", Candidate(what, FIX, ev, exp), lines, "nccl-topology", "warning")
        return
    if shared:
        busid, link, nets = shared[0]
        names = ", ".join(n.name for n in nets)
        total = sum((n.rate_gbps or 0.0) / 8 for n in nets)
        what = f"NCCL's topology puts {names} behind one PCI link ({busid}, {link:g} GB/s as NCCL rates it) where "
        what += f"the NICs give {total:g} GB/s: its search fits fewer rings through the link than there are NICs"
        if rings is not None:
            what += f" (the log: {rings[0]} ring channel{'s' if rings[0] != 1 else ''} at {rings[1]:g} GB/s)"
        exp = sym.expected_gbps * link / total if sym is not None and total else None
        q: tuple[Quote, ...] = (
            Quote(f.where.get(nets[0].piece, "NCCL's topology dump"), f'<pci busid="{busid}"> with {names}'),
        )
        q += (rings[2],) if rings is not None else ()
        ev = {"busid": busid, "link_gbps": link, "nics": [n.name for n in nets], "post": POST}
        out.add("TD993", Candidate(what, FIX, ev, exp), q, "nccl-topology", "warning")
        return
    said = next((s for s in f.said if s.nics_used is not None and len(s.nics_named) > s.nics_used), None)
    if said is None:
        return
    switch = any(s.pcie_switch for s in f.said)
    what = f"the reporter says NCCL used {said.nics_used} of the NICs {'/'.join(said.nics_named)}"
    what += " beside GPUs under one PCIe switch" if switch else ""
    what += " (from the reporter's words): likely NCCL's topology detection putting the NICs behind one PCI link, "
    what += "so its search builds fewer rings (channels) than NICs; else NCCL_IB_HCA or a port down (`ibstat`)"
    q = (Quote(f.where.get(said.piece, "the reporter's words"), said.text),)
    ev = {"nics": list(said.nics_named), "used": said.nics_used, "post": POST, "from": "the reporter's words"}
    out.add("TD993", Candidate(what, FIX, ev, None, direct=False), q, "nccl-topology", "warning")
