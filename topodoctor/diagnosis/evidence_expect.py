"""What a run on the hardware the evidence shows should reach: per collective and size (the topology's
model, topology/busbw.py, fed a ``Layout`` built from the evidence), per copy between two GPUs (the
links' rate), each with its basis: the topology's model, the link rate, or the GPU model table."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.diagnosis.evidence_facts import Facts, Measured, no_peer_access, path_class
from topodoctor.diagnosis.evidence_nics import expected_nic_gbps
from topodoctor.topology.busbw import SHM_SHARE, STAGED_CLASSES, Layout, model_at, predict_layout
from topodoctor.topology.gpu_models import GpuModel
from topodoctor.topology.graph import NVLINK_LINK_GBPS, pcie_gbps

# Below this, busbw is latency-bound (each op's fixed time is most of it): no verdict on bandwidth.
BANDWIDTH_BOUND_BYTES = 64 << 20
NORMAL_SHARE = 0.85  # at this share of the expectation or more a run is what the hardware gives (TD020's)


@dataclass(frozen=True)
class PostedExpectation:
    """What the op of a posted run should reach at its size on the hardware the evidence shows, and
    why: the topology's model (busbw.py's, through a ``Layout`` where a probed host's expectation,
    busbw_expect.py, goes through its snapshot), its figure as ``model_at`` states every model figure."""

    op: str
    size_bytes: int
    busbw_gbps: float  # at this size
    plateau_gbps: float  # at 1 GiB and up
    basis: str  # "the topology's model: 18 NVLinks to NVSwitch x 20.6 GB/s (topo -m: NV18 between every pair)"
    ring_crosses_pcie: bool = False  # only some pairs NVLinked: the ring runs at the PCIe hop
    staged: bool = False  # a pair of the ring is one NCCL joins through host memory (PHB, NODE, SYS)
    crosses_sockets: bool = False  # ... and one of them is SYS
    layout: Layout | None = None


def _nv_count(label: str) -> int:
    digits = label.strip().upper()[2:]
    return int(digits) if digits.isdigit() else 1


def _pcie_of(f: Facts, m: GpuModel | None) -> tuple[int | None, int | None, str]:
    """The slowest GPU's PCIe link as shown (generation at its max: idle GPUs drop it), else the model's."""
    shown = [
        (g.pcie_gen_max or g.pcie_gen, g.pcie_width) for g in f.gpus if (g.pcie_gen_max or g.pcie_gen) and g.pcie_width
    ]
    if shown:
        gen, width = min(shown, key=lambda gw: (gw[0] or 0) * (gw[1] or 0))
        return gen, width, "nvidia-smi -q"
    if m is not None:
        return m.pcie_gen, m.pcie_width, f"the GPU model table ({m.name})"
    return None, None, ""


MESH_GPUS = 8  # the GPUs of a hybrid cube mesh board: with fewer, which pairs the run has decides its links


def layout_of(f: Facts, per_node: int, gpus: tuple[int, ...] = ()) -> tuple[Layout, bool] | None:
    """The node the evidence shows, as the model needs it, and whether a ring must cross PCIe; ``gpus`` are
    the run's GPUs by nvidia-smi's index (default: the first ``per_node``)."""
    idx = gpus if len(gpus) == per_node else tuple(range(per_node))
    m = f.model
    cc = m.compute_capability if m is not None else ""
    gen, width, pcie_src = _pcie_of(f, m)
    listed = expected_nic_gbps(f, f.hosts[0] if f.hosts else "")  # ibstat's ports: each at its siblings' rate
    nic = sum(n.rate_gbps / 8 for n in f.nics if n.rate_gbps and (not f.hosts or n.host in ("", f.hosts[0])))
    nic_gbps = listed or nic or None
    pairs = [(a, b) for i, a in enumerate(idx) for b in idx[i + 1 :]]
    labels = [f.link(a, b) for a, b in pairs]
    if pairs and all(lb is not None for lb in labels):
        shown = [lb for lb in labels if lb is not None]
        nv = [lb for lb in shown if path_class(lb) == "NV"]
        if nv and len(nv) == len(shown):
            least = min(_nv_count(lb) for lb in nv)
            switch = (m.fabric == "nvswitch") if m is not None else least >= 12
            what = f"topo -m: {least if len(set(nv)) > 1 else nv[0]} between every pair"
            return Layout(per_node, least, switch, cc or "9.0", gen, width, nic_gbps, what), False
        what = "topo -m: " + ", ".join(sorted(set(shown)))
        if m is not None and m.fabric == "mesh" and nv:
            # a hybrid cube mesh (V100 SXM2): NCCL's rings stay on NVLink, each GPU's links shared among them
            per_gpu = [sum(_nv_count(f.link(g, o) or "") for o in idx
                           if o != g and path_class(f.link(g, o) or "") == "NV") for g in idx]  # fmt: skip
            if min(per_gpu) >= 2:
                return Layout(per_node, min(per_gpu), False, cc, gen, width, nic_gbps, what + ": a mesh"), False
        return Layout(per_node, 0, False, cc or "9.0", gen, width, nic_gbps, what), bool(nv)
    if m is None:
        return None
    up = [g.nvlinks_up for g in f.gpus if g.nvlinks_up is not None]
    if m.fabric == "nvswitch":
        links = min(up) if up else m.nvlink_links
        src = "nvidia-smi's NVLinks up" if up else f"the GPU model table ({m.name}: {m.nvlink_links} NVLinks)"
        return Layout(per_node, links, True, cc, gen, width, nic_gbps, src), False
    if m.fabric == "mesh" and m.nvlink_links and per_node == MESH_GPUS:
        # a whole hybrid cube mesh board (DGX-1): NCCL's rings stay on NVLink, as topo -m would show each GPU's links
        src = f"the GPU model table ({m.name}: {m.nvlink_links} NVLinks a GPU, 8 in a mesh)"
        return Layout(per_node, m.nvlink_links, False, cc, gen, width, nic_gbps, src), False
    src = pcie_src + (" (no topo -m: NVLink bridges not shown)" if m.fabric == "bridge" else "")
    return Layout(per_node, 0, False, cc, gen, width, nic_gbps, src), False


def expect_collective(f: Facts, run: Measured) -> PostedExpectation | None:
    """What ``run``'s op at its size should reach on the hardware the facts show; None where they say too little."""
    nodes = run.nodes or (len(set(run.rank_hosts)) if run.rank_hosts else 1) or 1
    ranks = run.nranks or len(run.rank_hosts)
    per_node = f.gpus_per_node or (ranks // nodes if ranks else 0)
    if ranks and nodes == 1:
        per_node = ranks
    if per_node < 1 or (per_node * nodes) < 2:
        return None
    got = layout_of(f, per_node, run.run_gpus)
    if got is None:
        return None
    lay, crosses = got
    pred = {p.op: p for p in predict_layout(lay, nodes, (run.op,))}
    p = pred.get(run.op)
    if p is None:
        return None
    where = "the NICs' rate" if nodes > 1 and "NICs" in p.bottleneck.what else "the topology's model"
    basis = f"{where}: {p.bottleneck.what}"
    plateau = p.busbw_gbps
    no_p2p = no_peer_access(f)  # GeForce: SHM only
    idx = set(run.run_gpus) if len(run.run_gpus) == lay.gpus else set(range(lay.gpus))
    ring = [lb for (a, b), lb in f.links.items() if a in idx and b in idx]  # the run's GPUs' pairs
    staged = nodes == 1 and not lay.nvlinks and (no_p2p or any(path_class(lb) in STAGED_CLASSES for lb in ring))
    if staged:
        plateau = round(plateau * SHM_SHARE, 1)
        basis += f"; through host memory (SHM: {SHM_SHARE:g} of it, as measured on H100 / H200)"
    sockets = staged and any(path_class(lb) == "SYS" for lb in ring)
    return PostedExpectation(run.op, run.size_bytes, model_at(plateau, run.size_bytes), plateau, basis,
                       crosses, staged, sockets, lay)  # fmt: skip


def copy_nominal(f: Facts, a: int, b: int) -> tuple[float, str] | None:
    """One GPU pair's nominal rate one way (GB/s, per direction) and its basis: the pair's NVLinks x the
    link rate of the model's generation, else the PCIe link; None where the evidence shows neither."""
    m = f.model
    label = f.link(a, b)
    if label is not None and path_class(label) == "NV":
        rate = m.nvlink_gbps if m is not None and m.nvlink_gbps else None
        if rate is None and m is not None and m.nvlink_gen is not None:
            rate = NVLINK_LINK_GBPS.get(m.nvlink_gen)
        if rate is None:
            return None
        n = _nv_count(label)
        return n * rate, f"the link rate: {label} x {rate:g} GB/s per direction"
    gen, width, src = _pcie_of(f, m)
    rate = pcie_gbps(gen, width)
    if rate is None:
        return None
    path = f" over {label}" if label else ""
    return rate, f"the link rate: PCIe Gen{gen} x{width}{path} ({src})"
