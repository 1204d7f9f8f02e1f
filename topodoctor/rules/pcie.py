"""PCIe and path rules (TD2xx): NVLink pairs falling back to PCIe, P2P across sockets,
downtrained links, replays."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.model.snapshot import Gpu
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

REPLAYS_WARN, REPLAYS_SEVERE = 100, 10000  # PCIe replay counter since the driver loaded


@rule(
    "TD201",
    "pcie-fallback",
    "error",
    fix="The pair should talk over NVLink: check its links (TD101, `nvidia-smi nvlink -s`) and the fabric "
    "manager; until fixed, NCCL routes this pair over PCIe at a fraction of the speed.",
)
def pcie_fallback(ctx: Context) -> Iterator[Issue]:
    """A GPU pair that should be NVLink-connected has only a PCIe path.

    "Should" means its peers on the same host are NVLink-connected (at least half the pairs),
    or the expectations file gives links per pair.
    """
    conns = ctx.connections
    nv = [p for p, c in conns.items() if c.cls == "NV"]
    expected = ctx.expect is not None and ctx.expect.nvlinks_per_pair > 0
    if not expected and (not nv or len(nv) < len(conns) / 2):
        return
    for (a, b), c in sorted(conns.items()):
        if c.cls != "NV":
            yield Issue(
                f"GPU{a}-GPU{b}",
                f"GPU{a}-GPU{b} has no NVLink path; traffic goes over PCIe ({c.cls})",
                {"path": c.cls, "nominal_gbps": c.gbps, "nvlink_pairs": len(nv), "pairs": len(conns)},
            )


@rule(
    "TD202",
    "p2p-crosses-sockets",
    "warning",
    fix="Place jobs so communicating GPUs share a socket (CUDA_VISIBLE_DEVICES), or expect NCCL to route this "
    "pair through host memory.",
)
def p2p_crosses_sockets(ctx: Context) -> Iterator[Issue]:
    """GPU pairs whose P2P traffic would cross the inter-socket link (SYS).

    Peer-to-peer over UPI / Infinity Fabric is slow or unsupported on most platforms; NCCL
    disables P2P for SYS pairs by default and stages through host memory. One finding for the
    host, with every such pair in its evidence: the cause is the layout, not each pair.
    """
    pairs = [f"GPU{a}-GPU{b}" for (a, b), c in sorted(ctx.connections.items()) if c.cls == "SYS"]
    if pairs:
        yield Issue(
            "host",
            f"{len(pairs)} GPU pairs connect only across the CPU sockets (SYS), e.g. {pairs[0]}",
            {"path": "SYS", "pairs": pairs},
        )


@rule(
    "TD203",
    "pcie-downtrained-width",
    "error",
    fix="Reseat the GPU or its riser/cable; check the slot in BIOS. Width does not change with load, so a "
    "narrower link is a hardware fault.",
)
def pcie_downtrained_width(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe link trained at fewer lanes than it supports (or than expected)."""
    want = ctx.expect.pcie_width if ctx.expect else None
    for g, cur, mx, limit in _below(ctx, "width_current", "width_max", want):
        yield Issue(
            f"GPU{g.index}",
            f"GPU{g.index} PCIe link is x{cur}, should be x{limit}",
            {"width": cur, "width_max": mx, "expected": want},
        )


def _below(ctx: Context, now: str, most: str, want: int | None) -> Iterator[tuple[Gpu, int, int | None, int]]:
    """GPUs whose PCIe ``now`` field is below ``want`` (or below its own ``most``), as
    (gpu, now, most, limit)."""
    for g in ctx.live_gpus:
        subject = f"GPU{g.index}"
        cur = ctx.need(getattr(g.pcie, now), subject, f"pcie.{now}")
        mx = ctx.need(getattr(g.pcie, most), subject, f"pcie.{most}")
        limit = want if want is not None else mx
        if cur is not None and limit is not None and cur < limit:
            yield g, cur, mx, limit


@rule(
    "TD204",
    "pcie-downtrained-gen",
    "warning",
    fix="Run the check again under load: idle GPUs drop PCIe generation to save power. If it stays low, "
    "check BIOS slot settings and risers.",
)
def pcie_downtrained_gen(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe link runs at a lower generation than the link supports (or than expected).

    Idle GPUs may lower the generation to save power, so this is a warning; host-copy
    bandwidth (TD704) tells a real downtrain from a power state.
    """
    want = ctx.expect.pcie_gen if ctx.expect else None
    for g, cur, mx, limit in _below(ctx, "gen_current", "gen_max", want):
        yield Issue(
            f"GPU{g.index}",
            f"GPU{g.index} PCIe link runs Gen{cur}, can run Gen{limit}",
            {"gen": cur, "gen_max": mx, "expected": want},
        )


def _replays(ctx: Context) -> Iterator[tuple[Gpu, int]]:
    for g in ctx.live_gpus:
        n = ctx.need(g.pcie.replay_counter, f"GPU{g.index}", "pcie.replay_counter")
        if n is not None:
            yield g, n


@rule(
    "TD205",
    "pcie-replays",
    "warning",
    fix="PCIe replays mean signal problems: reseat the card or riser; watch whether the counter grows.",
)
def pcie_replays(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe replay counter is high (100 or more retransmitted TLPs, below 10000)."""
    for g, n in _replays(ctx):
        if REPLAYS_WARN <= n < REPLAYS_SEVERE:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} PCIe replay counter is {n}", {"replays": n})


@rule(
    "TD206",
    "pcie-replays-severe",
    "error",
    fix="The link retransmits constantly: reseat or replace the card, riser or cable before it drops off the bus.",
)
def pcie_replays_severe(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe replay counter reads 10000 or more: the link is failing."""
    for g, n in _replays(ctx):
        if n >= REPLAYS_SEVERE:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} PCIe replay counter is {n}", {"replays": n})
