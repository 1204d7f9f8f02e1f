"""The causes inside one node that a user's evidence can show: P2P turned off or limited, a transport
fallback, containers that split the GPUs, GPUs without peer access, a flat topology in a VM, pairs
across sockets, NVLinks missing against the model, a PCIe link downtrained, ACS / IOMMU redirecting
peer traffic. Each adds leads (with what it would leave of the expectation) or says what it ruled out."""

from __future__ import annotations

import re

from topodoctor.core.text import plural
from topodoctor.diagnosis.evidence_decide import LSPCI
from topodoctor.diagnosis.evidence_facts import Facts, bus_key, no_peer_access, path_class
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.evidence_sockets import setting_value
from topodoctor.diagnosis.fallback import P2P_BY_DEFAULT, fallbacks
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.evidence import CopyMatrix, PcieSeen
from topodoctor.topology.busbw import NCCL_PCI_LANE
from topodoctor.topology.graph import pcie_gen_of

# NCCL_P2P_LEVEL's words, nearest first (paths.cc): P2P runs where the pair's path is at or under it.
P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
_CLASS_LEVEL = {"NV": "NVL", "PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
FLAT_PAIRS = 6  # the pairs of four GPUs
STAGED_BEATS_P2P = 0.9  # P2P under 0.9 of the staged copy of the same pair: peer traffic is redirected


def shm_gbps(f: Facts) -> float | None:
    """What NCCL's SHM transport leaves: traffic staged through host memory crosses each GPU's PCIe
    link, at most that link as NCCL rates it (Gen5 x16: 48 GB/s; measured 24-27 on H100 and H200)."""
    g = next((x for x in f.gpus if (x.pcie_gen_max or x.pcie_gen) and x.pcie_width), None)
    gen = (g.pcie_gen_max or g.pcie_gen) if g is not None else (f.model.pcie_gen if f.model else None)
    width = g.pcie_width if g is not None else (f.model.pcie_width if f.model else None)
    if gen not in NCCL_PCI_LANE or not width:
        return None
    return width * NCCL_PCI_LANE[gen] / 80.0


def _level_limits(value: str, cls: str) -> bool:
    """Whether NCCL_P2P_LEVEL=value keeps P2P off a pair of path class ``cls``."""
    v = value.strip().upper()
    if v.isdigit():  # the old numeric form: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4-5 SYS (paths.cc levelsOldToNew)
        v = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")[min(int(v), 5)]
    if v not in P2P_LEVELS:
        return False
    return P2P_LEVELS.index(v) < P2P_LEVELS.index(_CLASS_LEVEL.get(cls, "SYS"))


def _p2p_settings(f: Facts, cls: str | None) -> list[tuple[str, str, Quote]]:
    out = []
    if (d := f.settings.get("NCCL_P2P_DISABLE")) is not None and d[0].strip() not in ("", "0"):
        out.append(("NCCL_P2P_DISABLE", d[0], d[1]))
    if (lv := f.settings.get("NCCL_P2P_LEVEL")) is not None and _level_limits(lv[0], cls or "NV"):
        out.append(("NCCL_P2P_LEVEL", lv[0], lv[1]))
    return out


def _split_devices(f: Facts) -> list[Quote]:
    """Connections between two ranks of one host that both run on CUDA device N: each rank sees only its
    own GPU (one container per GPU, or CUDA_VISIBLE_DEVICES per rank)."""
    out = []
    for c in f.conns:
        # equal CUDA devices (not bus ids: one bus id twice is one GPU shared, not a split)
        split = c.gpus is not None and c.gpus[0] == c.gpus[1] and c.ranks[0] != c.ranks[1]
        if split and c.same_node is True and c.kind in ("shm", "net") and c.quote is not None:
            out.append(c.quote)
    return out


def fallback_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """SHM or NET where P2P should run: a variable (TD023), split containers (TD034), or none seen (TD024)."""
    shm = shm_gbps(f)
    pairs = fallbacks(f, P2P_BY_DEFAULT)
    split = _split_devices(f)
    cls = next((path_class(lb) for lb in f.links.values()), None)
    variables = _p2p_settings(f, cls)
    one_node = sym is None or sym.nodes == 1
    if split and one_node:
        dev = next((c.gpus[0] for c in f.conns if c.gpus and c.gpus[0] == c.gpus[1]), 0)
        what = f"each rank sees one GPU (both ends on CUDA device {dev}): "
        what += "NCCL joins them through " + ("SHM" if "SHM" in split[0].text else "the network")
        out.add(
            "TD034",
            Candidate(
                what,
                "Run one container per node with every GPU, or share IPC and PID namespaces (--ipc=host --pid=host).",
                {"shm_gbps": shm},
                shm,
            ),
            tuple(split[:2]),
        )
    if variables and (pairs or (one_node and not any(c.kind == "p2p" for c in f.conns))):
        name, value, quote = variables[0]
        shm_off = setting_value(f, "NCCL_SHM_DISABLE") not in (None, "", "0")  # SHM off too: the NIC carries it
        via = "SHM" if not pairs or any("SHM" in t for fb in pairs for t in fb.by) else "the network"
        via = "the network (NCCL_SHM_DISABLE is set too)" if shm_off else via
        what = f"{name}={value} sends this node's traffic through {via}"
        lines = (quote,) + (pairs[0].quotes[:1] if pairs else ())
        fix = f"Unset {name}{' and NCCL_SHM_DISABLE' if shm_off else ''}: NCCL then uses P2P over the pair's path."
        out.add("TD023", Candidate(what, fix, {"variable": name, "value": value, "shm_gbps": shm}, shm), lines)
        return
    if pairs and not split:
        fb = pairs[0]
        how = ", ".join(f"{plural(n, 'channel connection')} via {t}" for t, n in sorted(fb.by.items()))
        hostid = f.settings.get("NCCL_HOSTID")
        what = f"ranks {fb.ranks[0]} and {fb.ranks[1]} on GPUs joined by {fb.path}: {how}"
        what += f" (NCCL_HOSTID={hostid[0]} tells them apart)" if hostid else ""
        fix = "Give the ranks each other's memory: one container, or --ipc=host; check `nvidia-smi topo -p2p r`."
        out.add("TD024", Candidate(what, fix, {"pairs": len(pairs), "shm_gbps": shm}, shm), fb.quotes)
        return
    if f.conns and one_node and not any(c.kind in ("shm", "net") and c.same_node for c in f.conns):
        out.rule_out("transports: every channel connection of the node via P2P")
    elif not f.conns and one_node and sym is not None and sym.kind == "collective":
        out.ask("NCCL_DEBUG=INFO output of the run (its `via P2P` / `via SHM` lines say which transport ran)")


def gpu_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """GPUs without peer access (TD033), NVLinks missing against the model (TD031), PCIe downtrained (TD030)."""
    m = f.model
    ref = sym.expected_gbps if sym is not None else None
    if m is not None and no_peer_access(f) and len(f.names) >= 1:
        what = f"{m.name} has no peer-to-peer access (the GeForce driver allows none over PCIe)"
        out.add(
            "TD033",
            Candidate(
                what,
                "None in software: use GPUs with peer access for collectives.",
                {"model": m.name, "source": m.source},
                shm_gbps(f),
            ),
        )
    if m is not None and m.nvlink_links:
        short = [(a, b, lb) for (a, b), lb in f.links.items() if path_class(lb) == "NV"]
        # a board that joins its GPUs directly (HGX A100 4-GPU: NV4 to each of three peers) spends all its links
        # across its peers: a pair under the model's count is thin only where its GPUs' links do not add up
        spent: dict[int, int] = {}
        for a, b, lb in short:
            for end in (a, b):
                spent[end] = spent.get(end, 0) + (int(lb[2:]) if lb[2:].isdigit() else 0)
        thin = [(a, b, lb) for a, b, lb in short if lb[2:].isdigit() and int(lb[2:]) < m.nvlink_links
                and not spent.get(a) == spent.get(b) == m.nvlink_links]  # fmt: skip
        if thin and m.fabric == "nvswitch":
            a, b, lb = min(thin, key=lambda t: int(t[2][2:]))
            share = int(lb[2:]) / m.nvlink_links
            what = f"GPU{a}-GPU{b} joined by {lb} where {m.name} has {m.nvlink_links} NVLinks"
            q = (f.links_quote,) if f.links_quote else ()
            out.add(
                "TD031",
                Candidate(
                    what,
                    "Check `nvidia-smi nvlink -s` and the fabric manager.",
                    {"links": lb, "model_links": m.nvlink_links},
                    ref * share if ref else None,
                ),
                q,
            )
        for g in f.gpus:
            # against the links the model has by design (H100 PCIe / NVL: 12 of the 18 nvidia-smi lists)
            # nvidia-smi lists a link that is down as inactive: fewer listed than up-and-down means a cut paste
            listed = g.nvlinks_listed
            if g.nvlinks_up is not None and listed is not None and 0 <= g.nvlinks_up < min(listed, m.nvlink_links):
                total = m.nvlink_links
                down = total - g.nvlinks_up
                what = f"GPU{g.index}: {g.nvlinks_up} of {total} NVLinks up, {plural(down, 'NVLink')} down or inactive "
                what += f"against the {total} a {m.name} has"
                exp = ref * g.nvlinks_up / total if ref and m.fabric == "nvswitch" else None
                out.add(
                    "TD031",
                    Candidate(
                        what,
                        "Check `nvidia-smi nvlink -s` / `-e` on the host.",
                        {"gpu": g.index, "up": g.nvlinks_up, "links": total},
                        exp,
                    ),
                    (Quote(f.where.get(g.piece, "the evidence"), "nvidia-smi"),),
                    f"GPU{g.index}",
                )
        if not thin and short:
            out.rule_out(f"NVLinks: {short[0][2]} as {m.name} has them")
    for g in f.gpus:
        if g.pcie_width and g.pcie_width_max and g.pcie_width < g.pcie_width_max:
            what = f"GPU{g.index}'s PCIe link at x{g.pcie_width} of x{g.pcie_width_max}"
            nv = any(path_class(lb) == "NV" for lb in f.links.values())
            exp = ref * g.pcie_width / g.pcie_width_max if ref and not nv else None
            out.add(
                "TD030",
                Candidate(
                    what,
                    "Reseat the card or riser; check the slot's BIOS setting.",
                    {"gpu": g.index, "width": g.pcie_width, "width_max": g.pcie_width_max},
                    exp,
                ),
                (Quote(f.where.get(g.piece, "the evidence"), "nvidia-smi -q"),),
                f"GPU{g.index}",
            )
    if sym is not None and not any(g.pcie_width for g in f.gpus) and not f.pcie:
        out.ask(
            "`nvidia-smi -q` (each GPU's PCIe link: generation and width, current and max) or `lspci -vvv` (LnkSta)"
        )
    for p in f.pcie:
        if p.limited_at or p.available_gbit_s is not None:
            if p.downgraded:
                _kernel_limit(f, p, out)
        elif p.link_sta and p.link_cap and (p.downgraded or p.link_sta[1] < p.link_cap[1]):
            what = f"{p.bdf} ({p.description or 'PCIe device'}) trained x{p.link_sta[1]} {p.link_sta[0]:g} GT/s of "
            what += f"x{p.link_cap[1]} {p.link_cap[0]:g} GT/s"
            fix = "Reseat the card or riser; check the slot's BIOS setting."
            idle = p.link_sta[1] >= p.link_cap[1] and _NOT_GPU.search(p.description or "") is None
            if idle:  # a GPU lowers its link's generation when idle (power saving): the width is the fault's sign
                what += ": only the speed is lower, as an idle GPU's link is; cannot tell without a reading under load"
                fix = _UNDER_LOAD
                out.ask(_UNDER_LOAD)
            out.add(
                "TD030",
                Candidate(what, fix, {"bdf": p.bdf}, None),
                (Quote(f.where.get(p.piece, "lspci"), "LnkSta"),),
                p.bdf,
                "info" if idle else None,
            )


# functions lspci names that are no GPU (a GPU's, or an unnamed function's, link speed at idle is no sign of a fault)
_NOT_GPU = re.compile(r"Ethernet|Infiniband|Network controller|Mellanox|bridge|Non-Volatile|NVMe|RAID|SATA", re.I)
_UNDER_LOAD = (
    "Read the link again under load: `nvidia-smi -q -d PCI` (Link Generation Current) or `lspci -vvv` (LnkSta) while a "
    "copy runs (nvbandwidth or p2pBandwidthLatencyTest); the link speed at full load decides"
)


def _link(link: tuple[float, int] | None) -> str:
    if link is None:
        return "a link of unknown speed"
    gen = pcie_gen_of(f"{link[0]} GT/s")
    return f"{link[0]:.1f} GT/s" + (f" (Gen{gen})" if gen else "") + f" x{link[1]}"


def _kernel_limit(f: Facts, p: PcieSeen, out: Leads) -> None:
    """The kernel's word that a function gets less PCIe bandwidth than it can use, and where the limit is:
    its own link (trained down) or a port above it (a slower switch or slot, or that link trained down)."""
    key = bus_key(p.bdf)
    gpu = next((g for g in f.gpus if key is not None and bus_key(g.bus_id) == key), None)
    who = f"GPU{gpu.index} ({p.bdf})" if gpu is not None else p.bdf
    own = not p.limited_at or bus_key(p.limited_at) == key
    where = "" if own else f"the {_link(p.link_sta)} link at {p.limited_at} above it"
    where = f"its own link at {_link(p.link_sta)}" if own else where
    what = f"{who}: {p.available_gbit_s:g} Gb/s available PCIe bandwidth, limited by {where} "
    what += f"(the kernel's report), of the {p.capable_gbit_s:g} Gb/s its {_link(p.link_cap)} "
    what += "link can do"
    if own:
        fix = "Reseat the card or riser; check the slot's BIOS setting (a link trained down)."
        if p.link_sta and p.link_cap and p.link_sta[1] >= p.link_cap[1]:
            # the width is whole: a slower speed alone is also what an idle GPU's power saving gives
            fix += " Only the speed is lower: an idle GPU drops its generation, so check it under load (nvidia-smi -q)."
    else:
        fix = f"Check the port at {p.limited_at} (`lspci -vvv -s {p.limited_at}`, LnkCap and LnkSta): a switch or "
        fix += "slot slower than the device caps every host copy through it; one trained down needs reseating."
    ev = {"bdf": p.bdf, "limited_at": p.limited_at, "available_gbit_s": p.available_gbit_s,
          "capable_gbit_s": p.capable_gbit_s}  # fmt: skip
    subject = f"GPU{gpu.index}" if gpu is not None else p.bdf
    out.add("TD030", Candidate(what, fix, ev, None), (Quote(f.where.get(p.piece, "the kernel log"), "limited by"),),
            subject)  # fmt: skip


def _pairs_p2p_below_staged(copies: tuple[CopyMatrix, ...]) -> list[tuple[str, str, float, float, str]]:
    """(row, column, P2P enabled, disabled, direction) where peer copies lose to copies through the host."""
    out = []
    for d in ("unidirectional", "bidirectional"):
        on = next((c for c in copies if c.direction == d and c.p2p is True and c.unit == "GB/s"), None)
        off = next((c for c in copies if c.direction == d and c.p2p is False and c.unit == "GB/s"), None)
        if on is None or off is None:
            continue
        for i, r in enumerate(on.rows):
            for j, col in enumerate(on.columns):
                if r == col or i >= len(off.values) or j >= len(off.values[i]):
                    continue
                a, b = on.values[i][j], off.values[i][j]
                if a is not None and b is not None and a < STAGED_BEATS_P2P * b:
                    out.append((r, col, a, b, d))
    return out


def _pair(a: str, b: str) -> tuple[int, int] | None:
    return (min(int(a), int(b)), max(int(a), int(b))) if a.isdigit() and b.isdigit() else None


def path_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """ACS / IOMMU (TD029), a flat topology in a VM (TD028), pairs across sockets (TD027)."""
    slow = [] if no_peer_access(f) else _pairs_p2p_below_staged(f.copies)  # GeForce: its "P2P" is staged
    slow = [x for x in slow if _pair(x[0], x[1]) not in f.peer_denied]
    if slow:
        r, c, a, b, d = slow[0]
        what = f"peer copies GPU{r}->GPU{c} at {a:g} GB/s, under the {b:g} GB/s staged through the host ({d})"
        acs = [p for p in f.pcie if any(p.acs_ctl.get(k) for k in ("ReqRedir", "CmpltRedir", "SrcValid"))]
        if acs:
            what += f"; ACSCtl on {acs[0].bdf} redirects requests"
        elif not any(p.acs_ctl for p in f.pcie):
            # lspci -vvv shows both what tells ACS from the IOMMU and the links' trained width
            what += "; `lspci -vvv | grep ACSCtl` tells ACS (a + on ReqRedir, CmpltRedir or SrcValid) from the IOMMU"
            out.ask(LSPCI)
        lines = tuple(Quote(f.where.get(p.piece, "lspci"), f"{p.bdf} ACSCtl") for p in acs[:2])
        out.add(
            "TD029",
            Candidate(
                what,
                "Disable ACS on the switches the GPUs share, or run the IOMMU in passthrough.",
                {"pairs": len(slow)},
                a if sym is not None and sym.kind == "copy" else None,
            ),
            lines,
        )
    elif any(c.p2p is True for c in f.copies) and any(c.p2p is False for c in f.copies):
        out.rule_out("ACS / IOMMU: peer copies beat the staged ones on every pair")
    links = {p: lb for p, lb in f.links.items() if sym is None or not sym.gpus or set(p) <= set(sym.gpus)}
    classes = {path_class(lb) for lb in links.values()}
    shm = any(c.kind == "shm" for c in f.conns)
    virt = any(g.virtualization.lower().startswith("pass") for g in f.gpus)
    # a bare-metal host shows its switches (PIX, PXB) and sockets (NODE, SYS); four or more GPUs all PHB,
    # or PHB inside a VM, is a hypervisor hiding the PCIe tree
    if classes == {"PHB"} and len(links) >= 1 and (virt or shm or len(links) >= FLAT_PAIRS):
        what = "every GPU pair shows as PHB" + (" inside a VM" if virt else " (as a VM's hypervisor shows them)")
        what += ": NCCL sees no PCIe switch and cannot place P2P or the NICs"
        out.add(
            "TD028",
            Candidate(what, "Set NCCL_TOPO_FILE to the host's real topology XML.", {"pairs": len(links)}, shm_gbps(f)),
            (f.links_quote,) if f.links_quote else (),
        )
    one_per_node = sym is not None and sym.nodes > 1 and 0 < sym.ranks <= sym.nodes  # no pair of a node in the run
    if one_per_node and "SYS" in classes:
        out.rule_out("pairs across the sockets: the run has one GPU a node, so no pair of a node carries its traffic")
    elif "SYS" in classes:
        sys_pairs = sorted(p for p, lb in links.items() if path_class(lb) == "SYS")
        a, b = sys_pairs[0]
        what = f"GPU{a}-GPU{b} (and {len(sys_pairs) - 1} more pairs) cross the CPU sockets (SYS)"
        quote = (f.links_quote,) if f.links_quote else ()
        level = f.settings.get("NCCL_P2P_LEVEL")
        over = [c for c in f.conns if c.kind == "p2p" and c.gpus and path_class(f.link(*c.gpus) or "") == "SYS"]
        if sym is not None and (over or (level is not None and level[0].strip().upper() in ("SYS", "5", "4"))):
            # NCCL keeps P2P off SYS pairs by default: peer writes across the sockets lose to staging on
            # many hosts; told to use them, the ring runs at the inter-socket link's peer rate
            why = f"NCCL_P2P_LEVEL={level[0]}" if level is not None else "P2P"
            what += f", and {why} sends peer traffic across them (NCCL stages it through host memory by default)"
            lines = quote + ((level[1],) if level is not None else ()) + tuple(c.quote for c in over[:1] if c.quote)
            cand = Candidate(what, "Unset NCCL_P2P_LEVEL, or choose GPUs under one socket.", {"pairs": len(sys_pairs)})
            out.add("TD027", cand, lines, severity="warning")
        else:
            out.add("TD027", Candidate(what, "Choose GPUs under one socket.", {"pairs": len(sys_pairs)}, shm_gbps(f)),
                    quote)  # fmt: skip
    if sym is not None and not f.links and not sym.subject.startswith("host-"):  # a host copy has no GPU pair
        out.ask("`nvidia-smi topo -m` (each pair's path: NV#, PIX, PXB, PHB, SYS)")


def nvlink_islands(f: Facts) -> list[tuple[int, ...]]:
    """The groups of GPUs NVLink joins where topo -m shows it joining only some pairs (bridged pairs or
    quads): each group's GPUs, more than one group; empty where every pair is NVLinked or none is."""
    gpus = sorted({g for pair in f.links for g in pair})
    nv = {p for p, lb in f.links.items() if path_class(lb) == "NV"}
    if not nv or len(nv) == len(f.links):
        return []
    group = {g: {g} for g in gpus}
    for a, b in sorted(nv):
        merged = group[a] | group[b]
        for g in merged:
            group[g] = merged
    islands = sorted({tuple(sorted(m)) for m in group.values() if len(m) > 1})
    return islands if len(islands) > 1 else []
