"""PCIe and path rules (TD2xx): NVLink pairs falling back to PCIe, P2P across sockets,
downtrained links, replays."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.model.snapshot import Gpu
from topodoctor.rules.context import Context
from topodoctor.rules.nvlink import pair_unread
from topodoctor.rules.registry import Issue, rule

REPLAYS_WARN, REPLAYS_SEVERE = 100, 10000  # PCIe replay counter since the driver loaded


@rule(
    "TD201",
    "pcie-fallback",
    "error",
)
def pcie_fallback(ctx: Context) -> Iterator[Issue]:
    """A GPU pair that should be NVLink-connected has only a PCIe path.

    "Should" means the topology wires the pair with NVLink (both GPUs have links to NVSwitches, or a
    link of one ends at the other), whatever state the links are in; or its peers on the same host
    are NVLink-connected (at least half the pairs); or the expectations file gives links per pair.
    Every such pair is a finding of its own, also when another finding (all of a GPU's links down,
    TD101) explains it: tools and people look pairs up one by one. A pair through a GPU whose
    NVLinks NVML could not answer for is not checked (TD901 names the call), never a fallback.

    Why it matters: NCCL routes the pair over PCIe, at a fraction of NVLink's speed, and every
    collective that crosses the pair runs at that speed.

    How to fix: check the pair's links (TD101, `nvidia-smi nvlink -s`) and the fabric manager
    (TD501); reset or service the GPU whose links are down.
    """
    conns = ctx.connections
    nv = [p for p, c in conns.items() if c.cls == "NV"]
    expected = ctx.expect is not None and ctx.expect.nvlinks_per_pair > 0
    by_peers = expected or (bool(nv) and len(nv) >= len(conns) / 2)
    wired = _nvlink_wired(ctx)
    for (a, b), c in sorted(conns.items()):
        if c.cls == "NV" or not (by_peers or (a, b) in wired) or pair_unread(ctx, a, b):
            continue
        basis = "expectations file" if expected else "topology" if (a, b) in wired else "peer pairs"
        yield Issue(
            f"GPU{a}-GPU{b}",
            f"GPU{a}-GPU{b} has no NVLink path; traffic goes over PCIe ({c.cls})",
            {"path": c.cls, "nominal_gbps": c.gbps, "nvlink_pairs": len(nv), "pairs": len(conns), "basis": basis},
        )


def _nvlink_wired(ctx: Context) -> set[tuple[int, int]]:
    """GPU pairs (a < b) the topology wires with NVLink, up or down: both GPUs have links whose
    far end is an NVSwitch (a switch plane joins every GPU on it), or a link of one ends at the
    other's bus. A link above NVML's link count, or unable to carry P2P, wires nothing."""
    bus = {g.bus_id: g.index for g in ctx.live_gpus if isinstance(g.bus_id, str)}
    switched: set[int] = set()
    direct: set[tuple[int, int]] = set()
    for g in ctx.live_gpus:
        count = g.nvlink_count if isinstance(g.nvlink_count, int) else None
        for link in g.nvlinks:
            caps = link.capabilities
            if (count is not None and link.link >= count) or (isinstance(caps, tuple) and "p2p" not in caps):
                continue
            if link.remote_type == "switch":
                switched.add(g.index)
            elif link.remote_type == "gpu" and isinstance(link.remote_bus_id, str):
                peer = bus.get(link.remote_bus_id)
                if peer is not None and peer != g.index:
                    direct.add((min(g.index, peer), max(g.index, peer)))
    return direct | {(a, b) for a in switched for b in switched if a < b}


@rule(
    "TD202",
    "p2p-crosses-sockets",
    "warning",
)
def p2p_crosses_sockets(ctx: Context) -> Iterator[Issue]:
    """GPU pairs whose P2P traffic would cross the inter-socket link (SYS).

    One finding for the host, with every such pair in its evidence: the cause is the layout, not
    each pair.

    Why it matters: peer-to-peer over UPI / Infinity Fabric is slow or unsupported on most
    platforms; NCCL disables P2P for SYS pairs by default and stages their traffic through host
    memory.

    How to fix: place jobs so that GPUs that communicate share a socket (CUDA_VISIBLE_DEVICES), or
    expect NCCL to route these pairs through host memory.
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
)
def pcie_downtrained_width(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe link trained at fewer lanes than it supports (or than expected).

    Why it matters: host-to-GPU copies, and P2P and network traffic over PCIe, scale with the lanes:
    an x8 link carries half of an x16 one. Width does not change with load, so a narrower link is a
    hardware fault, not a power state.

    How to fix: reseat the GPU or its riser or cable, and check the slot's settings in the BIOS.
    """
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
)
def pcie_downtrained_gen(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe link runs at a lower generation than the link supports (or than expected).

    Why it matters: each generation down halves the link's bandwidth. Idle GPUs may lower the
    generation to save power, so this is a warning; host-copy bandwidth (TD704) tells a real
    downtrain from a power state.

    How to fix: run the check again under load; if the generation stays low, check the BIOS slot
    settings and the risers.
    """
    want = ctx.expect.pcie_gen if ctx.expect else None
    for g, cur, mx, limit in _below(ctx, "gen_current", "gen_max", want):
        # an expectation above what the link itself can run is the node type's, not the link's
        beyond = want is not None and (mx is None or want > mx)
        short = f"the node type expects Gen{want}" + (f" (the link runs Gen{mx} at most)" if mx else "")
        yield Issue(
            f"GPU{g.index}",
            f"GPU{g.index} PCIe link runs Gen{cur}, " + (short if beyond else f"can run Gen{limit}"),
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
)
def pcie_replays(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe replay counter is high (100 or more retransmitted TLPs, below 10000).

    Why it matters: each replay retransmits a packet the link damaged: a sign of signal problems,
    which cost bandwidth and tend to grow (10000 or more is TD206).

    How to fix: reseat the card or riser, and watch whether the counter grows.
    """
    for g, n in _replays(ctx):
        if REPLAYS_WARN <= n < REPLAYS_SEVERE:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} PCIe replay counter is {n}", {"replays": n})


@rule(
    "TD206",
    "pcie-replays-severe",
    "error",
)
def pcie_replays_severe(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe replay counter reads 10000 or more: the link is failing.

    Why it matters: the link retransmits constantly: transfers stall, and a link this bad is close
    to dropping the GPU off the bus.

    How to fix: reseat or replace the card, riser or cable before it drops off the bus.
    """
    for g, n in _replays(ctx):
        if n >= REPLAYS_SEVERE:
            yield Issue(f"GPU{g.index}", f"GPU{g.index} PCIe replay counter is {n}", {"replays": n})
