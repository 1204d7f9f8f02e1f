"""The known causes of a slow NCCL or peer-to-peer run that a host's description points to, when the
evidence names the host but shows nothing that decides among them: an AMD EPYC host, a virtual machine,
a bonded RoCE NIC, RoCE with no word of flow control, an NVSwitch host with no word of its fabric manager.
Words alone never name a cause: each kind gives its candidates, ranked, with what tells them apart and the
output that shows it, and the one output to post first (evidence_decide.py).

From the sources of their meaning:

- EPYC (NCCL's troubleshooting, "PCI Access Control Services" and "GPU Direct"; AMD's EPYC tuning guides
  for GPU hosts): the IOMMU translating every DMA unless it is off or in pass-through (iommu=pt), ACS on
  the root ports sending peer traffic up to the root complex, and the NPS setting, which sets how GPU
  traffic staged through host memory is spread over the memory controllers (NPS1: one NUMA node a socket;
  NCCL's maintainers point EPYC hosts to NPS4). Without P2P (GeForce) all traffic goes through host
  memory, so NPS comes first.
- A VM (NVIDIA's VM configuration guide, "ATS and ACS configuration"): GPUDirect in a guest needs ATS on
  the NICs and GPUs with ACS set to let it work, else peer and NIC traffic goes up to the root and halves;
  a guest's PCI tree is flat unless the topology is given to NCCL (NCCL_TOPO_FILE), so NCCL cannot pair a
  GPU with the NIC under its switch; GPUDirect RDMA needs its module in the guest.
- A bonded RoCE NIC (`mlx5_bond_N`, RoCE LAG): one RDMA device over both ports, where mlx5 gives each
  queue pair one port, so NCCL's default of one QP a connection (NCCL_IB_QPS_PER_CONNECTION=1) drives one
  port of the two; ib_write_bw with one QP against two shows it.
- RoCE (NCCL's troubleshooting, "RoCE"): RDMA over Ethernet needs a lossless class, PFC or ECN on the NICs
  and switches; without it packets drop under load and the rate falls far below ib_write_bw's.
- An NVSwitch host (NVIDIA Fabric Manager's guide): the fabric manager sets up the NVSwitch routes; until
  its state is Completed the GPUs' NVLinks do not carry peer traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.diagnosis.evidence_decide import (
    ACS_IOMMU,
    ATS_VM,
    BOND_QP,
    DMESG_IOMMU,
    ETHTOOL_S,
    FABRIC,
    GDR,
    IB_QPS,
    IOMMU,
    LSPCI,
    LSPCI_ATS,
    NCCL_LOG,
    NPS,
    NUMA,
    NVLINK,
    NVLINK_DOWN,
    ROCE_FLOW,
    SMI_FABRIC,
    TOPO_DUMP,
    VM_TOPO,
)
from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.evidence_prose import Checked, HostKind
from topodoctor.topology.gpu_models import MODELS, GpuModel

NAMES: dict[HostKind, str] = {
    "epyc": "an AMD EPYC host",
    "vm": "a virtual machine (GPUs or NICs passed through)",
    "bond": "a bonded RoCE NIC",
    "roce": "a RoCE network with no word of its flow control",
    "nvswitch": "an NVSwitch host with no word of its fabric manager",
}


@dataclass(frozen=True)
class HostCause:
    """One cause a kind of host is known for: its candidate key, what it is, what tells it apart, the output."""

    key: str
    what: str
    tells: str
    post: str
    checked: Checked | None = None  # the reporter's word that it was already looked at or set


_IOMMU = HostCause(
    IOMMU,
    "the IOMMU translating the GPUs' DMA (not off, not in pass-through)",
    "`AMD-Vi` with a Translated default domain and no iommu=pt",
    DMESG_IOMMU,
    "iommu",
)
_ACS = HostCause(
    ACS_IOMMU,
    "ACS on the root ports sending peer traffic up to the root complex",
    "`ACSCtl: SrcValid+ ... ReqRedir+` on the bridges above the GPUs",
    LSPCI,
    "acs",
)
_NPS = HostCause(
    NPS,
    "the socket kept one NUMA node (NPS1): GPU traffic through host memory spreads badly",
    "one NUMA node a socket where NPS4 gives four",
    NUMA,
    "nps",
)
CAUSES: dict[HostKind, tuple[HostCause, ...]] = {
    "epyc": (_IOMMU, _ACS, _NPS),
    "vm": (
        HostCause(ATS_VM, "ATS off on the NICs or GPUs while ACS sends their traffic to the root (GPUDirect in a VM)",
                  "ATSCtl without Enable+ on a NIC, ACSCtl with ReqRedir+ on its bridge", LSPCI_ATS, "ats"),
        HostCause(VM_TOPO, "the guest's flat PCI tree: NCCL cannot pair each GPU with the NIC under its switch",
                  "every GPU and NIC straight under the root, where the host has switches (fix: NCCL_TOPO_FILE)",
                  TOPO_DUMP),
        HostCause(GDR, "GPUDirect RDMA off in the guest", "`via NET/IB/N` without `/GDRDMA`", NCCL_LOG, "gdr"),
    ),
    "bond": (
        HostCause(BOND_QP, "one queue pair a connection drives one port of the bond (NCCL_IB_QPS_PER_CONNECTION=1)",
                  "`-q 2` near twice `-q 1`; then NCCL_IB_QPS_PER_CONNECTION=2", IB_QPS),
    ),
    "roce": (
        HostCause(ROCE_FLOW, "no flow control (PFC or ECN) on the RoCE fabric: packets drop under load",
                  "pause or discard counters climbing during the run", ETHTOOL_S, "flow-control"),
    ),
    "nvswitch": (
        HostCause(FABRIC, "the fabric manager not running or not done: NVLinks through the NVSwitches idle",
                  "Fabric State other than Completed, or Status other than Success", SMI_FABRIC, "fabric-manager"),
        HostCause(NVLINK_DOWN, "NVLinks down against the model", "links inactive in the list", NVLINK),
    ),
}  # fmt: skip


def host_kinds(f: Facts) -> tuple[HostKind, ...]:
    """The kinds of host the evidence names: the sentences' words, a bonded or RoCE device a tool listed."""
    kinds: list[HostKind] = [k for c in f.prose for k in c.hosts]
    if any("bond" in n.name for n in f.nics):
        kinds.append("bond")
    if any(n.link_layer.lower() == "roce" for n in f.nics):
        kinds.append("roce")
    if "bond" in kinds and "roce" not in kinds:
        kinds.append("roce")  # a bond of RDMA ports is RoCE: InfiniBand has no bonding of its ports
    return tuple(dict.fromkeys(kinds))


def _checked(f: Facts) -> set[Checked]:
    return {k for c in f.prose for k in c.checked}


_HGX_DIRECT = 4  # the most SXM GPUs an HGX board joins without NVSwitch


def host_causes(f: Facts, across: bool) -> list[tuple[HostKind, HostCause, bool]]:
    """The causes the host's kinds point to, most telling first, each with whether the reporter says it was
    already looked at (kept, after the others: the output shows whether the setting took). ``across``: the run
    crosses nodes, where the fabric manager of one node's NVSwitches is not a cause."""
    checked = _checked(f)
    model: GpuModel | None = f.model or next((m for c in f.prose for m in MODELS if m.name == c.gpu_model), None)
    out: list[tuple[HostKind, HostCause, bool]] = []
    # HGX boards of four SXM GPUs (A100, H100, H200) join them by direct NVLinks: no NVSwitch, no fabric manager
    count = next((c.gpu_count for c in f.prose if c.gpu_count), None) or (len(f.gpus) or None)
    four = model is not None and model.name.endswith("SXM") and count is not None and count <= _HGX_DIRECT
    for kind in host_kinds(f):
        if kind == "nvswitch" and (across or four or (model is not None and model.fabric != "nvswitch")):
            continue  # across nodes, or a model without NVSwitch (DGX-1's mesh): another host named in comparison
        causes = CAUSES[kind]
        if kind == "epyc" and model is not None and not model.p2p_pcie:
            causes = (_NPS, _IOMMU, _ACS)  # no P2P: every transfer goes through host memory
        for cause in causes:
            if kind in ("roce", "nvswitch") and cause.checked in checked:
                continue  # flow control or the fabric manager named: the reporter speaks of it, no word missing
            out.append((kind, cause, cause.checked in checked))
    ranked = [x for x in out if not x[2]] + [x for x in out if x[2]]
    keys: set[str] = set()
    kept = []
    for x in ranked:
        if x[1].key not in keys:
            keys.add(x[1].key)
            kept.append(x)
    return kept


def described(kinds: tuple[HostKind, ...]) -> str:
    """The host as its kinds name it: "an AMD EPYC host and a virtual machine"."""
    names = [NAMES[k] for k in kinds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def candidate_line(cause: HostCause, said: bool) -> str:
    """One candidate as a finding lists it: what, what tells it apart, where, and the reporter's word."""
    line = f"{cause.what} ({cause.tells}: post {cause.post})"
    return line + (" (the reporter says this was set; the output shows whether it took)" if said else "")
