"""The data path between GPUs, judged layer by layer (TD306-TD308): links up is not traffic flowing.

A pair can show every NVLink Active at full rate while no byte crosses them: the fabric manager
never registered the GPUs, the driver refuses P2P, the fabric says its bandwidth is degraded, or
a copy across the pair fails or crawls. Each layer has its own rule for its own fact (TD501,
TD302, TD305, TD703, TD706); these join the layers into one verdict per pair of NVLink-connected
GPUs and name the first layer that breaks, in the order a job's traffic meets them:

1. ``links``: NVML's link state (the pair's bonded NVLinks, up);
2. ``fabric``: each GPU's registration with the NVSwitch fabric and its health mask;
3. ``p2p``: NVML's P2P status per capability (read, write, NVLink, atomics), both directions;
4. ``measured``: the pair's verified copies, when a bandwidth result is given.

Below them the PCIe tree: a switch whose uplink trained narrower than the GPUs under it
(TD308) holds every byte to and from the host, and across the switch, to the narrow link.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topodoctor.core.text import plural
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.copy_rates import host_link_gbps
from topodoctor.topology.graph import pcie_gbps, pcie_gen_of

if TYPE_CHECKING:  # copies come with a result; a static check loads none of their classes
    from topodoctor.model.copies import Measurement

# NVML_GPU_FABRIC_HEALTH_MASK_*: a two-bit field per condition at these shifts, 1 meaning TRUE
HEALTH = {
    "degraded_bandwidth": (0, "the fabric reports its bandwidth degraded", "error"),
    "route_recovery": (2, "the fabric is recovering a route", "warning"),
    "route_unhealthy": (4, "the fabric reports a route unhealthy", "error"),
    "access_timeout_recovery": (6, "the fabric is recovering from an access timeout", "warning"),
}
PCIE_SPEED = 1.5  # a copy at most this x the host link's rate went over PCIe (rules/bandwidth.py's TD703)
CRAWL = 0.5  # a copy below this share of the links' rate crawls
_COPY_MODES = ("oneway", "bidir", "sm_oneway", "sm_bidir")


@dataclass(frozen=True)
class Broken:
    """One layer of a pair's data path that does not carry what the links could."""

    layer: str  # fabric | p2p | measured
    what: str  # the fact, in words
    severity: str  # error: traffic falls back, fails or crawls; warning: it flows, something is off
    dead: bool  # no traffic takes the links at all
    copy: tuple[str, int, int] | None = None  # the measured copy: mode, source, destination


# The rules that judge each layer's own fact: a pair's verdict follows from their findings.
LAYER_RULES = {"fabric": ("TD501",), "p2p": ("TD302", "TD305"), "measured": ("TD703", "TD706")}


def _causes(broken: list[Broken]) -> tuple[str, ...]:
    """The codes of the layer rules whose findings ``broken`` follows from."""
    return tuple(dict.fromkeys(code for x in broken for code in LAYER_RULES[x.layer]))


def _fabric(ctx: Context, gpus: tuple[int, int]) -> list[Broken]:
    out = []
    for i in gpus:
        f = ctx.need(ctx.snap.gpu(i).fabric, f"GPU{i}", "fabric")
        if f is None or f.state == "not_supported":
            continue
        if f.state != "completed" or f.status != "SUCCESS":
            state = f.state.replace("_", " ") + (f", {f.status}" if f.status != "SUCCESS" else "")
            what = f"fabric manager not ready on GPU{i}: registration {state}"
            out.append(Broken("fabric", what, "error", True))
            continue
        for _, (shift, what, severity) in HEALTH.items():
            if f.health_mask is not None and (f.health_mask >> shift) & 3 == 1:
                out.append(Broken("fabric", f"GPU{i}: {what}", severity, False))
    return out


def _p2p(ctx: Context, a: int, b: int) -> list[Broken]:
    out = []
    subject = f"GPU{a}-GPU{b}"
    for src, dst in ((a, b), (b, a)):
        st = ctx.snap.p2p(src, dst)
        prefix = "p2p" if src == a else "p2p_reverse"
        for cap in ("read", "write", "nvlink", "atomics"):
            got = ctx.need(getattr(st, cap), subject, f"{prefix}.{cap}")
            if got is not None and got != "OK":
                dead = cap != "atomics"
                what = f"P2P {cap} GPU{src}->GPU{dst} is {got}"
                out.append(Broken("p2p", what, "error" if dead else "warning", dead))
    return out


def _measured(ctx: Context, a: int, b: int) -> list[Broken]:
    if ctx.bandwidth is None:
        return []
    exp = ctx.expected_bandwidth
    out = []
    for m in ctx.bandwidth.measurements:
        if m.mode not in _COPY_MODES or {m.src, m.dst} != {a, b} or m.skipped is not None:
            continue
        e = exp.get((m.src, m.dst))
        if m.error is not None and "out of memory" not in m.error:
            out.append(Broken("measured", f"{_copy(m)} failed: {m.error}", "error", True, (m.mode, m.src, m.dst)))
        elif m.verified is False:
            out.append(Broken("measured", f"{_copy(m)} delivered wrong data", "error", True, (m.mode, m.src, m.dst)))
        elif m.value is not None and m.path == "staged":
            out.append(
                Broken("measured", f"{_copy(m)} was staged through host memory", "error", True, (m.mode, m.src, m.dst))
            )
        elif m.value is not None and e is not None and e.pcie_gbps and m.value.median <= PCIE_SPEED * e.pcie_gbps:
            what = f"{_copy(m)} ran at {m.value.median:.1f} GB/s, PCIe speed (host link {e.pcie_gbps:.0f} GB/s)"
            out.append(Broken("measured", what, "error", True, (m.mode, m.src, m.dst)))
        elif m.value is not None and e is not None and e.nominal_gbps and m.value.median < CRAWL * e.nominal_gbps:
            what = f"{_copy(m)} ran at {m.value.median:.1f} GB/s, under half the links' {e.nominal_gbps:.0f} GB/s"
            out.append(Broken("measured", what, "error", False, (m.mode, m.src, m.dst)))
    return out


def _copy(m: Measurement) -> str:
    return f"the {m.mode.replace('_', '-')} copy GPU{m.src}->GPU{m.dst}"


def _pairs(ctx: Context) -> Iterator[tuple[int, int, int, list[Broken]]]:
    """(a, b, links up, what is broken below them) for every pair whose NVLinks are up."""
    for (a, b), c in sorted(ctx.connections.items()):
        if c.cls != "NV" or c.nvlinks <= 0:
            continue
        yield a, b, c.nvlinks, [*_fabric(ctx, (a, b)), *_p2p(ctx, a, b), *_measured(ctx, a, b)]


def _cost(ctx: Context, a: int, b: int, dead: bool) -> tuple[str, dict[str, Any]]:
    e = ctx.expected_bandwidth.get((a, b))
    links = e.nominal_gbps if e is not None else None
    host = min(filter(None, (host_link_gbps(ctx.snap, a), host_link_gbps(ctx.snap, b))), default=None)
    evidence = {"links_gbps": links, "host_link_gbps": host}
    if not dead:
        return "collectives across these GPUs run below what the links carry", evidence
    if links and host and links > host:
        times = f" ({links / host:.0f}x slower)" if round(links / host) > 1 else ""
        return (
            f"NCCL stages their traffic through host memory: at most {host:.0f} GB/s a direction over PCIe "
            f"instead of {links:.0f} GB/s over the links{times}, or copies fail",
            evidence,
        )
    if links and host:  # one or two links carry less than the host's PCIe link: the loss is P2P, not the rate
        return (
            f"NCCL stages their traffic through host memory (PCIe, {host:.0f} GB/s a direction; the links carry "
            f"{links:.0f}), or copies fail",
            evidence,
        )
    return "NCCL stages their traffic through host memory (PCIe), or copies fail", evidence


def _evidence(links: int, broken: list[Broken]) -> dict[str, Any]:
    layers: dict[str, list[str]] = {"fabric": [], "p2p": [], "measured": []}
    for x in broken:
        layers[x.layer].append(x.what)
    evidence: dict[str, Any] = {"nvlinks_up": links, "layer": broken[0].layer, "layers": layers}
    if all(x.copy is not None for x in broken):  # only copies measured so: the cells of the matrices they are in
        evidence["modes"] = sorted({x.copy[0] for x in broken if x.copy})
        evidence["copies"] = [list(x.copy) for x in broken if x.copy]
    return evidence


@rule(
    "TD306",
    "data-path-dead",
    "error",
)
def data_path_dead(ctx: Context) -> Iterator[Issue]:
    """A GPU pair's NVLinks are up but its data path is dead: traffic cannot take them.

    Joins the layers a pair's traffic crosses (link state, fabric registration, P2P status per
    capability both ways, and the pair's verified copies when measured) and names the first that
    breaks: a GPU the fabric manager never registered, a P2P read, write or NVLink capability NVML
    refuses, a copy that failed, was staged through host memory or ran at PCIe speed. Every
    broken layer is in the evidence; each layer's own rule names its fact.

    Why it matters: NVML shows the links Active at full rate, so the fault is the one users find
    hardest to see: NCCL quietly stages the pair's traffic through host memory (a tenth of the
    links' rate or less), or the job fails when CUDA refuses peer access.

    How to fix: fix the layer named: start or repair the fabric manager (TD501), remove what
    disables P2P (TD302, TD305), or service the pair whose copies fail (TD703, TD706); then measure
    again with `topodoctor bandwidth`.
    """
    for a, b, links, broken in _pairs(ctx):
        dead = [x for x in broken if x.dead]
        if not dead:
            continue
        cost, money = _cost(ctx, a, b, dead=True)
        yield Issue(
            f"GPU{a}-GPU{b}",
            f"GPU{a}-GPU{b}: {plural(links, 'NVLink')} up, data path dead at the {dead[0].layer} layer "
            f"({dead[0].what}): {cost}",
            {**_evidence(links, dead + [x for x in broken if not x.dead]), **money},
            caused_by=_causes(dead),
        )


@rule(
    "TD307",
    "data-path-degraded",
    "error",
    also=("warning",),
)
def data_path_degraded(ctx: Context) -> Iterator[Issue]:
    """A GPU pair's NVLinks are up and carry traffic, but a layer below them is degraded.

    The fabric's health mask says its bandwidth is degraded or a route unhealthy (error), the
    pair's measured copies crawl under half the links' rate while P2P works (error), or
    something runs that a job may not notice: P2P atomics refused while reads and writes work,
    or the fabric recovering a route or from an access timeout (warning). A pair whose data path
    is dead is TD306's.

    Why it matters: traffic flows, so nothing fails, but collectives across the pair run at what
    the degraded layer carries; refused atomics break libraries that need them across GPUs
    (NVSHMEM, some custom all-reduce kernels) while NCCL goes on.

    How to fix: check the fabric manager's log and the NVSwitch health (`nvidia-smi -q`, Fabric);
    re-run `topodoctor bandwidth` on idle GPUs; service the pair if it stays slow.
    """
    for a, b, links, broken in _pairs(ctx):
        if not broken or any(x.dead for x in broken):
            continue
        worst = "error" if any(x.severity == "error" for x in broken) else "warning"
        first = next(x for x in broken if x.severity == worst)
        cost, money = _cost(ctx, a, b, dead=False)
        yield Issue(
            f"GPU{a}-GPU{b}",
            f"GPU{a}-GPU{b}: {plural(links, 'NVLink')} up, data path degraded at the {first.layer} layer "
            f"({first.what}): {cost}",
            {**_evidence(links, [first, *(x for x in broken if x is not first)]), **money},
            severity=worst,  # type: ignore[arg-type]
            caused_by=_causes(broken),
        )


@rule(
    "TD308",
    "pcie-uplink-narrow",
    "error",
    also=("warning",),
)
def pcie_uplink_narrow(ctx: Context) -> Iterator[Issue]:
    """A PCIe switch's uplink trained narrower (error) or slower (warning) than it can, or than the
    GPUs below it.

    Each GPU's own link may be at full width (TD203 stays silent) while the switch above it
    trained its uplink at fewer lanes: the switch's upstream port reads a width below its maximum
    or below its GPUs' width, or a generation below its maximum.

    Why it matters: every byte between the GPUs below the switch and the host (data loading,
    checkpoints, traffic staged through host memory) and every P2P byte to GPUs under other
    switches shares the narrow link: an x8 uplink carries half of x16, for all its GPUs at once.

    How to fix: reseat the switch's board or riser and check the slot's settings in the BIOS; a
    link that trained narrow stays narrow until it retrains.
    """
    for br in ctx.snap.bridges:
        if br.port_type != "upstream":
            continue
        below = [g for g in ctx.live_gpus if isinstance(g.pcie_path, tuple) and br.bus_id in g.pcie_path[1:-1]]
        if not below:
            continue
        subject = f"bridge:{br.bus_id}"
        width = ctx.need(br.link_width, subject, "link_width")
        width_max = ctx.need(br.max_link_width, subject, "max_link_width")
        speed = ctx.need(br.link_speed, subject, "link_speed")
        speed_max = ctx.need(br.max_link_speed, subject, "max_link_speed")
        gen, gen_max = (pcie_gen_of(s) if s else None for s in (speed, speed_max))
        gpu_width = max((g.pcie.width_current for g in below if isinstance(g.pcie.width_current, int)), default=None)
        gpus = [f"GPU{g.index}" for g in below]
        want = max(filter(None, (width_max, gpu_width)), default=None)
        evidence = {"width": width, "width_max": width_max, "gpu_width": gpu_width, "gen": gen, "gen_max": gen_max,
                    "gpus": gpus}  # fmt: skip
        if width is not None and want is not None and width < want:
            rate, full = pcie_gbps(gen, width), pcie_gbps(gen, want)
            cost = f"{rate:.0f} GB/s instead of {full:.0f} GB/s a direction" if rate and full else "fewer lanes"
            yield Issue(
                subject,
                f"PCIe switch uplink {br.bus_id} trained at x{width}, below x{want}: {', '.join(gpus)} share "
                f"{cost} to the host and across switches",
                {**evidence, "gbps": rate, "full_gbps": full},
            )
        elif gen is not None and gen_max is not None and gen < gen_max:
            yield Issue(
                subject,
                f"PCIe switch uplink {br.bus_id} runs Gen{gen}, can run Gen{gen_max}: {', '.join(gpus)} share it",
                evidence,
                severity="warning",
            )
