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

A network the reporter's monitor shows nearly idle (under a tenth of its stated line rate) while the job is
slower across nodes is not what bounds it by bandwidth: the exchange waits on each message's round trip
(a small model all-reduces many small tensors every step, each a few collectives whose time is their latency;
NCCL's tuning model, tuning.cc, gives every network step a fixed latency beside its bandwidth term, and TCP
through the kernel's stack adds its own per message, where RoCE and InfiniBand place data directly): latency,
fixed by fewer and larger messages or a low-latency network.
"""

from __future__ import annotations

from collections.abc import Mapping

from topodoctor.diagnosis.evidence_codes import BY_CODE
from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.evidence.prose_words import TRAFFIC
from topodoctor.model.evidence_scaling import LinkSaid, ScalingSaid, SpeedSaid
from topodoctor.model.findings import Finding, Severity
from topodoctor.topology.gpu_models import GpuModel, model_of

WEAKER = "from the reporter's words, weaker evidence than a tool's output"
NET_NEEDED_GBIT_S = 100.0  # NCCL's NET_BW and PCI_BW, 12 GB/s: below it the network is the slowest link of the run
SHORT = 0.5  # below half of linear scaling, the exchange costs more than the added GPUs give
IDLE_SHARE = 0.1  # a network a monitor shows under this share of its line carries no bandwidth-bound exchange
LATENCY_FIX = (
    "Fewer and larger messages: fuse the gradients into larger all-reduces (Horovod's HOROVOD_FUSION_THRESHOLD and "
    "HOROVOD_CYCLE_TIME, torch DDP's bucket_cap_mb), a larger batch per step or gradient accumulation; or a "
    "low-latency network between the nodes (RoCE or InfiniBand, with NCCL on `NET/IB`)."
)
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
    idle = _idle_traffic(f, slow.gbit_s) if slow is not None and slow.gbit_s else None
    if slow is not None and slow.gbit_s is not None and idle is not None:
        text, share = idle
        msg = f"latency, not the network's bandwidth: {how}, while the network carries {text} ({share:.0%} of the "
        msg += f"{slow.gbit_s:g} Gb/s line, {slow.text!r}): the exchange waits on each message's round trip, as a "
        msg += "small model's many small all-reduces do over TCP on Ethernet, not on the line's rate; then, if fusing "
        msg += "the messages does not help, something else between the steps (the framework's coordination, the CPU)"
        return _finding("TD988", "warning", "network", msg, {**ev, "gbit_s": slow.gbit_s, "traffic": text,
                                                              "share": round(share, 4)}, LATENCY_FIX)  # fmt: skip
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
    ib = next((x for x in net if x.kind == "infiniband"), None)
    if slow is None and ib is not None and not sockets:
        return _ib_unrated(f, how, ib, ev)
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


def _ib_unrated(f: Facts, how: str, ib: LinkSaid, ev: dict[str, object]) -> Finding:
    """TD988 over InfiniBand said without its rate: any InfiniBand carries a data-parallel step's gradients at a
    small share of the step, so a shortfall this large is NCCL not on its verbs, first. NCCL loads libibverbs and
    the device's provider at init (ibvwrap.cc, net_ib.cc: `Failed to open libibverbs.so`, `NET/IB : No device
    found`) and without them falls back to its socket transport (`Using network Socket`), which, on the IPoIB
    interface (ib0, as NCCL_SOCKET_IFNAME=ib0 names it), runs TCP over the same HCA; a container's image lacks
    them unless built with the Mellanox OFED or rdma-core user space, and the container needs /dev/infiniband."""
    ifname = f.settings.get("NCCL_SOCKET_IFNAME")
    ipoib = ifname is not None and ifname[0].strip().lower().startswith("ib")
    msg = f"{how}, over InfiniBand ({ib.text!r}, its rate not stated), which carries the gradients at a small share "
    msg += "of a step: cause not found; first NCCL on TCP sockets instead of InfiniBand's verbs (RDMA): in a "
    msg += "container whose image lacks the verbs user space (libibverbs with the mlx5 provider: MOFED or rdma-core) "
    msg += "or is started without /dev/infiniband, NCCL finds no IB device and runs over sockets"
    msg += f", here on the IPoIB interface (NCCL_SOCKET_IFNAME={ifname[0]})" if ipoib and ifname else ""
    msg += "; then GPUDirect RDMA off (`GDRDMA` absent from the `via NET/IB` lines); to decide, post NCCL_DEBUG=INFO "
    msg += "output of a rank (`NET/IB : Using` or `Using network Socket`, `NET/Socket : Using`)"
    fix = ("Give NCCL the InfiniBand verbs: build the image with the Mellanox OFED (or rdma-core) user space, start "
           "the container with --device=/dev/infiniband (and --cap-add=IPC_LOCK), and check that NCCL_DEBUG=INFO "
           "prints `NET/IB : Using` rather than `NET/Socket`.")  # fmt: skip
    return _finding("TD988", "warning", "network", msg, {**ev, "post": ["NCCL_DEBUG=INFO output of a rank"]}, fix)


def _idle_traffic(f: Facts, line_gbit_s: float) -> tuple[str, float] | None:
    """A monitor's reading of the network's traffic (evidence/prose.py keeps it as another tool's figure) under
    IDLE_SHARE of the line rate, with its share; None where none is stated."""
    for p in f.prose:
        for fig in p.figures:
            if fig.role == "measured" and fig.tool and TRAFFIC.search(fig.tool) and fig.gbps > 0:
                share = fig.gbps * 8 / line_gbit_s
                if share < IDLE_SHARE:
                    return fig.text, share
    return None


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
    if m is not None and m.fabric == "nvswitch" and s.parallel == "tensor" and no_nvlink is None:
        msg = f"{how}: normal for tensor parallelism on {m.name}: every layer all-reduces its activations across the "
        msg += "group, a cost per token that does not shrink as the group grows, while each GPU's share of the work "
        msg += "does; past the group a model needs, a larger one gains less than it costs, so replicas of a smaller "
        msg += "group (two of TP=4 against one of TP=8) serve more. Expected: under linear scaling over NVSwitch"
        fix = (
            "Nothing to fix in the host: use the smallest tensor-parallel group the model fits in and replicas "
            "(data parallelism) for the rest; `all_reduce_perf` on the GPUs checks the NVLinks if in doubt."
        )
        return _finding("TD989", "info", "scaling", msg, {**ev, "normal": True}, fix)
    if (m is not None and not m.p2p_pcie) and (m.nvlink_links == 0 or no_nvlink is not None or m.fabric == "bridge"):
        why = f"{m.name} has no peer-to-peer over PCIe (the GeForce driver)"
        why += f" and its NVLink is not in use ({no_nvlink.text!r})" if no_nvlink else ""
        msg = f"{how}: normal for this hardware: {why}, so every exchange between the GPUs goes through host memory "
        msg += f"(NCCL's SHM transport, a few GB/s a GPU over PCIe); {what}, and where a step's work is small the "
        msg += "exchange costs more than the other card adds. Expected: under linear scaling, and no faster than "
        msg += "one GPU where the step is short"
        fix = ("Nothing to fix: no setting gives these GPUs peer-to-peer. An NVLink bridge where the card takes one, "
               "a larger batch per GPU, or data rather than tensor parallelism gains more.")  # fmt: skip
        return _finding("TD989", "info", "scaling", msg, {**ev, "normal": True}, fix)
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
