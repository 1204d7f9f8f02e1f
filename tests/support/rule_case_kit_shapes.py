"""Helpers of the rule cases on rare shapes of a host: a pair joined by exactly one NVLink (NV1), a
GPU with a single link, and a direct GPU-to-GPU link whose two ends answer differently (one end up,
the other down; one end at a lower version or speed). They start from the bridged pair
(``x2-direct-nvlink``: eighteen direct links between two GPUs, no NVSwitch)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import SnapEdit, both, gpu, link

from topodoctor.model.snapshot import HostSnapshot
from topodoctor.topology.view import HostView

DIRECT = "x2-direct-nvlink"  # two GPUs joined by 18 direct NVLinks


def first_links(i: int, n: int) -> SnapEdit:
    """GPU ``i`` has ``n`` NVLinks (NVML's link count ``n``): links 0 to n-1 alone, as on a board with
    fewer bridge lanes."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        g = s.gpu(i)
        return gpu(i, nvlink_count=n, nvlinks=tuple(k for k in g.nvlinks if k.link < n))(s)

    return edit


def every_link_at(speed_mbps: int) -> SnapEdit:
    """Every NVLink of the host reads ``speed_mbps`` (a round rate, so a share of it is exact)."""
    return every_link(speed_mbps=speed_mbps)


NV1 = both(first_links(0, 1), first_links(1, 1))  # the bridged pair joined by one link, each GPU with one
NV1_DOWN = both(NV1, link(0, 0, active=False), link(1, 0, active=False))  # and that link down, at both ends


def every_link(**fields: Any) -> SnapEdit:
    """Every NVLink of every GPU with ``fields`` (down, another far end)."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(
            s, gpus=tuple(replace(g, nvlinks=tuple(replace(k, **fields) for k in g.nvlinks)) for g in s.gpus)
        )

    return edit


BRIDGE_DOWN = every_link(active=False)  # the bridged pair with every link down at both ends


def one_nic(name: str, **fields: Any) -> SnapEdit:
    """The NIC ``name`` with ``fields`` (its state, its ports), the others as they are."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, nics=tuple(replace(n, **fields) if n.name == name else n for n in s.nics))

    return edit


def baseline_port(nic: str, at_end_s: float, **counters_end: int) -> Any:
    """A last edit of the Context: ``check --baseline`` with a snapshot of the same host taken earlier,
    at uptime ``at_end_s``, whose NIC ``nic`` port 1 then read ``counters_end`` (the rest as now)."""

    def edit(ctx: Any) -> None:
        def then(n: Any) -> Any:
            if n.name != nic:
                return n
            p = n.ports[0]
            return replace(n, ports=(replace(p, at_end_s=at_end_s, counters_end=p.counters_end | counters_end),))

        ctx.baseline = replace(ctx.snap, nics=tuple(then(n) for n in ctx.snap.nics))

    return edit


def standing(nic: str, **counts: int) -> SnapEdit:
    """NIC ``nic`` port 1's counters at ``counts`` at both readings of the check (no rise during it)."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        def now(n: Any) -> Any:
            if n.name != nic:
                return n
            p = n.ports[0]
            return replace(
                n, ports=(replace(p, counters_start=p.counters_start | counts, counters_end=p.counters_end | counts),)
            )

        return replace(s, nics=tuple(now(n) for n in s.nics))

    return edit


def host_as(edit: SnapEdit) -> Any:
    """A last edit of the Context: the host the measured result carries changed by ``edit`` (a measured
    result brings its own snapshot, which a snapshot edit of the case does not reach)."""

    def change(ctx: Any) -> None:
        ctx.snap = edit(ctx.snap)
        ctx.view = HostView(ctx.snap)

    return change


def p2p_one_way(a: int, b: int, **fields: Any) -> SnapEdit:
    """The pair (a, b)'s P2P status from GPU ``b`` to GPU ``a`` only (the reverse direction) with
    ``fields``: the two directions of one pair answering differently."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        pairs = tuple(
            replace(p, p2p_reverse=replace(p.p2p_reverse, **fields)) if (p.a, p.b) == (a, b) else p for p in s.pairs
        )
        return replace(s, pairs=pairs)

    return edit
