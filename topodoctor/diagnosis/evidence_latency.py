"""Latency-bound sizes of nccl-tests (the rows under 64M): why they are not judged, and what NCCL's own
latency model says of them.

At a small size an op's time is its fixed cost, not its bytes, so busbw there says nothing of the links
and the bandwidth model (topology/busbw.py) must never call such a row slow. Time does not judge them
either: NCCL's tuning model (src/graph/tuning.cc, the same latencies from 2.18 to 2.28) charges a base
latency per algorithm and protocol plus a hardware latency per step of the ring or tree, and leaves out
what every measured op also pays (the kernel launch, the host's synchronisation, nccl-tests' own
timing), so healthy runs sit several times over it, by an amount that varies with the host, the launch
(one process with -g N launches N kernels in turn) and the release. A ratio to the model tells a slow
small-size run from a healthy one no better than the busbw does, so it is stated, not judged.
"""

from __future__ import annotations

import math

from topodoctor.core.text import human_size
from topodoctor.diagnosis.evidence_expect import BANDWIDTH_BOUND_BYTES
from topodoctor.diagnosis.evidence_facts import Facts, Measured, path_class
from topodoctor.diagnosis.nccl_model import COLLECTIVES

# tuning.cc baseLatencies (us), LL: the protocol NCCL picks at the smallest sizes
BASE_LL_US = {"ring": 6.6, "tree": 6.8}
# tuning.cc hwLatencies (us) per step, LL, by what the step crosses
HW_LL_US = {"NVLINK": {"ring": 0.6, "tree": 0.6}, "PCI": {"ring": 1.0, "tree": 1.0},
            "NET": {"ring": 2.7, "tree": 5.0}}  # fmt: skip
REDUCE_BOTH_WAYS = ("all_reduce",)  # a ring all_reduce is a reduce-scatter then an all-gather: 2(n-1) steps


def _intra(f: Facts, m: Measured) -> str:
    """What NCCL's steps within a node cross: NVLink where topo -m shows every pair NVLinked (or, without
    topo -m, the GPU model sits on an NVSwitch), else PCIe."""
    labels = [lb for (a, b), lb in f.links.items() if not m.run_gpus or (a in m.run_gpus and b in m.run_gpus)]
    if not labels:
        return "NVLINK" if f.model is not None and f.model.fabric == "nvswitch" else "PCI"
    return "NVLINK" if all(path_class(lb) == "NV" for lb in labels) else "PCI"


def model_latency_us(op: str, ranks: int, nodes: int, intra: str) -> tuple[float, str]:
    """The least time NCCL's tuning model gives the op at its smallest size (LL, ring or tree, whichever
    is less), and which it is; ``intra`` is NVLINK or PCI."""
    nodes = max(nodes, 1)
    per_node = max(ranks // nodes, 1)
    intra_us, net = HW_LL_US[intra], HW_LL_US["NET"]
    steps = 2 * (ranks - 1) if op in REDUCE_BOTH_WAYS else ranks - 1
    inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if op in REDUCE_BOTH_WAYS else nodes - 1)
    # with one rank per node every step crosses the network, and NCCL charges the tree's network latency
    ring_net = net["tree"] if per_node == 1 else net["ring"]
    ring = BASE_LL_US["ring"] + (steps - inter_steps) * intra_us["ring"] + inter_steps * ring_net
    out = [(ring, "ring")]
    if op in REDUCE_BOTH_WAYS:  # NCCL's tree serves all_reduce only
        hops = (per_node - 1) * intra_us["tree"] + int(math.log2(nodes)) * net["tree"]
        out.append((BASE_LL_US["tree"] + 2 * hops, "tree"))
    return min(out)


def latency_bound_message(f: Facts, m: Measured) -> str:
    """Why a run whose largest size is latency-bound is not judged, with its time and NCCL's model of it."""
    msg = f"{m.op} not judged: its largest size, {human_size(m.size_bytes)}, is latency-bound, where busbw "
    msg += "is mostly the op's fixed cost, not the links' rate"
    small = min((x for x in f.measured if x.op == m.op and x.quote.where == m.quote.where),
                key=lambda x: x.size_bytes, default=m)  # fmt: skip
    ranks = m.nranks or len(m.rank_hosts)
    if small.time_us and m.op not in COLLECTIVES:
        msg += f"; nor by time ({small.time_us:g} us at {human_size(small.size_bytes)}): NCCL's tuning model covers "
        msg += "the collectives, not point-to-point"
    elif small.time_us and ranks and ranks > 1:
        nodes = m.nodes or len(set(m.rank_hosts)) or 1
        intra = _intra(f, m)
        model_us, algo = model_latency_us(m.op, ranks, nodes, intra)
        link = "NVLink" if intra == "NVLINK" else "PCIe"
        where = f"{ranks} ranks" + (f" on {nodes} nodes" if nodes > 1 else f" over {link}")
        msg += f"; nor by time: {small.time_us:g} us at {human_size(small.size_bytes)}, where NCCL's own latency "
        msg += f"model (tuning.cc, {algo} LL, {where}) gives about {model_us:.0f} us and healthy runs sit "
        msg += "several times over it (the launch and synchronisation the model leaves out)"
    msg += f" (bandwidth decides from {human_size(BANDWIDTH_BOUND_BYTES)}: run up to 1G, -e 1G)"
    return msg
