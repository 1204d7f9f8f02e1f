"""NVLink rules (TD1xx): links down, fewer links than peers, slower links, link errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from topodoctor.core.probed import ProbeError
from topodoctor.core.text import plural
from topodoctor.model.snapshot import Gpu, nvlink_generation
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.graph import gpu_node, nvlink_count

# A link's speed under this share of the host's usual one: links train at a few discrete rates, so
# a link more than 5 % below the others runs a lower rate, not the same one read with rounding.
SLOW_LINK_SHARE = 0.95


def _norm(values: list[int]) -> int | None:
    """The host's norm: the most common value (ties go to the larger)."""
    if not values:
        return None
    counts = Counter(values)
    return max(counts, key=lambda v: (counts[v], v))


def unread_links(g: Gpu) -> list[tuple[str, ProbeError]]:
    """(field, error) of the GPU's answers that decide which pairs it reaches over NVLink and
    that the probe could not read: its bus id, its link count, a link's state, an active
    link's far end. With any of them a pair through the GPU cannot be judged short of links (TD102) or
    off NVLink (TD201): what is missing may be exactly the links it lacks."""
    out: list[tuple[str, ProbeError]] = []
    if isinstance(g.bus_id, ProbeError):  # a peer's link names the GPU by its bus id
        out.append(("bus_id", g.bus_id))
    if isinstance(g.nvlink_count, ProbeError):
        out.append(("nvlink_count", g.nvlink_count))
    count = g.nvlink_count if isinstance(g.nvlink_count, int) else None
    for link in g.nvlinks:
        if count is not None and link.link >= count:
            continue
        where = f"nvlink{link.link}"
        if isinstance(link.active, ProbeError):
            out.append((f"{where}.active", link.active))
        elif link.active is True and isinstance(link.remote_type, ProbeError):
            out.append((f"{where}.remote_type", link.remote_type))
        elif (
            link.active is True and link.remote_type in ("gpu", "switch") and isinstance(link.remote_bus_id, ProbeError)
        ):
            out.append((f"{where}.remote_bus_id", link.remote_bus_id))
    return out


def pair_unread(ctx: Context, a: int, b: int) -> bool:
    """Whether the pair's NVLinks could not be read in full; if so, it is recorded as could-not-check
    (the first unread field of each GPU, naming the call and the error) for the running rule."""
    unread = False
    for i in (a, b):
        missing = unread_links(ctx.snap.gpu(i))
        if missing:
            field, err = missing[0]
            ctx.need(err, f"GPU{a}-GPU{b}", f"GPU{i}/{field}")
            unread = True
    return unread


def _links_of(ctx: Context, g: Gpu) -> tuple[list[int], list[int]] | None:
    """(active, inactive) link indices of the links the GPU has: below NVML's link count and,
    where the capability was read, able to carry P2P. None when the GPU's links could not be
    read (recorded as could-not-check)."""
    subject = f"GPU{g.index}"
    count = ctx.need(g.nvlink_count, subject, "nvlink_count")
    if count is None:
        return None
    active: list[int] = []
    inactive: list[int] = []
    for link in g.nvlinks:
        where = f"{subject}/nvlink{link.link}"
        state = ctx.need(link.active, where, "active")
        caps = ctx.need(link.capabilities, where, "capabilities")
        if state is None or link.link >= count or (caps is not None and "p2p" not in caps):
            continue
        (active if state else inactive).append(link.link)
    return active, inactive


@rule(
    "TD101",
    "nvlink-down",
    "error",
)
def nvlink_down(ctx: Context) -> Iterator[Issue]:
    """An NVLink that the GPU has is inactive while it should be up.

    A GPU has as many links as NVML's link count says (those whose capability reads "no P2P"
    excepted). One of them is down when it is inactive while the same GPU's other links are active:
    judged by the GPU itself, never by a majority of peers, so a 2-GPU host or the same link down on
    several GPUs is caught. A GPU with every link inactive is down when other GPUs of the host use
    NVLink, when every GPU of a multi-GPU host has links and none is up, or when the expectations
    file gives active links per GPU.

    Why it matters: a down link lowers the pair's bandwidth and, on NVSwitch systems, every pair
    through that GPU; a GPU with no link up talks to its peers over PCIe at a fraction of the speed,
    and every collective of the job waits for it.

    How to fix: reseat or replace the GPU or baseboard link; `nvidia-smi nvlink -s` shows the state
    of each link, and the NVSwitch fabric logs say why a link did not train.
    """
    links = {g.index: got for g in ctx.live_gpus if (got := _links_of(ctx, g)) is not None}
    expected = ctx.expect.nvlinks_per_gpu if ctx.expect else None
    with_links = [i for i, (up, down) in links.items() if up or down]
    host_uses_nvlink = any(up for up, _ in links.values())
    all_down_everywhere = len(with_links) > 1 and len(with_links) == len(ctx.live_gpus) and not host_uses_nvlink
    for i, (up, down) in sorted(links.items()):
        evidence = {"active_links": len(up), "links": len(up) + len(down), "expected_active": expected}
        if up and down:
            others = f"{len(up)} of its other links are" if len(up) > 1 else "its one other link is"
            for li in down:
                yield Issue(
                    f"GPU{i}/nvlink{li}",
                    f"GPU{i} NVLink {li} is down while {others} up",
                    {**evidence, "down": down},
                )
        elif down and (host_uses_nvlink or all_down_everywhere or expected):
            why = "other GPUs of the host use NVLink" if host_uses_nvlink else "no GPU of the host has a link up"
            yield Issue(
                f"GPU{i}",
                (
                    f"all {len(down)} NVLinks of GPU{i} are down"
                    if len(down) > 1
                    else f"the one NVLink of GPU{i} is down"
                )
                + f" ({why})",
                {**evidence, "down": down},
            )
        elif expected is not None and len(up) < expected:
            yield Issue(
                f"GPU{i}",
                f"GPU{i} has {plural(len(up), 'active NVLink')}; the expectations file gives {expected}",
                evidence,
            )


@rule(
    "TD102",
    "nvlink-fewer-links",
    "error",
)
def nvlink_fewer_links(ctx: Context) -> Iterator[Issue]:
    """A GPU pair has fewer bonded NVLinks than its peers, or than the expectations file says.

    A pair through a GPU whose link state or far end NVML could not answer for is not checked (TD901
    names the call), never short of links.

    Why it matters: NCCL's bandwidth between two GPUs scales with the links between them; one pair
    with fewer links slows every collective that crosses it.

    How to fix: find the GPU with fewer active links (TD101 names the link) and repair its link;
    then re-run the check.
    """
    g = ctx.graph
    counts = {pair: nvlink_count(g, gpu_node(pair[0]), gpu_node(pair[1]))[0] for pair in ctx.connections}
    nv_counts = [c for c in counts.values() if c > 0]
    norm: int | None
    if ctx.expect is not None and ctx.expect.nvlinks_per_pair > 0:
        norm, basis = ctx.expect.nvlinks_per_pair, "expectations file"
    else:
        norm, basis = _norm(nv_counts), "peer pairs"
        if not nv_counts or len(counts) < 2:
            return
    assert norm is not None
    for (a, b), n in sorted(counts.items()):
        if (0 < n < norm or (n == 0 and basis == "expectations file")) and not pair_unread(ctx, a, b):
            yield Issue(
                f"GPU{a}-GPU{b}",
                f"GPU{a}-GPU{b} has {plural(n, 'NVLink')}; "
                + (f"the expectations file says {norm}" if basis == "expectations file" else f"its peers have {norm}"),
                {"links": n, "expected": norm, "basis": basis},
            )


@rule(
    "TD103",
    "nvlink-slow-link",
    "warning",
)
def nvlink_slow_link(ctx: Context) -> Iterator[Issue]:
    """An active NVLink runs at a lower version or speed than the host's norm.

    Why it matters: a link that trained at a lower NVLink version or speed carries less than its
    peers, so the pairs through it, and every collective that crosses them, run at its pace.

    How to fix: reset the GPU in a maintenance window so the link trains again; replace the part if
    the link stays slow.
    """
    links = []
    for g in ctx.live_gpus:
        for link in g.nvlinks:
            where = f"GPU{g.index}/nvlink{link.link}"
            if ctx.need(link.active, where, "active") is True:
                links.append(
                    (
                        where,
                        link.link,
                        ctx.need(link.version, where, "version"),
                        ctx.need(link.speed_mbps, where, "speed_mbps"),
                    )
                )
    v_norm = _norm([v for _, _, v, _ in links if v is not None])
    s_norm = _norm([s for _, _, _, s in links if s is not None])
    for where, li, version, speed in links:
        gi = where.split("/")[0]
        if version is not None and v_norm is not None and version < v_norm:
            yield Issue(
                where,
                f"{gi} NVLink {li} runs NVLink {nvlink_generation(version)}; "
                f"the host's links run {nvlink_generation(v_norm)}",
                {"version": version, "norm": v_norm},
            )
        elif speed is not None and s_norm is not None and speed < SLOW_LINK_SHARE * s_norm:
            yield Issue(
                where,
                f"{gi} NVLink {li} runs at {speed} MB/s; the host's links run {s_norm}",
                {"speed_mbps": speed, "norm_mbps": s_norm},
            )


def _link_errors(ctx: Context) -> Iterator[tuple[str, int, int]]:
    """(subject, replays, recoveries) for every NVLink whose counters could be read."""
    for g in ctx.live_gpus:
        for link in g.nvlinks:
            where = f"GPU{g.index}/nvlink{link.link}"
            replay = ctx.need(link.errors.replay, where, "errors.replay")
            recovery = ctx.need(link.errors.recovery, where, "errors.recovery")
            yield where, replay or 0, recovery or 0


@rule(
    "TD104",
    "nvlink-replays",
    "warning",
)
def nvlink_replays(ctx: Context) -> Iterator[Issue]:
    """An NVLink has data-link replay errors (retransmissions).

    Raw CRC counts are not used: on Hopper they read tens on healthy links.

    Why it matters: replays retransmit data: they cost bandwidth and often precede link failures.

    How to fix: watch the counter under load (`nvidia-smi nvlink -e`); a rising replay count means a
    marginal link: schedule the GPU or baseboard for service.
    """
    for where, replay, _ in _link_errors(ctx):
        if replay > 0:
            yield Issue(where, f"{where.replace('/nvlink', ' NVLink ')}: {replay} replays", {"replay": replay})


@rule(
    "TD105",
    "nvlink-recoveries",
    "error",
)
def nvlink_recoveries(ctx: Context) -> Iterator[Issue]:
    """An NVLink has data-link recovery events: the link dropped and retrained.

    Why it matters: a recovery stalls all traffic on the link while it retrains, and links that
    recover once tend to fail outright.

    How to fix: drain the node; check `nvidia-smi nvlink -e` and the kernel log (Xid 74); service
    the GPU or baseboard if it recurs.
    """
    for where, _, recovery in _link_errors(ctx):
        if recovery > 0:
            yield Issue(where, f"{where.replace('/nvlink', ' NVLink ')}: {recovery} recoveries", {"recovery": recovery})
