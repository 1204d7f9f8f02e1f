"""P2P rules (TD3xx): NVML P2P status, P2P missing on NVLink pairs, IOMMU, ACS redirection."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.graph import gpu_node
from topodoctor.probed import ProbeError
from topodoctor.rules.context import Context
from topodoctor.rules.registry import CannotCheck, Issue, rule

_REASONS = {
    "CHIPSET_NOT_SUPPORTED": "the chipset does not support P2P",
    "GPU_NOT_SUPPORTED": "the GPU model does not support P2P",
    "IOH_TOPOLOGY_NOT_SUPPORTED": "the PCIe topology (IOH / root complex) does not allow P2P",
    "DISABLED_BY_REGKEY": "the driver disabled P2P (registry key / module option)",
    "NOT_SUPPORTED": "P2P is not supported on this path",
    "UNKNOWN": "unknown",
}
ACS_SOURCE_VALIDATION, ACS_REQUEST_REDIRECT, ACS_COMPLETION_REDIRECT, ACS_UPSTREAM_FORWARDING = 0x1, 0x4, 0x8, 0x10


@rule(
    "TD301",
    "p2p-unavailable",
    "warning",
    fix="Consumer GPUs and some platforms cannot do P2P; NCCL falls back to host memory. If the driver "
    "disabled it (DISABLED_BY_REGKEY), remove the NVreg option that does so.",
)
def p2p_unavailable(ctx: Context) -> Iterator[Issue | CannotCheck]:
    """NVML reports P2P read or write between two GPUs as not OK, with its reason.

    A driver that disabled P2P is an error (a setting that someone can fix); a platform or GPU
    that cannot do it is a warning (NCCL will stage through host memory, slower but correct).
    """
    for pair in ctx.snap.pairs:
        if ctx.snap.gpu(pair.a).lost or ctx.snap.gpu(pair.b).lost:
            continue
        for direction, st in ((f"GPU{pair.a}->GPU{pair.b}", pair.p2p), (f"GPU{pair.b}->GPU{pair.a}", pair.p2p_reverse)):
            for what, value in (("read", st.read), ("write", st.write)):
                if isinstance(value, ProbeError):
                    yield CannotCheck(f"GPU{pair.a}-GPU{pair.b}", value)
                    break
                if isinstance(value, str) and value != "OK":
                    yield Issue(
                        f"GPU{pair.a}-GPU{pair.b}",
                        f"P2P {what} {direction} not available: {_REASONS.get(value, value)}",
                        {"status": value, "capability": what, "direction": direction},
                        severity="error" if value == "DISABLED_BY_REGKEY" else None,
                    )
                    break
            else:
                continue
            break


@rule(
    "TD302",
    "p2p-missing-on-nvlink",
    "error",
    fix="NVLink is up but P2P over it is not: a hardware or fabric fault. Check the fabric manager and "
    "`nvidia-smi topo -p2p n`; reset or service the GPUs.",
)
def p2p_missing_on_nvlink(ctx: Context) -> Iterator[Issue]:
    """A pair connected by NVLink reports NVLink P2P as not OK."""
    for (a, b), c in sorted(ctx.connections.items()):
        if c.cls != "NV":
            continue
        st = ctx.snap.p2p(a, b)
        if st.read == "DISABLED_BY_REGKEY" or st.write == "DISABLED_BY_REGKEY":
            continue  # a setting, reported by TD301
        if isinstance(st.nvlink, str) and st.nvlink != "OK":
            yield Issue(
                f"GPU{a}-GPU{b}",
                f"GPU{a}-GPU{b} share {c.nvlinks} NVLinks but NVLink P2P is {st.nvlink}",
                {"nvlinks": c.nvlinks, "p2p_nvlink": st.nvlink},
            )


@rule(
    "TD303",
    "iommu-translation",
    "warning",
    fix="On bare metal, boot with iommu=pt (intel_iommu=on iommu=pt / amd_iommu=on iommu=pt) so GPU P2P and "
    "RDMA are not remapped by the IOMMU.",
)
def iommu_translation(ctx: Context) -> Iterator[Issue]:
    """The IOMMU translates GPU DMA on a bare-metal host.

    In translation mode every P2P and GPUDirect RDMA transfer goes through the IOMMU, which can
    block P2P or cut its bandwidth; pass-through (identity) mode avoids it. In a VM the
    hypervisor's IOMMU is expected, so VMs are not flagged.
    """
    if ctx.snap.host.virtualization != "bare-metal" or ctx.snap.host.iommu != "on":
        return
    for g in ctx.live_gpus:
        kind = g.iommu_group_type
        if isinstance(kind, str) and kind.startswith("DMA"):
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} sits in an IOMMU group in translation mode ({kind})",
                {"iommu_group_type": kind},
            )


@rule(
    "TD304",
    "acs-redirect",
    "error",
    fix="Disable ACS redirection on the bridge (BIOS, or setpci at boot) for GPU P2P; it forces peer traffic "
    "up to the root complex.",
)
def acs_redirect(ctx: Context) -> Iterator[Issue | CannotCheck]:
    """ACS request or completion redirection is on in a bridge between two GPUs.

    With ACS P2P redirect on, a PCIe switch sends peer traffic up to the root complex instead
    of across the switch: P2P slows down or hangs. NVLink pairs are not affected.
    """
    import networkx as nx

    from topodoctor.graph import pcie_subgraph

    g = pcie_subgraph(ctx.graph)
    by_bridge: dict[str, list[str]] = {}
    for (a, b), c in sorted(ctx.connections.items()):
        if c.cls == "NV":
            continue
        try:
            path = nx.shortest_path(g, gpu_node(a), gpu_node(b))
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            continue
        for node in path:
            if g.nodes[node].get("kind") == "pcie_bridge":
                by_bridge.setdefault(g.nodes[node]["bus_id"], []).append(f"GPU{a}-GPU{b}")
    for bdf, pairs in sorted(by_bridge.items()):
        br = ctx.snap.bridge(bdf)
        if br is None:
            continue
        if isinstance(br.acs_ctrl, ProbeError):
            yield CannotCheck(f"bridge:{bdf}", br.acs_ctrl)
            continue
        if isinstance(br.acs_ctrl, int) and br.acs_ctrl & (ACS_REQUEST_REDIRECT | ACS_COMPLETION_REDIRECT):
            yield Issue(
                f"bridge:{bdf}",
                f"ACS redirection is on in bridge {bdf}; it slows P2P for {', '.join(pairs)}",
                {"acs_ctrl": hex(br.acs_ctrl), "pairs": pairs},
            )
