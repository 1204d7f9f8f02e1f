"""The claims of every prose piece joined into what the judgement of a stated figure needs
(evidence_prose.py): the hardware, the op, the one figure measured and those compared with it, the NICs.
Where a tool showed the same thing (a GPU name, a launch's nodes, ibstat's ports), the tool's word wins."""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.diagnosis.evidence_nics import expected_nic_gbps
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.model.evidence_prose import FigureKind, FigureSaid, ProseSaid
from topodoctor.topology.gpu_models import MODELS, GpuModel

# the reporter calls the figure high: were it below the expectation, one of the two readings is wrong
_HIGH = re.compile(r"\bas high as\b|\bhigher than\b|\bexceed\w*|\bbigger than\b|\bsurpris\w*|\bbeyond\b", re.I)
_NCCL = re.compile(r"\bnccl|_perf\b|\ball[ _-]?reduce|\ball[ _-]?gather|\breduce[ _-]?scatter|\bAR\b", re.I)


@dataclass(frozen=True)
class StatedRun:
    """What the sentences (and the tools beside them) say of the run whose figure they state."""

    figure: FigureSaid | None  # the measured figure judged
    kind: FigureKind
    bound: str  # "above": the run measured more than the figure ("busbw exceeds 100Gbps")
    called_high: bool  # the reporter's sentence calls the figure high ("can reach as high as 161Gbps")
    expected: tuple[FigureSaid, ...]  # figures the reporter compares with
    quote: Quote
    model: GpuModel | None
    gpu: str
    per_node: int | None
    nodes: int | None
    across: bool
    op: str
    size_bytes: int | None
    nic_kind: str
    nic_text: str  # "1 x HDR 200 Gb/s"
    node_gbps: float | None  # a node's NICs, GB/s
    images: bool
    shared: bool
    dual_port: bool
    other_op: FigureSaid | None = None  # the best figure the post states of another collective, on the same run


def _tier(fig: FigureSaid) -> int:
    """How surely a measured figure is NCCL's: its clause names busbw or algbw, its sentence names NCCL or
    an op, or neither."""
    if fig.kind != "unspecified":
        return 0
    return 1 if _NCCL.search(fig.sentence) else 2


def _op(program: str) -> str:
    """The op an nccl-tests binary runs, as the model names it (all_reduce_perf: all_reduce)."""
    op = program.removesuffix("_perf")
    return {"alltoall": "all_to_all"}.get(op, op)


def _first(claims: tuple[ProseSaid, ...], name: str) -> object:
    return next((v for c in claims if (v := getattr(c, name))), None)


def said_of(f: Facts) -> StatedRun | None:
    """The joined claims, or None where the evidence holds no prose."""
    claims = f.prose
    if not claims:
        return None
    figs = [x for c in claims for x in c.figures]
    launched = max((ln.nodes for ln in f.launches if ln.nodes), default=None)
    nodes = _first(claims, "nodes") or launched
    assert nodes is None or isinstance(nodes, int)
    across = bool(_first(claims, "across_nodes")) or bool(nodes and nodes > 1)
    # a NIC's rate set beside the figure, with the nodes unsaid: the run crossed the network
    across = across or (nodes is None and any(x.role == "nic" for x in figs))
    op = str(_first(claims, "op") or next((_op(ln.program) for ln in f.launches if ln.program), ""))
    measured = [x for x in figs if x.role == "measured" and not x.tool]
    # a figure of another collective ("the allreduce saturates 50Gbps" in a post on send/recv) is a reference
    other_op = max((x for x in measured if x.op and op and x.op != op), key=lambda x: x.gbps, default=None)
    measured = [x for x in measured if not x.op or not op or x.op == op] or measured
    if any(x.scope != "one-node" for x in measured):
        # "single node: 232 GB/s; between two nodes only 86 GB/s": the figure of the run the sentences ask about
        measured = [x for x in measured if x.scope != ("one-node" if across else "nodes")] or measured
    counts = {x.nodes for x in measured if x.nodes and x.nodes > 1}
    if len(counts) > 1:  # a figure per node count ("70 GB/s on three servers ... 40 GB/s on six"): the run at
        measured = [x for x in measured if x.nodes == max(counts)]  # the most nodes, where scaling falls short
    best = min((_tier(x) for x in measured), default=None)
    counted = _first(claims, "gpu_count")
    if counted and any(x.gpus == counted for x in measured):
        measured = [x for x in measured if x.gpus in (counted, None)]  # "8 GPUs: 28GB/s; 4 GPUs: 35GB/s"
    figure = max((x for x in measured if _tier(x) == best), key=lambda x: x.gbps, default=None)
    piece = next((c.piece for c in claims if figure in c.figures), claims[0].piece)
    path = f.where.get(piece, "the evidence").rsplit(":", 1)[0]
    quote = Quote(f"{path}:{figure.line}", figure.sentence) if figure else Quote(path)
    name = str(_first(claims, "gpu_model") or "")
    model = next((m for m in MODELS if m.name == name), None)
    rate = _first(claims, "nic_gbit_s")
    count = _first(claims, "nics")
    kind = str(_first(claims, "nic_kind") or "")
    node_gbps: float | None = None
    nic_text = ""
    if isinstance(rate, float):
        n = count if isinstance(count, int) else 1
        node_gbps = n * rate / 8.0
        nic_text = f"{n} x {kind + ' ' if kind else ''}{rate:g} Gb/s" + ("" if count else " (one NIC taken)")
    elif (listed := expected_nic_gbps(f, f.hosts[0] if f.hosts else "")) is not None:
        node_gbps, nic_text = listed, "the ports listed"
    per_node = (figure.gpus if figure is not None and figure.gpus else None) or counted
    if figure is not None and figure.nodes and len(counts) > 1:
        nodes = figure.nodes  # the figure's own node count, not the first the post names
    size = _first(claims, "size_bytes")
    return StatedRun(
        figure=figure,
        kind=figure.kind if figure else "unspecified",
        bound=figure.bound if figure else "",
        called_high=bool(figure and _HIGH.search(figure.sentence)),
        expected=tuple(x for x in figs if x.role == "expected"),
        quote=quote,
        model=model,
        gpu=str(_first(claims, "gpu") or ""),
        per_node=per_node if isinstance(per_node, int) else None,
        nodes=nodes if isinstance(nodes, int) else None,
        across=across,
        op=op,
        size_bytes=size if isinstance(size, int) else None,
        nic_kind=kind,
        nic_text=nic_text,
        node_gbps=node_gbps,
        images=any(c.images for c in claims),
        shared=any(c.shared for c in claims),
        dual_port=any(c.dual_port for c in claims),
        other_op=other_op if other_op is not figure else None,
    )
