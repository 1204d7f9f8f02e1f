"""How a job scales, as the reporter's words state it (evidence/scaling.py), judged: a shortfall across nodes
against the network between them (TD988), more GPUs of one node no faster than fewer against whether they have
peer-to-peer (TD989), and a job slow only with one GPU in it (TD990). Every answer rests on the reporter's words,
and says so.

Scaling is read from two speeds of one kind at two counts. Per GPU the work of a step is the framework's batch
per GPU, kept as the count changes, so a step's time should stay (efficiency = t1 / tN); a rate per GPU should
stay (rN / r1); a rate of the whole job should grow with the count ((rN / N) / (r1 / 1)); a fixed amount of work
(an epoch, the run, an ETA) should take 1 / N of the time ((t1 x 1) / (tN x N)).

The network's need, from NCCL's own model and the all-reduce's bytes: data parallelism all-reduces the gradients
every step, and across nodes NCCL's ring moves 2 (n - 1) / n of their bytes over each node's NICs; NCCL rates a
100 Gb/s NIC and a PCIe Gen3 x16 link alike at 12 GB/s (graph/topo.h NET_BW, PCI_BW), so a network below 100 Gb/s
is slower than every link inside a node and bounds the step. Sharded data parallelism (ZeRO-3, FSDP) gathers the
parameters as well: about three times the bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from topodoctor.diagnosis.evidence_codes import BY_CODE
from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.evidence_scaling import LinkSaid, ScalingSaid, SpeedSaid
from topodoctor.model.findings import Finding, Severity
from topodoctor.topology.gpu_models import GpuModel, model_of

WEAKER = "from the reporter's words, weaker evidence than a tool's output"
NET_NEEDED_GBIT_S = 100.0  # NCCL's NET_BW and PCI_BW, 12 GB/s: below it the network is the slowest link of the run
SHORT = 0.5  # below half of linear scaling, the exchange costs more than the added GPUs give
FP16_BYTES_PER_BILLION = 2e9
_ORDINAL = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
_NODE_LINKS = ("ethernet", "infiniband", "efa", "roce", "network")
ASK_NET = (
    "the interconnect between the nodes (its kind and rate: `ibstat`, or `ethtool` of the interface NCCL uses) and "
    "NCCL_DEBUG=INFO output of a rank, with its NET/ lines (`NET/IB : Using` or `NET/Socket`)"
)


def _finding(code: str, severity: Severity, subject: str, message: str, evidence: Mapping[str, object],
             fix: str = "") -> Finding:  # fmt: skip
    c = BY_CODE[code]
    return Finding(code, c.name, severity, subject, message, fix or c.how, {**evidence, "from": "the reporter's words"})


def merged(f: Facts) -> ScalingSaid | None:
    """Every input's scaling claims as one."""
    said = [p.scaling for p in f.prose if p.scaling is not None]
    if not said:
        return None
    swept = next((s for s in said if s.slow_gpu is not None or s.good_up_to is not None), said[0])
    return ScalingSaid(
        said[0].piece, tuple(x for s in said for x in s.speeds), tuple(x for s in said for x in s.links),
        any(s.worse_with_nodes for s in said), any(s.worse_with_gpus for s in said), swept.good_up_to,
        swept.slow_from, swept.slow_gpu, swept.slow_gpu_text,
        next((s.parallel for s in said if s.parallel), ""), any(s.distributed for s in said),
    )  # fmt: skip


def efficiency(a: SpeedSaid, na: int, b: SpeedSaid, nb: int) -> float:
    """The share of linear scaling from ``a`` on ``na`` (GPUs or nodes) to ``b`` on ``nb``."""
    if a.kind == "rate":
        return b.value / a.value if a.per_gpu and b.per_gpu else (b.value / nb) / (a.value / na)
    if a.kind == "step":
        return a.value / b.value
    return (a.value * na) / (b.value * nb)


def _worst(speeds: tuple[SpeedSaid, ...], by: str) -> tuple[float, SpeedSaid, int, SpeedSaid, int] | None:
    """The worst scaling between two speeds of one unit at two counts of ``by`` ("nodes" or "gpus")."""
    best: tuple[float, SpeedSaid, int, SpeedSaid, int] | None = None
    for a in speeds:
        for b in speeds:
            na, nb = getattr(a, by), getattr(b, by)
            if a.unit != b.unit or a.kind != b.kind or not na or not nb or nb <= na or a.value <= 0 or b.value <= 0:
                continue
            if by == "gpus" and (a.nodes or 1) != (b.nodes or 1):
                continue
            eff = efficiency(a, na, b, nb)
            if best is None or eff < best[0]:
                best = (eff, a, na, b, nb)
    return best


def _gb_step(rate_gbit_s: float, sharded: bool) -> str:
    """What a step's all-reduce costs at that rate, for a billion fp16 parameters."""
    volume = 2 * FP16_BYTES_PER_BILLION * (3 if sharded else 1)  # ring: 2 (n - 1) / n, about 2, of the bytes
    what = "parameters and gradients (sharded: about three times the gradients)" if sharded else "gradients"
    return f"a billion fp16 parameters' {what} take about {volume * 8 / (rate_gbit_s * 1e9):.1f} s a step over it"


def _model(f: Facts) -> GpuModel | None:
    return f.model or next((m for p in f.prose if p.gpu_model and (m := model_of(p.gpu_model))), None)


def _nodes_finding(f: Facts, s: ScalingSaid, how: str) -> Finding:
    """TD988: the shortfall across nodes, with the network named where its rate is stated and slow."""
    net = [x for x in s.links if x.kind in _NODE_LINKS]
    rates = [x for x in net if x.gbit_s]
    said_nic = next((p for p in f.prose if p.nic_gbit_s and p.nic_kind), None)
    sharded = s.parallel == "sharded"
    ib_off = f.settings.get("NCCL_IB_DISABLE")
    sockets = any(n.line.what == "socket" for n in f.net)
    ev: dict[str, object] = {"scaling": how, "links": [x.text for x in net]}
    if ib_off is not None and ib_off[0].strip() not in ("", "0"):
        msg = f"NCCL_IB_DISABLE={ib_off[0]} keeps NCCL off InfiniBand: it runs over sockets (NET/Socket), {how}"
        return _finding("TD988", "warning", "network", msg, {**ev, "setting": str(ib_off[1])},
                        "Unset NCCL_IB_DISABLE (or set it to 0) where the nodes have InfiniBand or RoCE, and check "
                        "`NET/IB : Using` in NCCL_DEBUG=INFO output.")  # fmt: skip
    slow = min(rates, key=lambda x: x.gbit_s or 0.0) if rates else None
    if slow is not None and slow.gbit_s is not None and slow.gbit_s < NET_NEEDED_GBIT_S:
        kind = {"network": "", "ethernet": " Ethernet"}.get(slow.kind, f" {slow.kind}")
        msg = f"the inter-node network ({slow.gbit_s:g} Gb/s{kind or ' Ethernet'}, {slow.text!r}) is slower than "
        msg += f"every link inside a node (NCCL rates 100 Gb/s and PCIe Gen3 x16 at 12 GB/s): {how}; "
        msg += _gb_step(slow.gbit_s, sharded) + f", against {2 * FP16_BYTES_PER_BILLION * 8 / 200e9:.2f} s over "
        msg += "a 200 Gb/s InfiniBand or EFA NIC"
        return _finding("TD988", "warning", "network", msg, {**ev, "gbit_s": slow.gbit_s})
    ethernet = next((x for x in net if x.kind == "ethernet"), None)
    if slow is None and ethernet is not None:
        msg = f"{how}, over Ethernet ({ethernet.text!r}, its rate not stated): the inter-node network first, since "
        msg += "Ethernet below 100 Gb/s is slower than every link inside a node (NCCL rates 100 Gb/s and PCIe Gen3 "
        msg += f"x16 at 12 GB/s; {_gb_step(10.0, sharded)} at 10 Gb/s): cause not found; then NCCL on sockets where "
        msg += "InfiniBand exists (NCCL_IB_DISABLE=1, or no verbs device found: `NET/Socket`); to decide, post "
        msg += ASK_NET
        return _finding("TD988", "warning", "network", msg, {**ev, "post": [ASK_NET]})
    fast = slow or (LinkSaid(0, "infiniband", said_nic.nic_gbit_s, False, said_nic.nic_kind) if said_nic else None)
    if fast is not None or sockets:
        rate = f"{fast.text} ({fast.gbit_s:g} Gb/s)" if fast is not None and fast.gbit_s else "the network named"
        msg = f"{how}, over {rate}, fast enough for the GPUs' traffic: cause not found; candidates: NCCL on sockets "
        msg += "although InfiniBand exists (NCCL_IB_DISABLE=1, or no verbs device found: `NET/Socket` in "
        msg += "NCCL_DEBUG=INFO), GPUDirect RDMA off (`GDRDMA` absent from the NET/IB lines), one NIC for all GPUs; "
        msg += f"to decide, post {ASK_NET}"
        return _finding("TD988", "warning", "network", msg, ev)
    msg = f"{how}: cause not found, the interconnect between the nodes is not stated; cannot tell among: a slow "
    msg += "inter-node network (Ethernet or TCP below 100 Gb/s: " + _gb_step(10.0, sharded) + " at 10 Gb/s), NCCL "
    msg += "on sockets where InfiniBand exists (NCCL_IB_DISABLE=1, or no verbs device found: `NET/Socket` in its "
    msg += f"INFO log), GPUDirect RDMA off; to decide, post {ASK_NET}"
    return _finding("TD988", "warning", "network", msg, {**ev, "post": [ASK_NET]})


def _node_finding(f: Facts, s: ScalingSaid, how: str, far: bool) -> Finding:
    """TD989: more GPUs of one node no faster; normal without P2P, ACS and the IOMMU first with it on PCIe."""
    m = _model(f)
    no_nvlink = next((x for x in s.links if x.kind == "nvlink" and x.absent), None)
    pcie = next((x for x in s.links if x.kind == "pcie"), None)
    what = {"tensor": "tensor parallelism exchanges activations every layer",
            "sharded": "sharded data parallelism gathers the parameters every step",
            "data": "data parallelism all-reduces the gradients every step"}.get(
        s.parallel, "every step exchanges tensors between the GPUs (activations under tensor parallelism, the "
        "gradients under data parallelism)")  # fmt: skip
    ev: dict[str, object] = {"scaling": how, "gpu_model": m.name if m else "", "links": [x.text for x in s.links]}
    if (m is not None and not m.p2p_pcie) and (m.nvlink_links == 0 or no_nvlink is not None or m.fabric == "bridge"):
        why = f"{m.name} has no peer-to-peer over PCIe (the GeForce driver)"
        why += f" and its NVLink is not in use ({no_nvlink.text!r})" if no_nvlink else ""
        msg = f"{how}: normal for this hardware: {why}, so every exchange between the GPUs goes through host memory "
        msg += f"(NCCL's SHM transport, a few GB/s a GPU over PCIe); {what}, and where a step's work is small the "
        msg += "exchange costs more than the other card adds. Expected: under linear scaling, and no faster than "
        msg += "one GPU where the step is short"
        fix = ("Nothing to fix: no setting gives these GPUs peer-to-peer. An NVLink bridge where the card takes one, "
               "a larger batch per GPU, or data rather than tensor parallelism gains more.")  # fmt: skip
        return _finding("TD989", "info", "scaling", msg, ev, fix)
    if no_nvlink is not None and m is None:
        msg = f"{how}, NVLink not in use ({no_nvlink.text!r}): the GPUs meet over PCIe, and {what}; normal on GPUs "
        msg += "without peer-to-peer over PCIe (GeForce), a fault on those with it: post `nvidia-smi -L` and "
        msg += "p2pBandwidthLatencyTest (its P2P=Enabled matrix against P2P=Disabled) to tell which"
        return _finding("TD989", "info", "scaling", msg, ev)
    ranked = ("P2P redirected through the root complex by PCIe ACS on the switch or root ports, or by the IOMMU "
              "(post `lspci -vvv | grep ACSCtl`: SrcValid+ or ReqRedir+ on a bridge above the GPUs is it)",
              "P2P refused or unsupported (a VM, a cloud instance; post p2pBandwidthLatencyTest: P2P=Enabled no "
              "faster than P2P=Disabled)",
              "the GPUs across CPU sockets (post `nvidia-smi topo -m`: SYS)")  # fmt: skip
    if pcie is not None and far and (m is None or m.p2p_pcie):
        msg = f"{how}: the GPUs together are slower than one alone, far below what PCIe allows ({what}, and over "
        msg += "P2P-capable PCIe that exchange costs less than a whole step of one GPU): cause not found; candidates, "
        msg += "first the likeliest: "
        msg += "; ".join(ranked)
        return _finding("TD989", "warning", "scaling", msg, {**ev, "candidates": list(ranked)})
    msg = f"{how}: cannot tell whether that is this hardware or a fault ({what}; the GPUs' link is "
    msg += f"{'PCIe' if pcie else 'not stated'}); candidates: " + "; ".join(ranked) + "; or normal, where the GPUs "
    msg += "have no peer-to-peer"
    return _finding("TD989", "info", "scaling", msg, {**ev, "candidates": list(ranked)})


def _gpu_finding(s: ScalingSaid) -> Finding | None:
    """TD990: the job slow only with one GPU in it."""
    if s.slow_gpu is None:
        return None
    k = s.slow_gpu
    nth = _ORDINAL[k] if k < len(_ORDINAL) else f"#{k + 1}"
    if s.good_up_to is not None:
        msg = f"normal with up to {s.good_up_to} GPUs and slow from {s.slow_from} ({s.slow_gpu_text!r}; {WEAKER}): "
        msg += f"the {nth} GPU (GPU {k}, counting from 0 as CUDA does) is the first that slows it: one faulty GPU; "
    else:
        msg = f"the {nth} GPU (GPU {k}) is said to be the slow one ({s.slow_gpu_text!r}; {WEAKER}): one faulty GPU; "
    msg += f"run without it to confirm, and post `nvidia-smi -q -i {k}` and `dcgmi diag -r 3`"
    return _finding("TD990", "warning", f"gpu:{k}", msg, {"gpu": k, "words": s.slow_gpu_text})


def scaling_findings(f: Facts) -> list[Finding]:
    """What the words say of scaling, judged."""
    s = merged(f)
    if s is None:
        return []
    out: list[Finding] = []
    faulty = _gpu_finding(s)
    if faulty is not None:
        out.append(faulty)
    across = _worst(s.speeds, "nodes")
    if across is not None and across[0] < SHORT:
        eff, a, na, b, nb = across
        how = f"{b.text} on {nb} nodes against {a.text} on {na}: {eff:.2f} of linear scaling ({WEAKER})"
        out.append(_nodes_finding(f, s, how))
    elif across is None and s.worse_with_nodes:
        out.append(_nodes_finding(f, s, f"the job is said to be slower as nodes are added ({WEAKER})"))
    within = _worst(s.speeds, "gpus")
    if faulty is None and within is not None and (within[0] < SHORT or within[0] * within[4] / within[2] <= 1.0):
        eff, a, na, b, nb = within
        how = f"{b.text} on {nb} GPUs against {a.text} on {na}: {eff:.2f} of linear scaling ({WEAKER})"
        out.append(_node_finding(f, s, how, far=eff * nb / na < 1.0))
    elif faulty is None and within is None and s.worse_with_gpus and not (across or s.worse_with_nodes):
        out.append(_node_finding(f, s, f"more GPUs are said to be no faster than one ({WEAKER})", far=False))
    return out
