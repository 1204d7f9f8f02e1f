"""Collectives rules (TD0xx): verdicts on a collectives result (``topodoctor collectives``, or
nccl-tests' own JSON), against what the topology gives and against NCCL's own account.

They run when a result is in the context (``ctx.collectives``), and are silent
otherwise. Ranks are tied to GPUs by PCI bus id, so findings name GPUs where they can.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from topodoctor.core.text import human_size, plural
from topodoctor.diagnosis.fallback import NVLINK_ONLY, causes_set, facts_of_run, fallbacks
from topodoctor.diagnosis.run import rank_gpus, run_expectation
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.busbw_expect import Expectation

JUDGED_MIN_BYTES = 64 << 20  # below this, latency decides busbw: no verdict on bandwidth
# Shares of the reference a healthy run clears with room: on the H200 hosts nccl-tests' busbw
# at 64 MiB-1 GiB is 0.44-0.77 of the NVLink signalling rate and 0.54-0.94 of a measured copy;
# NCCL over SHM or with one channel lands at 0.04-0.06.
LOW_VS_NOMINAL = 0.35
LOW_VS_MEASURED = 0.40
LOW_VS_EXPECTED = 0.90  # the user's own number for this node type
# The model knows the op and its size: a run under 0.6 of it lost two fifths of what the hardware
# gives (TD020 warns from 0.85 of the same figure).
LOW_VS_MODEL = 0.6
# From 64 MiB to 256 MiB busbw still climbs (more so with more ranks): the floor there is lower.
FULL_RATE_BYTES = 256 << 20
SMALLER_SIZE_SHARE = 0.7
SLOW_RANK = 1.30  # a rank's time per op over the median of the other ranks
SLOW_RANK_MIN_BYTES = 1 << 20
CHANNEL_CAPS = (
    "NCCL_MAX_NCHANNELS",
    "NCCL_MAX_CTAS",
    "NCCL_MAX_P2P_NCHANNELS",
    "NCCL_NCHANNELS_PER_NET_PEER",
    "NCCL_NCHANNELS_PER_PEER",
    "NCCL_MIN_NCHANNELS",
)


def collectives_of(ctx: Context) -> Any:
    """The collectives result the rules judge, or None."""
    return ctx.collectives


def gpu_of_rank(ctx: Context, res: Any) -> dict[int, int]:
    """rank -> NVML index, by PCI bus id (ranks on other hosts map to nothing)."""
    return rank_gpus(ctx.snap, res)


def _rank_name(gpus: dict[int, int], rank: int) -> str:
    return f"GPU{gpus[rank]}" if rank in gpus else f"rank{rank}"


def expectation(ctx: Context, res: Any, op: str, size_bytes: int) -> Expectation | None:
    """What ``op`` should reach at ``size_bytes`` in ``res`` (busbw_expect.py: the one figure TD001,
    TD020, the table and ``--predict`` state, with its basis)."""
    return run_expectation(
        ctx.snap,
        res,
        op,
        size_bytes,
        expect_gbps=ctx.collectives_expect_gbps,
        copies=ctx.bandwidth,
        links=ctx.expected_bandwidth,
    )


def floor_share(basis: str) -> float:
    """The share of the expectation under which TD001 calls busbw low, by the expectation's basis."""
    floors = {"expectation": LOW_VS_EXPECTED, "model": LOW_VS_MODEL, "copy": LOW_VS_MEASURED, "link": LOW_VS_NOMINAL}
    return floors[basis]


def low_busbw(ctx: Context, res: Any) -> list[tuple[Any, Any, Expectation]]:
    """(row, timing, expectation) for each op whose busbw at its largest judged size is low."""
    out = []
    for op in dict.fromkeys(r.op for r in res.rows):
        row = res.largest(op)
        if row is None or row.size_bytes < JUDGED_MIN_BYTES or row.best is None:
            continue
        e = expectation(ctx, res, op, row.size_bytes)
        if e is None:
            continue
        share = floor_share(e.basis)
        floor = share if row.size_bytes >= FULL_RATE_BYTES else share * SMALLER_SIZE_SHARE
        if row.best.busbw_gbps < floor * e.gbps:
            out.append((row, row.best, e))
    return out


def _size(n: int) -> str:

    return human_size(n)


@rule(
    "TD001",
    "coll-busbw-low",
    "error",
    tags=("prolog", "collectives"),
)
def coll_busbw_low(ctx: Context) -> Iterator[Issue]:
    """A collective's bus bandwidth is far below what the topology gives.

    busbw (nccl-tests' definition) at the largest size measured, from 64 MiB up, is compared with the
    one expectation of that op at that size (topology/busbw_expect.py), on the first basis that
    applies: the number given with ``--expect-busbw``; the topology's model at that size (the figure
    TD020, the table's model column and ``collectives --predict`` state); a measured one-way copy
    between the run's GPUs; the nominal rate of the slowest pair's path. The finding names the basis
    (``basis`` in its JSON). The floor is 0.6 of the model (0.90 of an expectation, 0.40 of a
    measured copy, 0.35 of the nominal rate) from 256 MiB, and 0.7 of that between 64 and 256 MiB,
    where busbw is still climbing. Where TD020 judged the same row by the same figure, its finding
    is folded under this one.

    Why it matters: healthy NVLink hosts reach 0.85 of the model or more; NCCL falling back to shared
    memory or held to one channel reaches under 0.1. A job's gradient exchange runs at this rate.

    How to fix: read the NCCL account of the run (transports, channels) and TD002/TD003; compare
    with `topodoctor bandwidth` for the same GPUs; re-run on idle GPUs.
    """
    res = collectives_of(ctx)
    if res is None:
        return
    if not res.rows:
        return
    if len(res.nodes) > 1 and not ctx.collectives_expect_gbps:
        return  # across nodes the network bounds the world: TD011 judges it against the NICs, TD012 each node
    judged = [r for r in res.rows if r.size_bytes >= JUDGED_MIN_BYTES]
    if judged and all(expectation(ctx, res, r.op, r.size_bytes) is None for r in judged):
        why = (
            f"the run spans {plural(len(res.nodes), 'node')}: give --expect-busbw"
            if len(res.nodes) > 1
            else "no reference bandwidth: ranks not matched to GPUs of this host"
        )
        ctx.missing("collectives", "reference bandwidth", why, "collectives")
        return
    for row, t, e in low_busbw(ctx, res):
        yield Issue(
            row.op,
            f"{row.op} busbw {t.busbw_gbps:.1f} GB/s at {_size(row.size_bytes)} is {t.busbw_gbps / e.gbps:.0%} of "
            f"{judged_against(e)}",
            {
                "op": row.op,
                "size_bytes": row.size_bytes,
                "measured_gbps": round(t.busbw_gbps, 1),
                **e.evidence(),
                "ratio": round(t.busbw_gbps / e.gbps, 3),
            },
        )


def judged_against(e: Expectation) -> str:
    """``the 320.0 GB/s the topology's model gives at that size``: the figure and its basis, in the
    words every finding judged by it uses."""
    if e.basis == "model":
        return f"the {e.gbps:.1f} GB/s the topology's model gives at that size"
    return f"the {e.gbps:.1f} GB/s of {e.source}"


def _settings(ctx: Context, res: Any) -> dict[str, tuple[str, str]]:
    """NCCL variables the run had: name -> (value, where it was seen)."""
    out = {k: (v, "the run's environment") for k, v in res.env.items()}
    if res.nccl is not None:
        out.update({k: (v, "NCCL's log") for k, v in res.nccl.env.items()})
    return out


@rule(
    "TD002",
    "coll-channels-capped",
    "error",
    tags=("prolog", "collectives"),
)
def coll_channels_capped(ctx: Context) -> Iterator[Issue]:
    """A variable caps NCCL's channels while busbw falls short.

    NCCL_MAX_NCHANNELS, NCCL_MAX_CTAS and their kin limit how many channels (rings, each driven by
    its own thread block) NCCL builds. The finding names the variable, its value, the channels NCCL
    reported building, and the ops that fell short.

    Why it matters: one channel cannot fill NVLink: the collectives run at a fraction of what the
    links carry.

    How to fix: unset the variable (or raise it) unless it is there on purpose; NCCL picks its
    channel count from the topology.
    """
    res = collectives_of(ctx)
    if res is None:
        return
    low = low_busbw(ctx, res)
    if not low:
        return
    settings = _settings(ctx, res)
    channels = res.nccl.channels if res.nccl is not None else None
    ops = ", ".join(f"{row.op} {t.busbw_gbps:.0f} GB/s" for row, t, _ in low)
    for name in CHANNEL_CAPS:
        if name in settings:
            value, where = settings[name]
            built = f"NCCL built {plural(channels, 'channel')}" if channels is not None else "channels not reported"
            yield Issue(
                f"env:{name}",
                f"{name}={value} ({where}); {built}; busbw fell short: {ops}",
                {"variable": name, "value": value, "channels": channels, "ops": [row.op for row, *_ in low]},
            )


@rule(
    "TD003",
    "coll-transport-fallback",
    "error",
    tags=("prolog", "collectives"),
)
def coll_transport_fallback(ctx: Context) -> Iterator[Issue]:
    """NCCL carried traffic over shared memory or the network between NVLink-connected GPUs.

    From NCCL's own log: a peer connection via SHM or NET between two ranks of one node whose GPUs
    the topology graph shows joined by NVLink. Ranks of different nodes (as NCCL tells them apart:
    NCCL_HOSTID, else the host name) talk over the network by design.

    Why it matters: that is NCCL's fallback when peer-to-peer is disabled or not permitted, and it
    costs most of the bandwidth.

    How to fix: NCCL would use P2P over NVLink here: look for NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, a
    container without --ipc=host or shared /dev/shm, and TD3xx (P2P status); `topodoctor
    collectives` again shows the transport.
    """
    res = collectives_of(ctx)
    if res is None or res.nccl is None:
        return
    links = {pair: c.label for pair, c in ctx.connections.items()}
    facts = facts_of_run(res, gpu_of_rank(ctx, res), links)
    causes = causes_set(facts)
    for fb in fallbacks(facts, NVLINK_ONLY):
        (a, b), (ra, rb) = fb.gpus, fb.ranks
        how = ", ".join(f"{plural(n, 'channel connection')} via {t}" for t, n in sorted(fb.by.items()))
        why = f"; set: {', '.join(causes)}" if causes else ""
        yield Issue(
            f"GPU{a}-GPU{b}",
            f"ranks {ra} and {rb}: {how}, but the GPUs are joined by {fb.path}{why}",
            {"ranks": [ra, rb], "transports": fb.by, "path": fb.path, "settings": causes},
        )
