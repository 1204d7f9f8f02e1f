"""P2P rules (TD3xx): NVML P2P status, P2P missing on NVLink pairs, IOMMU, ACS redirection."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.text import plural
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.graph import gpu_node, pcie_subgraph
from topodoctor.topology.hostgraph import NodeNotFound, NoPath, shortest_path

_REASONS = {
    "CHIPSET_NOT_SUPPORTED": "the chipset does not support P2P",
    "GPU_NOT_SUPPORTED": "the GPU model does not support P2P",
    "IOH_TOPOLOGY_NOT_SUPPORTED": "the PCIe topology (IOH / root complex) does not allow P2P",
    "DISABLED_BY_REGKEY": "the driver disabled P2P (registry key / module option)",
    "NOT_SUPPORTED": "P2P is not supported on this path",
    "UNKNOWN": "unknown",
}
ACS_SOURCE_VALIDATION, ACS_REQUEST_REDIRECT, ACS_COMPLETION_REDIRECT, ACS_UPSTREAM_FORWARDING = 0x1, 0x4, 0x8, 0x10


def _p2p_states(ctx: Context) -> Iterator[tuple[str, str, str, str]]:
    """(pair subject, capability, direction, NVML status) for P2P read and write both ways."""
    for pair in ctx.snap.pairs:
        if ctx.snap.gpu(pair.a).lost is not None or ctx.snap.gpu(pair.b).lost is not None:
            continue
        subject = f"GPU{pair.a}-GPU{pair.b}"
        for direction, st, prefix in (
            (f"GPU{pair.a}->GPU{pair.b}", pair.p2p, "p2p"),
            (f"GPU{pair.b}->GPU{pair.a}", pair.p2p_reverse, "p2p_reverse"),
        ):
            for what, value in (("read", st.read), ("write", st.write)):
                got = ctx.need(value, subject, f"{prefix}.{what}")
                if got is not None:
                    yield subject, what, direction, got


def _not_ok(ctx: Context, regkey: bool) -> Iterator[Issue]:
    """One finding per NVML reason, with every pair that gives it in the evidence: the cause
    is the platform, the GPU model or a driver setting, not each pair."""
    by_reason: dict[str, list[str]] = {}
    example: dict[str, str] = {}
    for subject, what, direction, value in _p2p_states(ctx):
        if value == "OK" or (value == "DISABLED_BY_REGKEY") != regkey:
            continue
        pairs = by_reason.setdefault(value, [])
        if subject not in pairs:
            pairs.append(subject)
        example.setdefault(value, f"{what} {direction}")
    for value, pairs in sorted(by_reason.items()):
        subject = pairs[0] if len(pairs) == 1 else "host"
        yield Issue(
            subject,
            f"P2P not available for {plural(len(pairs), 'GPU pair')}, "
            f"e.g. {example[value]}: {_REASONS.get(value, value)}",
            {"status": value, "pairs": pairs},
        )


@rule(
    "TD301",
    "p2p-unavailable",
    "warning",
)
def p2p_unavailable(ctx: Context) -> Iterator[Issue]:
    """NVML reports P2P read or write between GPUs as not OK: a platform or GPU that cannot do it.

    One finding per reason NVML gives, the pairs in its evidence. A driver setting that disabled P2P
    is TD305.

    Why it matters: NCCL stages the traffic of these pairs through host memory: slower, but correct.

    How to fix: consumer GPUs and some platforms cannot do P2P, and nothing on the node changes
    that; place jobs on GPUs that can, or accept the staged traffic.
    """
    yield from _not_ok(ctx, regkey=False)


@rule(
    "TD305",
    "p2p-disabled-by-driver",
    "error",
)
def p2p_disabled_by_driver(ctx: Context) -> Iterator[Issue]:
    """NVML reports P2P between two GPUs as disabled by a driver setting (DISABLED_BY_REGKEY).

    Why it matters: every collective between these GPUs stages through host memory, for a setting
    someone can fix.

    How to fix: remove the NVreg option (in modprobe.d) that disables P2P, then reload the driver.
    """
    yield from _not_ok(ctx, regkey=True)


@rule(
    "TD302",
    "p2p-missing-on-nvlink",
    "error",
)
def p2p_missing_on_nvlink(ctx: Context) -> Iterator[Issue]:
    """A pair connected by NVLink reports NVLink P2P as not OK.

    Why it matters: NVLink is up but P2P over it is not: a hardware or fabric fault, and NCCL falls
    back to slower paths for the pair.

    How to fix: check the fabric manager (TD501) and `nvidia-smi topo -p2p n`; reset or service the
    GPUs.
    """
    for (a, b), c in sorted(ctx.connections.items()):
        if c.cls != "NV":
            continue
        st = ctx.snap.p2p(a, b)
        if st.read == "DISABLED_BY_REGKEY" or st.write == "DISABLED_BY_REGKEY":
            continue  # a setting, reported by TD305
        nvlink = ctx.need(st.nvlink, f"GPU{a}-GPU{b}", "p2p.nvlink")
        if nvlink is not None and nvlink != "OK":
            yield Issue(
                f"GPU{a}-GPU{b}",
                f"GPU{a}-GPU{b} share {c.nvlinks} NVLinks but NVLink P2P is {nvlink}",
                {"nvlinks": c.nvlinks, "p2p_nvlink": nvlink},
            )


@rule(
    "TD303",
    "iommu-translation",
    "warning",
)
def iommu_translation(ctx: Context) -> Iterator[Issue]:
    """The IOMMU translates GPU DMA on a bare-metal host.

    In a VM the hypervisor's IOMMU is expected, so VMs are not flagged; where the probe could not
    tell a VM from bare metal (/proc/cpuinfo unreadable), a GPU in translation mode is could-not-check
    (TD901), neither flagged nor passed.

    Why it matters: in translation mode every P2P and GPUDirect RDMA transfer goes through the
    IOMMU, which can block P2P or cut its bandwidth; pass-through (identity) mode avoids it.

    How to fix: on bare metal, boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on
    iommu=pt) so GPU P2P and RDMA are not remapped by the IOMMU.
    """
    virtualization = ctx.snap.host.virtualization
    if virtualization == "vm" or ctx.need(ctx.snap.host.iommu, "host", "host.iommu") != "on":
        return
    kinds = {g.index: ctx.need(g.iommu_group_type, f"GPU{g.index}", "iommu_group_type") for g in ctx.live_gpus}
    translated = {i: kind for i, kind in kinds.items() if kind is not None and kind.startswith("DMA")}
    if translated and virtualization != "bare-metal":
        ctx.missing("host", "host.virtualization", ctx.snap.host.virtualization_detail, "read /proc/cpuinfo")
        return
    for i, kind in translated.items():
        yield Issue(
            f"GPU{i}", f"GPU{i} sits in an IOMMU group in translation mode ({kind})", {"iommu_group_type": kind}
        )


@rule(
    "TD304",
    "acs-redirect",
    "error",
)
def acs_redirect(ctx: Context) -> Iterator[Issue]:
    """ACS request or completion redirection is on in a bridge between two GPUs.

    Why it matters: with ACS P2P redirect on, a PCIe switch sends peer traffic up to the root
    complex instead of across the switch: P2P slows down or hangs. NVLink pairs are not affected.

    How to fix: disable ACS redirection on the bridge for GPU P2P (in the BIOS, or with setpci at
    boot).
    """
    g = pcie_subgraph(ctx.graph)
    by_bridge: dict[str, list[str]] = {}
    for (a, b), c in sorted(ctx.connections.items()):
        if c.cls == "NV":
            continue
        try:
            path = shortest_path(g, gpu_node(a), gpu_node(b))
        except (NoPath, NodeNotFound):
            continue
        for node in path:
            if g.nodes[node].get("kind") == "pcie_bridge":
                by_bridge.setdefault(g.nodes[node]["bus_id"], []).append(f"GPU{a}-GPU{b}")
    for bdf, pairs in sorted(by_bridge.items()):
        br = ctx.snap.bridge(bdf)
        if br is None:
            continue
        acs = ctx.need(br.acs_ctrl, f"bridge:{bdf}", "acs_ctrl")
        if acs is not None and acs & (ACS_REQUEST_REDIRECT | ACS_COMPLETION_REDIRECT):
            yield Issue(
                f"bridge:{bdf}",
                f"ACS redirection is on in bridge {bdf}; it slows P2P for {', '.join(pairs)}",
                {"acs_ctrl": hex(acs), "pairs": pairs},
            )
