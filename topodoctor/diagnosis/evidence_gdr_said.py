"""The reporter cannot get GPUDirect RDMA on ("a problem with enabling GDR for my NIC"), or says the run is slower
with it on than off: questions of their own, answered with the causes NCCL's own checks name, whatever figure
stands beside them (TD026).

NCCL's IB transport uses GPUDirect RDMA for a GPU and a NIC when (net_ib.cc ``ncclIbGdrSupport`` and
graph/paths.cc ``ncclTopoCheckGdr``): the kernel has a peer-memory module (``nvidia_peermem``, the older
``nv_peer_mem``) or NCCL can register GPU memory through DMA-BUF (2.19+, a 5.12+ kernel and the driver's
support); and the GPU sits within NCCL_NET_GDR_LEVEL of the NIC on the PCI tree (PXB by default: the two
under one PCIe switch). Without the module it logs ``GPU Direct RDMA Disabled for HCA``; a GPU beyond the
level gets its transfers staged through host memory without a word of warning. That default stands because a
NIC's reads and writes of GPU memory through the CPU's root complex run slower than staging through host memory
on many hosts (NVIDIA's GPUDirect RDMA guide, "Supported Systems"): GDR forced past it (NCCL_NET_GDR_LEVEL,
NCCL_NET_GDR_READ) is slower than without."""

from __future__ import annotations

from topodoctor.core.text import numbered
from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.findings import Severity

NEAR = ("PIX", "PXB")  # within NCCL_NET_GDR_LEVEL's default (PXB)
MODULE = (
    "the peer-memory kernel module not loaded (nvidia_peermem, or nv_peer_mem before driver 470) and no DMA-BUF "
    "path: post `lsmod | grep -e nvidia_peermem -e nv_peer_mem` and NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "
    "output (its `GPU Direct RDMA Disabled for HCA` or `Enabled for HCA` lines)"
)
ACS = "ACS or the IOMMU on the PCIe switch the GPU and the NIC share, redirecting peer traffic (post `lspci -vvv`)"


def _placement(f: Facts) -> str:
    """Which GPUs a NIC's GDR can serve at NCCL's default level, where topo -m showed the NICs."""
    near = sorted({g for (g, _), path in f.nic_paths.items() if path in NEAR})
    every = sorted({g for g, _ in f.nic_paths})
    far = [g for g in every if g not in near]
    if not every:
        return "the GPU beyond NCCL_NET_GDR_LEVEL of the NIC (PXB by default: post `nvidia-smi topo -m`)"
    if not far:
        return "the GPU beyond NCCL_NET_GDR_LEVEL of the NIC: ruled out by topo -m, every GPU is within PXB of one"
    shown = ", ".join(f"GPU{g}" for g in far)
    what = f"the GPU beyond NCCL_NET_GDR_LEVEL of the NIC: {shown} reach their nearest NIC only through the host "
    what += "bridge or the sockets (topo -m), where NCCL does not use GPUDirect RDMA by default"
    return what + (f"; {', '.join(f'GPU{g}' for g in near)} share a PCIe switch with one" if near else "")


def gdr_said_findings(f: Facts) -> list[tuple[Severity, str, str, str, dict[str, object]]]:
    """(severity, subject, message, fix, evidence): the candidates where the reporter says GDR will not come on and
    no NCCL line shows it in use."""
    if not any("gdr-trouble" in c.checked for c in f.prose):
        return []
    if any(c.kind == "net" and c.gdr for c in f.conns):
        return []  # the log shows a connection via NET/.../GDRDMA: GDR is on where NCCL takes it
    if family := next((c.no_gdr for c in f.prose if c.no_gdr), ""):
        msg = f"the reporter cannot get GPUDirect RDMA on, and the instance named ({family}) has none: EC2 offers "
        msg += f"it only on its P instances from p4d on, so EFA traffic between {family} nodes is staged through "
        msg += "host memory by design; normal for this instance"
        fix = "Nothing to fix on this instance; for GPUDirect RDMA between nodes use a P instance (p4d, p5 or later)."
        return [("info", "network", msg, fix, {"instance": family})]
    first, placement = MODULE, _placement(f)
    order = [first, placement, ACS] if "ruled out" not in placement else [first, ACS]
    msg = "the reporter cannot get GPUDirect RDMA on; NCCL takes it where the kernel can register GPU memory for "
    msg += "the NIC and the two are close enough on the PCI tree. Candidates: " + numbered(order)
    if "ruled out" in placement:
        msg += f"; {placement}"
    fix = (
        "Load the module (`sudo modprobe nvidia-peermem`, and at boot), then check NCCL_DEBUG=INFO for "
        "`via NET/IB/N/GDRDMA`; for a GPU far from every NIC, NCCL_NET_GDR_LEVEL=SYS allows it at the cost of "
        "traffic through the host bridge."
    )
    return [("warning", "network", msg, fix, {"candidates": order})]


SLOWER = (
    "GPUDirect RDMA across the CPU: the GPU and the NIC under different PCIe switches (PHB, NODE or SYS in "
    "`nvidia-smi topo -m`), where the NIC's reads of GPU memory through the root complex run slower than NCCL's "
    "staging through host memory; NCCL keeps GDR off there by default (NCCL_NET_GDR_LEVEL=PXB), so a level "
    "forced past it loses (post `nvidia-smi topo -m` and the NCCL_NET_GDR_LEVEL / NCCL_NET_GDR_READ the run sets)",
    "ACS on the PCIe switch or root port between the GPU and the NIC, redirecting their traffic up to the root "
    "complex (post `lspci -vvv`: ACSCtl on the bridges above both)",
    "the NIC and the GPU on one PCIe switch with too little bandwidth above it for both directions at once "
    "(post NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH output: the `via NET/IB/N/GDRDMA` lines and the "
    "rings' paths)",
)


def gdr_slower_findings(f: Facts) -> list[tuple[Severity, str, str, str, dict[str, object]]]:
    """(severity, subject, message, fix, evidence): the candidates where the reporter says the run is slower with
    GPUDirect RDMA on than off."""
    if not any("gdr-slower" in c.checked for c in f.prose):
        return []
    order = list(SLOWER)
    if f.nic_paths and all(path in NEAR for path in f.nic_paths.values()):
        order = order[1:]  # every GPU shares a PCIe switch with a NIC: GDR does not cross the CPU
    msg = "the reporter says the run is slower with GPUDirect RDMA on than off; cause not found. Candidates, most "
    msg += "likely first: " + numbered(order)
    fix = (
        "Post `nvidia-smi topo -m` (the GPU's and the NIC's path) and NCCL_DEBUG=INFO output of both runs; where "
        "the GPU and the NIC meet only at the CPU, leave NCCL_NET_GDR_LEVEL unset (NCCL then stages through host "
        "memory) or use a GPU under the NIC's own PCIe switch."
    )
    return [("warning", "network", msg, fix, {"candidates": order})]
