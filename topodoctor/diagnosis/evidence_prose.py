"""A figure the reporter states in words ("8 H100s ... a wire bw of 480 GB/s", "the algbw is about 250
GB/s", "15.3 GB/s on 12 nodes of one HDR 200G card each") judged against the one expectation, as a
tool's figure is: the topology's model on one node (evidence_expect.py, busbw.py), the NICs' rate across
nodes. It is weaker evidence than the tool's own output, so every answer says that it rests on the
reporter's words, and none is an error on its own: a figure below the expectation is a symptom whose
causes only the other evidence can name (the cause engine, evidence.py), else "cannot tell" with what
to post. Where a tool's figure is in the evidence, the sentences' figures are not judged at all.

Why a figure people compare with differs from what NCCL reaches, each from its meaning (nccl-tests'
doc/PERFORMANCE.md, NCCL's tuning model): busbw = algbw x 2 (n - 1) / n for all_reduce ((n - 1) / n for
all_gather and reduce_scatter, 1 for the others); an NVLink datasheet figure is both directions together,
or one direction at the line rate before NCCL's protocol (NCCL credits 20.6 GB/s a link on Hopper);
NVLink SHARP lifts all_reduce's busbw above a ring's on NVSwitch GPUs; on two nodes NCCL's tree lifts it
above the NICs' rate (the network carries algbw, not busbw).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from topodoctor.diagnosis.evidence_codes import BY_CODE
from topodoctor.diagnosis.evidence_expect import BANDWIDTH_BOUND_BYTES, NORMAL_SHARE, expect_collective
from topodoctor.diagnosis.evidence_facts import Facts, Measured
from topodoctor.diagnosis.evidence_header import launched_per_node
from topodoctor.diagnosis.evidence_leads import Symptom
from topodoctor.diagnosis.evidence_prose_said import StatedRun, said_of
from topodoctor.evidence.prose_words import PER_LINK
from topodoctor.model.evidence import SAID_SETTING
from topodoctor.model.evidence_prose import FigureSaid
from topodoctor.model.findings import Finding, Severity
from topodoctor.topology.busbw import (
    NCCL_NVLINK_GBPS,
    NVLS_EFFICIENCY_SM90,
    PLATEAU_BYTES,
    SPEEDS_INTER_SM90,
    Bottleneck,
    channel_fill,
    layout_bottleneck,
    predict_from,
    predict_layout,
)
from topodoctor.topology.gpu_models import GpuModel

WEAKER = "from the reporter's words, weaker evidence than the tool's own output"
ABOVE = 1.3  # a figure this far above all the hardware gives is not "normal": it is not what the words say it is
NVLINK_SPEC_LINK_GBPS = 25.0  # NVIDIA's datasheets count an NVLink 3 / 4 link at 25 GB/s a direction


@dataclass(frozen=True)
class ProseJudged:
    """The symptoms the cause engine explains, and the answers that stand on their own (information)."""

    symptoms: tuple[Symptom, ...] = ()
    findings: tuple[Finding, ...] = ()


def _info(
    code: str, subject: str, message: str, evidence: Mapping[str, object], severity: Severity = "info"
) -> Finding:
    c = BY_CODE[code]
    return Finding(code, c.name, severity, subject, message, c.how, {**evidence, "from": "the reporter's words"})


def _factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``op`` on ``n`` ranks (doc/PERFORMANCE.md)."""
    if op in ("all_reduce", ""):
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def _nvlink_credit(m: GpuModel) -> float | None:
    """The NVLink bandwidth NCCL credits one GPU of ``m`` (topo.h's per-link figure x its links)."""
    major, _, minor = m.compute_capability.partition(".")
    cc = int(major) * 10 + int(minor or 0)
    rate = next((bw for least, bw in NCCL_NVLINK_GBPS if cc >= least), None)
    return rate * m.nvlink_links if rate and m.nvlink_links else None


def spec_notes(s: StatedRun, expected_gbps: float) -> list[str]:
    """Why each figure the reporter compares with (a datasheet's, one they were told) differs from what NCCL
    reaches here, in a few words each."""
    out: list[str] = []
    m = s.model
    for fig in {x.gbps: x for x in s.expected}.values():  # a figure said twice is explained once
        x = fig.gbps
        links = m.nvlink_links if m is not None else 0
        spec = links * NVLINK_SPEC_LINK_GBPS
        credit = _nvlink_credit(m) if m is not None else None
        if links and abs(x - 2 * spec) <= 0.12 * 2 * spec:
            note = f"{fig.text} is NVLink's both directions together ({links} links x {NVLINK_SPEC_LINK_GBPS:g} GB/s"
            note += f" x 2): one direction is {spec:g} GB/s"
            note += f", of which NCCL credits {credit:.0f} after its protocol" if credit else ""
        elif links and abs(x - spec) <= 0.12 * spec:
            note = f"{fig.text} is NVLink's line rate one way ({links} links x {NVLINK_SPEC_LINK_GBPS:g} GB/s)"
            note += f"; NCCL credits {credit:.0f} GB/s after its protocol" if credit else ""
            if s.kind == "algbw":
                note += "; and it compares with busbw, not with the algbw stated"
        elif abs(x - expected_gbps) <= 0.15 * expected_gbps:
            note = f"{fig.text}, the figure expected, agrees with the {expected_gbps:.0f} GB/s this hardware gives"
        else:
            note = f"{fig.text}, the figure expected, is {x / expected_gbps:.2f} of the {expected_gbps:.0f} GB/s "
            note += "NCCL's model gives this hardware"
        out.append(note)
    return out


def judge_prose(f: Facts, tool_figures: bool) -> ProseJudged:
    """The answer on the figure the sentences state, where no tool's figure is in the evidence."""
    s = said_of(f)
    if s is None or tool_figures:
        return ProseJudged()
    if s.figure is None:
        named = [f"{k}={v}" for k, (v, q) in f.settings.items() if q.text.startswith(SAID_SETTING)]
        hardware = s.gpu or s.nic_kind or s.nic_text or s.nodes
        what = "the sentences state the hardware but no figure"
        if named and not hardware:
            what = f"the sentences name {', '.join(named)} but no figure"
        what = "the figures were posted as images" if s.images else what
        msg = f"{what}: nothing to judge (post nccl-tests' output as text, with its header: the ranks, nodes and "
        msg += "GPUs; and, if it falls short, NCCL_DEBUG=INFO output of the run)"
        expected = _expected_only(f, s)
        told = (expected,) if expected is not None else (_info("TD022", "figures", msg, {"seen_in": str(s.quote)}),)
        return ProseJudged(findings=told + _no_p2p(s))
    if s.across:
        return _across(f, s)
    return _one_node(f, s)


def _expected_only(f: Facts, s: StatedRun) -> Finding | None:
    """The hardware named with no figure: what all_reduce should reach on it (busbw at 1 GiB and above, NCCL's
    ring as the topology's model gives it), and the run that measures it (TD987); None where the words do not
    fix the hardware (the model and the GPUs a node on one node, the NICs' rate across nodes)."""
    quote = {"seen_in": str(s.quote)}
    if s.across:
        got = None if s.nic_kind in ("TCP", "Ethernet") else _across_ring(f, s, "all_reduce")  # TCP: a ceiling only
        if got is None:
            return None
        ring, nic, n_nodes, _ = got
        where = f"{n_nodes} nodes" if s.nodes else "nodes (how many is not stated: taken as 2)"
        msg = f"no figure is stated ({WEAKER}): all_reduce between {where} should reach about {ring:.1f} GB/s busbw "
        msg += f"at 1 GiB and above over {nic} (NCCL's ring at its inter-node channel speeds). To know whether this "
        msg += "run falls short, measure it: `all_reduce_perf -b 8 -e 8G -f 2 -g 1` with one process per GPU on "
        msg += "every node (nccl-tests built with MPI=1), and post the output with NCCL_DEBUG=INFO"
        return _info("TD987", "expected", msg, {**quote, "expected_gbps": round(ring, 1), "nodes": n_nodes})
    m = f.model or s.model
    if m is None:
        return None
    counted, assumed = s.per_node or f.gpus_per_node, ""
    if not counted and m.fabric == "nvswitch":
        counted, assumed = 8, "; the GPU count is not stated: taken as 8, an HGX board"
    if not counted or counted < 2:
        return None
    per_node = counted
    exp = expect_collective(replace(f, model=m, gpus_per_node=per_node),
                            Measured("all_reduce", PLATEAU_BYTES, 0.0, per_node, 1, s.quote))  # fmt: skip
    if exp is None:
        return None
    msg = f"no figure is stated ({WEAKER}): all_reduce on {per_node} x {m.name} should reach about "
    msg += f"{exp.busbw_gbps:.0f} GB/s busbw at 1 GiB and above ({exp.basis}{assumed}). To know whether this run "
    msg += f"falls short, measure it: `all_reduce_perf -b 8 -e 8G -f 2 -g {per_node}` and post the output as text, "
    msg += "with `nvidia-smi topo -m` (and, if it falls short, NCCL_DEBUG=INFO output of the run)"
    return _info("TD987", "expected", msg, {**quote, "expected_gbps": round(exp.busbw_gbps, 1), "basis": exp.basis})


def _no_p2p(s: StatedRun) -> tuple[Finding, ...]:
    """A GPU the driver gives no peer-to-peer over PCIe (GeForce), named with no figure: its copies between
    GPUs go through host memory by design, which is what it does, not a fault."""
    if s.model is None or s.model.p2p_pcie:
        return ()
    msg = (f"{s.gpu or s.model.name}: the driver gives this GPU no peer-to-peer over PCIe, so copies between "
           "its GPUs go through host memory (NCCL's SHM transport, CUDA staging through the host): normal for "
           "it. Expected: every pair runs at about what host memory over each GPU's PCIe link gives, and a pair "
           "under one PCIe switch (PIX, PXB) is no faster than one across the CPUs (SYS), often slower, since "
           "both GPUs' traffic climbs the switch's one link to the CPU and back")  # fmt: skip
    ev = {"gpu_model": s.model.name, "p2p_pcie": False, "seen_in": str(s.quote)}
    fix = (
        "Nothing to fix: no setting gives this GPU peer-to-peer. To go faster, GPUs that have it over PCIe "
        "or NVLink (NVIDIA's data-centre parts), or an NVLink bridge where the GPU takes one (RTX 3090)."
    )
    return (replace(_info("TD021", "p2p", msg, ev), fix=fix),)


def _busbw(s: StatedRun, n: int) -> tuple[float, str]:
    """The stated figure as busbw, and how it was read."""
    fig = s.figure
    assert fig is not None
    if s.kind == "algbw":
        v = fig.gbps * _factor(s.op, n)
        return v, f"algbw {fig.text} is busbw {v:.0f} GB/s on {n} GPUs (x {_factor(s.op, n):.2f})"
    how = "busbw" if s.kind == "busbw" else "taken as busbw (the sentence does not say which)"
    return fig.gbps, f"{fig.text}, {how}"


def _header(s: StatedRun, hardware: str) -> str:
    op = s.op or "the op (not stated: taken as all_reduce)"
    at = "above" if s.bound == "above" else "at"
    return f"{op} {at} {s.figure.text if s.figure else ''} on {hardware} ({WEAKER})"


def _one_node(f: Facts, s: StatedRun) -> ProseJudged:
    m = f.model or s.model
    if m is None and any(c.amd for c in f.prose):  # AMD's GPUs: their own tools show the links and rates
        msg = f"{s.op or 'the run'}'s {s.figure.text if s.figure else ''} not judged (the GPUs are AMD's, outside "
        msg += f"the NVIDIA model table; {WEAKER}): post `rocm-smi --showtopo` (the link type and hops between the "
        msg += "GPUs), `lspci -vvv` of the GPUs and the bridges above them (LnkSta: width and speed; ACSCtl) and "
        msg += "rocm_bandwidth_test's output, and compare with AMD's figures for the part"
        return ProseJudged(findings=(_info("TD022", s.op or "figures", msg, {"seen_in": str(s.quote)}),))
    if m is None:
        named = f"{s.gpu}: not in the GPU model table" if s.gpu else "the GPUs not named"
        msg = f"{s.op or 'the run'}'s {s.figure.text if s.figure else ''} not judged ({named}; {WEAKER}): post "
        msg += "`nvidia-smi topo -m`, `nvidia-smi -L` and nccl-tests' output"
        return ProseJudged(findings=(_info("TD022", s.op or "figures", msg, {"seen_in": str(s.quote)}),))
    per_node, assumed = s.per_node or f.gpus_per_node, ""
    if not per_node and m.fabric == "nvswitch":
        per_node, assumed = 8, "; the GPU count is not stated: taken as 8, an HGX board"
    if not per_node or per_node < 2:
        msg = f"{s.op or 'the run'}'s {s.figure.text if s.figure else ''} on {m.name} not judged: how many GPUs "
        msg += f"is not stated ({WEAKER}); post nccl-tests' output with its header"
        return ProseJudged(findings=(_info("TD022", s.op or "figures", msg, {"seen_in": str(s.quote)}),))
    # a measured figure the sentences give one link: the others beside it are of that link too
    said = [x for c in f.prose for x in c.figures if x.role == "measured" and not x.tool]
    link_fig = next((x for x in said if PER_LINK.search(x.sentence) and "pcie" not in x.sentence.lower()), None)
    if link_fig is not None and m.nvlink_links:
        return ProseJudged(findings=(_per_link(s, link_fig, m),))
    size = s.size_bytes or PLATEAU_BYTES
    op = s.op or "all_reduce"
    if size < BANDWIDTH_BOUND_BYTES:
        msg = f"{op} at {s.figure.text if s.figure else ''} not judged: the size stated is latency-bound "
        msg += f"({WEAKER}); run up to 1G (-e 1G)"
        return ProseJudged(findings=(_info("TD022", op, msg, {"seen_in": str(s.quote)}),))
    facts = replace(f, model=m, gpus_per_node=per_node)
    v, how = _busbw(s, per_node)
    exp = expect_collective(facts, Measured(op, size, v, per_node, 1, s.quote))
    if exp is None or exp.layout is None:
        return ProseJudged()
    ring = exp.busbw_gbps
    b = layout_bottleneck(exp.layout)
    nvls = None
    if op == "all_reduce" and m.nvls and b is not None and "NVSwitch" in b.what:
        nvls = b.ring_gbps * NVLS_EFFICIENCY_SM90 * 2 * (per_node - 1) / (per_node + 1)
    top = max(ring, nvls or 0.0)
    hardware = f"{per_node} x {m.name}"
    expected = f"the {ring:.0f} GB/s busbw NCCL's ring gives ({exp.basis}{assumed})"
    if nvls and nvls > ring:
        expected += f"; about {nvls:.0f} with NVLink SHARP (NVLS), NCCL's default for all_reduce here"
    notes = spec_notes(s, top)
    ev = {"measured_gbps": round(v, 1), "expected_gbps": ring, "nvls_gbps": round(nvls, 1) if nvls else None,
          "basis": exp.basis, "read_as": how, "seen_in": str(s.quote), "from": "the reporter's words"}  # fmt: skip
    if v >= NORMAL_SHARE * ring and v <= ABOVE * top:
        share = f"{v / ring:.2f} of the ring's figure" if v <= ring or not nvls else f"{v / nvls:.2f} of NVLS's"
        msg = f"{_header(s, hardware)}: normal for this hardware: {how}, {share}: {expected}"
        msg += "".join(f"; {n}" for n in notes)
        return ProseJudged(findings=(_info("TD021", op, msg, ev),))
    if v > ABOVE * top:
        msg = f"{_header(s, hardware)}: {how}, above everything this hardware gives ({expected}): cannot tell "
        msg += "what was measured (another count of GPUs, algbw against busbw, both directions added); post "
        msg += "nccl-tests' output"
        return ProseJudged(findings=(_info("TD022", op, msg, ev),))
    if s.kind == "unspecified" and v * _factor(op, per_node) >= NORMAL_SHARE * ring:
        msg = f"{_header(s, hardware)}: normal if it is algbw (busbw {v * _factor(op, per_node):.0f} GB/s against "
        msg += f"{expected}), short if it is busbw: cannot tell which; post nccl-tests' output"
        return ProseJudged(findings=(_info("TD022", op, msg, ev),))
    if s.called_high:
        return ProseJudged(findings=(_misread(s, hardware, how, v, ring, expected, ev),))
    basis = f"{exp.basis}{assumed}; {how}, {WEAKER}" + "".join(f"; {n}" for n in notes)
    sym = Symptom("collective", op, v, ring, basis, s.size_bytes or 0, 1, s.quote, per_node, tuple(range(per_node)))
    return ProseJudged(symptoms=(sym,))


def _per_link(s: StatedRun, fig: FigureSaid, m: GpuModel) -> Finding:
    """A figure of one NVLink, held to one link's rate: what NCCL's model credits a link (topo.h, the
    protocol's cost counted, both directions in use at once) and the datasheet's one direction."""
    credit = _nvlink_credit(m)
    link = credit / m.nvlink_links if credit and m.nvlink_links else None
    spec = f"the datasheet's {NVLINK_SPEC_LINK_GBPS:g} GB/s a direction is the line rate before the protocol"
    ev = {"measured_gbps": fig.gbps, "nccl_link_gbps": link, "seen_in": str(s.quote), "per": "link"}
    if link is not None and NORMAL_SHARE * link <= fig.gbps <= ABOVE * NVLINK_SPEC_LINK_GBPS:
        msg = f"{fig.text} a link on {m.name} ({WEAKER}): normal for this hardware: {fig.gbps / link:.2f} of the "
        msg += f"{link:g} GB/s NCCL's model credits one NVLink here, with both directions in use; {spec}"
        return _info("TD021", "nvlink", msg, ev)
    msg = f"{fig.text} a link on {m.name} ({WEAKER}): a figure of one link, not of the GPU; NCCL's model credits "
    msg += f"{link:g} GB/s a link; " if link else "one link an unknown rate; "
    msg += f"{spec}: cannot tell from words alone; post nccl-tests' output and `nvidia-smi nvlink -s`"
    return _info("TD022", "nvlink", msg, ev)


def _misread(
    s: StatedRun, hardware: str, how: str, v: float, ring: float, expected: str, ev: Mapping[str, object]
) -> Finding:
    """A figure the reporter calls high that the expectation finds short: one of the two readings is wrong
    (a count of GPUs or NICs, what the figure is), so nothing is said of a cause."""
    msg = f"{_header(s, hardware)}: {how}, {v / ring:.2f} of {expected}, where the reporter calls it high: cannot "
    msg += "tell (the sentences may not say how many GPUs or NICs the run used, or what the figure is); post "
    msg += "nccl-tests' output with its header and NCCL_DEBUG=INFO output"
    return _info("TD022", s.op or "all_reduce", msg, ev)


def _across_ring(f: Facts, s: StatedRun, op: str) -> tuple[float, str, int, int] | None:
    """NCCL's ring busbw for ``op`` across the nodes the sentences state, over the NICs they name: (busbw, the
    NICs as said, nodes, GPUs a node); None where the NICs' rate is not stated."""
    node_gbps = s.node_gbps
    if node_gbps is None:
        return None
    n_nodes = s.nodes or 2
    # the launch's ranks over the nodes before the GPUs a host lists: a job may use one GPU of eight
    per_node = s.per_node or launched_per_node(f, n_nodes) or f.gpus_per_node or 8  # unsaid: 8, for the ring's steps
    pred = None
    if s.model is not None and s.per_node:
        got = expect_collective(replace(f, model=s.model, gpus_per_node=per_node),
                                Measured(op, PLATEAU_BYTES, 0.0, per_node, 1, s.quote))  # fmt: skip
        if got is not None and got.layout is not None:
            lay = replace(got.layout, nic_gbps=node_gbps)
            pred = next(iter(predict_layout(lay, n_nodes, (op,))), None)
    if pred is None:
        fill = channel_fill(node_gbps, SPEEDS_INTER_SM90)
        b = Bottleneck(node_gbps, fill, f"the node's NICs: {node_gbps:g} GB/s", ())
        pred = next(iter(predict_from(b, per_node, n_nodes, (op,))), None)
    if pred is None:
        return None
    return pred.busbw_gbps, f"{s.nic_text}: {node_gbps:g} GB/s a node", n_nodes, per_node


# send/recv to one peer at this share or more of the same post's collective is NCCL's per-peer channels at work
PEER_SHARE = 0.4


def _across(f: Facts, s: StatedRun) -> ProseJudged:
    op = s.op or "all_reduce"  # the model's op where none is said: busbw of the ring ops is one figure
    nodes = s.nodes
    if s.nic_kind in ("TCP", "Ethernet"):
        msg = f"{_header(s, 'TCP')}: over TCP, NCCL's socket transport gives the slowest stream's rate times its "
        msg += "streams, so the line rate is a ceiling, not what to expect: not judged; post `iperf3 -P N` per "
        msg += "stream and NCCL_DEBUG=INFO output (the sockets and threads it opened)"
        return ProseJudged(findings=(_info("TD022", op, msg, {"seen_in": str(s.quote)}),))
    node_gbps = s.node_gbps
    if node_gbps is None:
        said = "posted as images" if s.images else "not stated"
        msg = (
            f"{s.op or 'the run'} at {s.figure.text if s.figure else ''} across nodes not judged: the NICs are {said} "
        )
        msg += f"({WEAKER}); post `ibstat` and `nvidia-smi topo -m` of a node"
        return ProseJudged(findings=(_info("TD022", op, msg, {"seen_in": str(s.quote)}),))
    got_ring = _across_ring(f, s, op)
    if got_ring is None:
        return ProseJudged()
    ring, nic, n_nodes, per_node = got_ring
    v, how = _busbw(s, per_node * n_nodes)
    expected = f"the {ring:.1f} GB/s busbw NCCL's ring reaches over {nic} (NCCL's inter-node channel speeds)"
    where = f"{n_nodes} nodes" if nodes else "nodes (how many is not stated)"
    hardware = f"{where} x {per_node} GPUs" if s.per_node else where
    ev = {"measured_gbps": round(v, 1), "expected_gbps": ring, "nic_gbps_per_node": node_gbps, "read_as": how,
          "seen_in": str(s.quote), "from": "the reporter's words"}  # fmt: skip
    notes = spec_notes(replace(s, model=None), ring)
    tree_top = node_gbps * _factor("all_reduce", max(per_node * 2, 2)) if s.per_node else 2 * node_gbps
    two = nodes in (2, None) and op == "all_reduce"
    if (s.bound == "above" and v >= 0.95 * ring) or v > ABOVE * ring:
        if two and (s.bound == "above" or v <= ABOVE * tree_top):
            msg = f"{_header(s, hardware)}: normal for this hardware: busbw above the NICs' rate ({expected}) is "
            msg += "what NCCL's tree gives on two nodes: the network carries the algbw, not the busbw, so "
            msg += "all_reduce's busbw can reach up to 2 (n - 1) / n of the NICs' rate; NCCL_ALGO=Ring measures "
            msg += "the network itself" + ("" if nodes else " (on more than two nodes, this would need more NICs)")
            return ProseJudged(findings=(_info("TD021", op, msg, ev),))
        msg = f"{_header(s, hardware)}: {how}, above what {nic} carry ({expected}): cannot tell (more NICs than "
        msg += "stated, or in-network reduction: SHARP / CollNet); post `ibstat` and NCCL_DEBUG=INFO "
        msg += "NCCL_DEBUG_SUBSYS=INIT,NET,TUNING output"
        return ProseJudged(findings=(_info("TD022", op, msg, ev),))
    if v >= NORMAL_SHARE * ring and s.dual_port and v < NORMAL_SHARE * 2 * ring:
        msg = f"{_header(s, hardware)}: {how}, {v / ring:.2f} of {expected}, but the NICs are said to have two ports: "
        msg += f"with both ports in use a node carries twice that, and {v / (2 * ring):.2f} of it is short: cannot "
        msg += "tell which; post `ibstat` (each port, its state and rate), NCCL's topology dump (NCCL_TOPO_DUMP_FILE="
        msg += "system.xml: each NIC's speed as NCCL takes it) and NCCL_DEBUG=INFO output (`NET/IB : Using`)"
        return ProseJudged(findings=(_info("TD022", op, msg, ev),))
    if v >= NORMAL_SHARE * ring:
        msg = f"{_header(s, hardware)}: normal for this hardware: {how}, {v / ring:.2f} of {expected}"
        msg += "".join(f"; {n}" for n in notes)
        return ProseJudged(findings=(_info("TD021", op, msg, ev),))
    if s.called_high:
        return ProseJudged(findings=(_misread(s, hardware, how, v, ring, expected, ev),))
    if op == "sendrecv" and (ref := s.other_op) is not None and PEER_SHARE * ref.gbps <= v <= ref.gbps:
        msg = f"{_header(s, hardware)}: normal for NCCL: {how}, {v / ref.gbps:.2f} of the {ref.op} the post states "
        msg += f"on the same network ({ref.text}): send/recv between two ranks of different nodes runs on "
        msg += "NCCL_NCHANNELS_PER_NET_PEER channels (2 by default), fewer than a collective spreads over the NICs, "
        msg += "so one pair reaches less than the collective; raise NCCL_NCHANNELS_PER_NET_PEER to measure the peak"
        return ProseJudged(findings=(_info("TD021", op, msg, ev | {"compared_with": ref.text}),))
    basis = f"NCCL's ring over {nic}, at its inter-node channel speeds; {how}, {WEAKER}"
    basis += "".join(f"; {n}" for n in notes)
    if s.shared:
        basis += "; the reporter says other traffic shares the network, which takes its share of it"
    sym = Symptom("collective", op, v, ring, basis, s.size_bytes or 0, n_nodes, s.quote, per_node * n_nodes)
    return ProseJudged(symptoms=(sym,))
