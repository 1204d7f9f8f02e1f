"""NVLinks absent against the GPU model (TD031): GPUs whose model is built with NVLink to NVSwitch (the SXM
and HGX parts: A100 SXM, H100 SXM, H200, B200 ...) that `nvidia-smi topo -m` shows joined by PCIe (PIX, PXB,
PHB, NODE, SYS), or that the reporter says went over PHB rather than NVLink, or an SXM model on a rented
instance said to be slow.

On an NVSwitch baseboard every GPU pair is NV# by design (the GPU model table: topology/gpu_models.py);
topo -m reads the links the driver trained. A PCIe class between two such GPUs means the NVLinks are not
there for the driver: a VM given the GPUs without their NVLinks or NVSwitches (the provider's passthrough),
NVLink left off, or, on NVSwitch parts, the fabric manager not running (until its state is Completed the
links carry no peer traffic; nvidia-smi -q's Fabric section). NCCL then joins the pairs over PCIe or through
host memory (SHM for PHB, NODE and SYS: paths.cc's default P2P level), a tenth of NVLink.
"""

from __future__ import annotations

import re

from topodoctor.diagnosis.evidence_causes import shm_gbps
from topodoctor.diagnosis.evidence_facts import Facts, path_class
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.evidence import NcclSaid
from topodoctor.model.findings import Severity
from topodoctor.topology.gpu_models import MODELS, GpuModel

POST = (
    "`nvidia-smi topo -m`, `nvidia-smi nvlink -s` and the fabric manager's state (`nvidia-smi -q | grep -A3 Fabric`, "
    "`systemctl status nvidia-fabricmanager`)"
)
FIX = (
    "Give the GPUs their NVLinks: on a rented or cloud instance ask the provider for a host or VM with NVLink and "
    "the NVSwitches passed through; on NVSwitch parts start the fabric manager (its version matching the driver's) "
    "and wait for Fabric State Completed. Post " + POST + "."
)


# the words that name the NVSwitch part itself: "H100" alone is the model table's SXM part by default, which a PCIe
# card's owner writes too, so a model known only from the words must be named as the board's
_BOARD = re.compile(r"SXM|HGX|DGX|NVSwitch|H200|H20\b|B200|B100|GB200|p4d|p5\.|p5e|ND\w*v[45]|a3-", re.I)


def _model(f: Facts) -> tuple[GpuModel | None, bool]:
    """The GPU model, and whether only the reporter's words name it (then only where they name the board)."""
    if f.model is not None:
        return f.model, False
    said = next(((m, c.gpu) for c in f.prose for m in MODELS if m.name == c.gpu_model), None)
    if said is None or not _BOARD.search(said[1]):
        return None, False
    return said[0], True


def _across(f: Facts, sym: Symptom | None) -> bool:
    """Whether the slow run spans nodes: then the network between them leads, not a node's own NVLinks."""
    return (sym is not None and sym.nodes > 1) or any(c.across_nodes or (c.nodes or 0) > 1 for c in f.prose)


def _gpus_said(f: Facts) -> int:
    return max([c.gpu_count or 0 for c in f.prose] + [f.gpus_per_node or 0, len({g.index for g in f.gpus})])


def nvlink_absent(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """TD031 where an NVSwitch model's GPUs go over PCIe: in topo -m (the tool's word: error beside a short
    figure, else a warning), in the reporter's words (a warning), or an SXM model on a rented instance said to
    be slow (a warning: cannot tell, with what to post)."""
    m, words = _model(f)
    if m is None or m.fabric != "nvswitch" or not m.nvlink_links:
        _said_against_topo(f, out)
        return
    pcie = sorted((p, lb) for p, lb in f.links.items() if path_class(lb) != "NV")
    if pcie:
        (a, b), lb = pcie[0]
        what = f"GPU{a}-GPU{b} joined by {lb} where {m.name} has {m.nvlink_links} NVLinks to NVSwitch"
        what += f" ({len(pcie)} of {len(f.links)} pairs over PCIe): the NVLinks are absent against the model"
        what += " (a VM or provider host without them, NVLink off, or the fabric manager not running)"
        q = (f.links_quote,) if f.links_quote else ()
        exp = shm_gbps(f) if path_class(lb) in ("PHB", "NODE", "SYS") else None
        severity: Severity | None = None if sym is not None and not words else "warning"
        ev = {"pairs": len(pcie), "link": lb, "model_links": m.nvlink_links, "post": POST}
        out.add("TD031", Candidate(what, FIX, ev, exp, direct=not words), q, "nvlink", severity)
        return
    if f.links:
        return  # topo -m shows NVLink between the pairs: what the words say of them is weaker
    said = [s for s in f.said if s.paths and s.nvlink]
    rented = any(s.rented for s in f.said) or any("vm" in c.hosts for c in f.prose)
    slow = sym is not None or any(c.slow or c.asks for c in f.prose)
    s: NcclSaid | None = None
    if said:
        s = said[0]
        what = f"the reporter says the GPUs went over {'/'.join(s.paths)} rather than NVLink, where {m.name} has "
        what += f"{m.nvlink_links} NVLinks to NVSwitch: the NVLinks are absent against the model (from the reporter's "
        what += "words, weaker evidence than `nvidia-smi topo -m` itself)"
    elif rented and slow and _gpus_said(f) >= 2 and not _across(f, sym):
        what = f"{m.name} on a rented or cloud instance said to be slow across its GPUs: cannot tell without "
        what += f"`nvidia-smi topo -m`, and the first candidate is NVLinks absent against the model (a {m.name} pair "
        what += "should show NV#; a provider's VM without its NVLinks or NVSwitches shows PHB or SYS and stages "
        what += "every transfer through host memory)"
        s = next(x for x in f.said if x.rented) if any(x.rented for x in f.said) else None
    else:
        return
    q = (Quote(f.where.get(s.piece, "the reporter's words"), s.text),) if s is not None else ()
    ev = {"model_links": m.nvlink_links, "post": POST, "from": "the reporter's words"}
    out.add("TD031", Candidate(what, FIX, ev, shm_gbps(f), direct=False), q, "nvlink", "warning")


def _said_against_topo(f: Facts, out: Leads) -> None:
    """Where the model does not fix the links (a bridged card, a model not named): the reporter says the GPUs
    should be NVLinked, or are not, and topo -m shows no NVLink between any pair (a warning: the tool's word
    that none is there, the reporter's that the host has them)."""
    said = next((s for s in f.said if s.nvlink_absent), None)
    if said is None or not f.links or any(path_class(lb) == "NV" for lb in f.links.values()):
        return
    classes = ", ".join(sorted({f.links[p] for p in f.links}))
    what = "the reporter says the GPUs should use NVLink and `nvidia-smi topo -m` shows none between them "
    what += f"({classes}): the NVLinks are absent or not seen by the driver (a VM or image that lost them, a bridge "
    what += "missing, NVLink off)"
    q = tuple(x for x in (f.links_quote, Quote(f.where.get(said.piece, "the reporter's words"), said.text)) if x)
    ev = {"classes": classes, "post": POST, "from": "the reporter's words and topo -m"}
    out.add("TD031", Candidate(what, FIX, ev, shm_gbps(f), direct=False), q, "nvlink", "warning")
