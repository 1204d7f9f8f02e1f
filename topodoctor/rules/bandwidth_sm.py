"""Rules on the SM kernels' measurements of ``bandwidth --mode sm`` (TD725-): the load latency a
kernel sees across a pair's link. The SM copies are judged with the copy engine's by TD701 and
TD703 (rules/bandwidth.py), each against peers measured the same way."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.stats import median
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

SLOW_LATENCY = 1.2  # above this x the median of pairs with the same connection


@rule(
    "TD725",
    "bw-sm-latency-high",
    "warning",
    needs=("bandwidth",),
)
def bw_sm_latency_high(ctx: Context) -> Iterator[Issue]:
    """A GPU pair's load latency across its link is 20 % or more above its peers with the same connection.

    The latency is the SM pointer chase of ``bandwidth --mode sm-latency`` (nvbandwidth's
    device_to_device_latency_sm): a kernel on one GPU reading the other's memory, one dependent
    load at a time. The median of the pairs with the same connection (NV18, PIX, ...) is the norm;
    a host with one pair compares its two directions.

    Why it matters: small messages (NCCL's LL protocol, all-reduces of a few kilobytes, a pipeline's
    activations) wait on this latency, so a pair that answers slower slows every step of a job
    that talks through it, whatever its bandwidth.

    How to fix: compare the pair's links with `topodoctor scan` (TD101-TD103) and its data path
    (TD306, TD307); re-run on idle GPUs: a busy GPU answers slower.
    """
    assert ctx.bandwidth is not None
    exp = ctx.expected_bandwidth
    taken = [m for m in ctx.bandwidth.measurements if m.mode == "sm_latency" and m.value is not None]
    by_class: dict[str, list[float]] = {}
    for m in taken:
        e = exp.get((m.src, m.dst))
        if e is not None:
            by_class.setdefault(e.cls, []).append(m.value.median)  # type: ignore[union-attr]
    for m in taken:
        e = exp.get((m.src, m.dst))
        if e is None or len(by_class[e.cls]) < 2:
            continue
        norm = median(by_class[e.cls])
        us = m.value.median  # type: ignore[union-attr]
        if us >= SLOW_LATENCY * norm:
            yield Issue(
                f"GPU{m.src}-GPU{m.dst}",
                f"GPU{m.src} reads GPU{m.dst}'s memory in {us:.3f} us a load; pairs of its connection ({e.cls}) "
                f"{norm:.3f} us",
                {
                    "mode": "sm_latency",
                    "latency_us": round(us, 4),
                    "peer_median_us": round(norm, 4),
                    "connection": e.cls,
                },
            )
