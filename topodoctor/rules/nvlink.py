"""NVLink rules (TD1xx): links down, fewer links than peers, slower links, link errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from topodoctor.graph import gpu_node, nvlink_count
from topodoctor.model import nvlink_generation
from topodoctor.probed import ProbeError
from topodoctor.rules.context import Context
from topodoctor.rules.registry import CannotCheck, Issue, rule


def _norm(values: list[int]) -> int | None:
    """The host's norm: the most common value (ties go to the larger)."""
    if not values:
        return None
    counts = Counter(values)
    return max(counts, key=lambda v: (counts[v], v))


@rule(
    "TD101",
    "nvlink-down",
    "error",
    fix="Reseat or replace the GPU/baseboard link; check `nvidia-smi nvlink -s` and the NVSwitch fabric logs.",
)
def nvlink_down(ctx: Context) -> Iterator[Issue | CannotCheck]:
    """An NVLink that should be up is inactive.

    A link counts as "should be up" when the expectations file gives more active links per GPU
    than the GPU has, or when the same link index is active on most of the GPU's peers. A down
    link lowers the pair's bandwidth and, on NVSwitch systems, every pair through that GPU.
    """
    gpus = [g for g in ctx.live_gpus if g.nvlinks]
    active_by_link: Counter[int] = Counter()
    for g in gpus:
        for link in g.nvlinks:
            if isinstance(link.active, ProbeError):
                yield CannotCheck(f"GPU{g.index}/nvlink{link.link}", link.active)
            elif link.active:
                active_by_link[link.link] += 1
    expected = ctx.expect.nvlinks_per_gpu if ctx.expect else None
    for g in gpus:
        down = [
            link.link
            for link in g.nvlinks
            if link.active is False and (active_by_link[link.link] > len(gpus) / 2 or expected)
        ]
        active = sum(1 for link in g.nvlinks if link.active is True)
        if expected is not None and active >= expected:
            continue
        for li in down:
            yield Issue(
                f"GPU{g.index}/nvlink{li}",
                f"GPU{g.index} NVLink {li} is down while its peers' link {li} is up",
                {
                    "active_links": active,
                    "links": len(g.nvlinks),
                    "expected_active": expected,
                    "peers_with_link_up": active_by_link[li],
                },
            )


@rule(
    "TD102",
    "nvlink-fewer-links",
    "error",
    fix="Find the GPU with fewer active links (TD101) and repair its link; then re-run the check.",
)
def nvlink_fewer_links(ctx: Context) -> Iterator[Issue]:
    """A GPU pair has fewer bonded NVLinks than its peers, or than the expectations file says.

    NCCL's bandwidth between two GPUs scales with the links between them; one pair with fewer
    links slows every collective that crosses it.
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
        if 0 < n < norm or (n == 0 and basis == "expectations file"):
            yield Issue(
                f"GPU{a}-GPU{b}",
                f"GPU{a}-GPU{b} has {n} NVLinks; {basis} give {norm}",
                {"links": n, "expected": norm, "basis": basis},
            )


@rule(
    "TD103",
    "nvlink-slow-link",
    "warning",
    fix="A link trained at a lower NVLink version or speed: reset the GPU in a maintenance window, "
    "then replace the part if it persists.",
)
def nvlink_slow_link(ctx: Context) -> Iterator[Issue]:
    """An active NVLink runs at a lower version or speed than the host's norm."""
    links = [(g.index, link) for g in ctx.live_gpus for link in g.nvlinks if link.active is True]
    versions = [link.version for _, link in links if isinstance(link.version, int)]
    speeds = [link.speed_mbps for _, link in links if isinstance(link.speed_mbps, int)]
    v_norm, s_norm = _norm(versions), _norm(speeds)
    for gi, link in links:
        if isinstance(link.version, int) and v_norm is not None and link.version < v_norm:
            yield Issue(
                f"GPU{gi}/nvlink{link.link}",
                f"GPU{gi} NVLink {link.link} runs NVLink {nvlink_generation(link.version)}; "
                f"the host's links run {nvlink_generation(v_norm)}",
                {"version": link.version, "norm": v_norm},
            )
        elif isinstance(link.speed_mbps, int) and s_norm and link.speed_mbps < 0.95 * s_norm:
            yield Issue(
                f"GPU{gi}/nvlink{link.link}",
                f"GPU{gi} NVLink {link.link} runs at {link.speed_mbps} MB/s; the host's links run {s_norm}",
                {"speed_mbps": link.speed_mbps, "norm_mbps": s_norm},
            )


@rule(
    "TD104",
    "nvlink-link-errors",
    "warning",
    fix="Watch the counters under load (`nvidia-smi nvlink -e`); rising replay or recovery counts mean a "
    "marginal link: schedule the GPU or baseboard for service.",
)
def nvlink_link_errors(ctx: Context) -> Iterator[Issue]:
    """An NVLink has replay or recovery errors.

    Replays retransmit data and recoveries retrain the link; both cost bandwidth and precede
    link failures. Raw CRC counts are not used: on Hopper they read tens on healthy links.
    """
    for g in ctx.live_gpus:
        for link in g.nvlinks:
            e = link.errors
            replay = e.replay if isinstance(e.replay, int) else 0
            recovery = e.recovery if isinstance(e.recovery, int) else 0
            if replay or recovery:
                yield Issue(
                    f"GPU{g.index}/nvlink{link.link}",
                    f"GPU{g.index} NVLink {link.link}: {replay} replays, {recovery} recoveries",
                    {"replay": replay, "recovery": recovery},
                    severity="error" if recovery else None,
                )
