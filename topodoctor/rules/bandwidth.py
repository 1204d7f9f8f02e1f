"""Bandwidth rules (TD7xx): verdicts on measured copies, against the topology's expectations
and against the host's own peers. They run when a result is given (check --bandwidth,
bandwidth --from)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from topodoctor.core.stats import median
from topodoctor.diagnosis.load import loads
from topodoctor.rules.bandwidth_posted import STAGED_KEY
from topodoctor.rules.collectives_runs import busy_issues
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.copy_rates import host_link_gbps

if TYPE_CHECKING:  # copies come with a result; a static check loads none of their classes
    from topodoctor.model.copies import Measurement

SLOW_VS_PEERS = 0.85  # below this share of the median of pairs with the same connection
SLOW_VS_NOMINAL = 0.5  # below this share of the path's signalling rate, peers or not
PCIE_SPEED_FACTOR = 1.5  # an NVLink pair at most this x its PCIe rate is running over PCIe
HOST_LINK_FLOOR = 0.7  # host copies below this share of the PCIe link's rate
# Pairs of one connection and mode needed for a peers' median: of two, the slow one drags the
# median halfway down to itself, so only the nominal rate judges them.
PEERS_FOR_MEDIAN = 3
_PAIR_MODES = ("oneway", "bidir", "sm_oneway", "sm_bidir")  # copies, by the copy engine or SM kernels


def _subject(m: Measurement) -> str:
    return f"GPU{m.src}-GPU{m.dst}" if m.src >= 0 and m.dst >= 0 else f"GPU{max(m.src, m.dst)}"


def _pairs(ctx: Context):  # type: ignore[no-untyped-def]
    assert ctx.bandwidth is not None
    return [m for m in ctx.bandwidth.measurements if m.mode in _PAIR_MODES and m.value is not None]


@rule(
    "TD701",
    "bw-slow-link",
    "error",
    needs=("bandwidth",),
)
def bw_slow_link(ctx: Context) -> Iterator[Issue]:
    """A GPU pair measures well below its peers with the same connection, or below half its path's rate.

    Why it matters: collectives move data at the pace of their slowest pair, so one slow pair slows
    every job that uses both GPUs.

    How to fix: compare with `topodoctor scan` for this pair's links (TD101-TD103); re-run with the
    GPUs idle; a pair that stays slow needs its links serviced.
    """
    exp = ctx.expected_bandwidth
    by_class: dict[tuple[str, str], list[float]] = {}
    for m in _pairs(ctx):
        e = exp.get((m.src, m.dst))
        if e is not None:
            by_class.setdefault((m.mode, e.cls), []).append(m.value.median)
    for m in _pairs(ctx):
        e = exp.get((m.src, m.dst))
        if e is None:
            continue
        peers = by_class[(m.mode, e.cls)]
        med = median(peers) if len(peers) >= PEERS_FOR_MEDIAN else None
        v = m.value.median
        nominal = e.nominal_gbps
        slow_peer = med is not None and v < SLOW_VS_PEERS * med
        slow_nominal = nominal is not None and m.path == "p2p" and v < SLOW_VS_NOMINAL * nominal
        if slow_peer or slow_nominal:
            yield Issue(
                f"GPU{m.src}-GPU{m.dst}",
                f"{m.mode} GPU{m.src}->GPU{m.dst} measures {v:.1f} GB/s; peers ({e.cls}) median {med:.1f} GB/s"
                if med
                else f"{m.mode} GPU{m.src}->GPU{m.dst} measures {v:.1f} GB/s, under half "
                f"of its {e.cls} path's {nominal:.0f} GB/s",
                {
                    "mode": m.mode,
                    "gbps": round(v, 2),
                    "peer_median_gbps": round(med, 2) if med else None,
                    "nominal_gbps": nominal,
                    "connection": e.cls,
                },
            )


@rule(
    "TD702",
    "bw-p2p-slower-than-host",
    "warning",
    needs=("bandwidth",),
)
def bw_p2p_slower_than_host(ctx: Context) -> Iterator[Issue]:
    """A direct P2P copy is slower than staging the same data through host memory would be.

    The one-way P2P copy is judged against the same copy staged through host memory where that was
    measured (p2pBandwidthLatencyTest's P2P=Disabled matrix, given to ``bandwidth --from``), else the
    slower of its source's copy to the host and the host's copy to its destination, and found when
    under 0.9 of it.

    Why it matters: NCCL uses P2P wherever its P2P level allows it, taking it for the faster path;
    here it is the slower one, so every collective between these GPUs runs slower than staging
    through the host would.

    How to fix: check ACS (TD304), the IOMMU (TD303) and the PCIe path; or let NCCL stage through
    the host (NCCL_P2P_LEVEL) until fixed.
    """
    assert ctx.bandwidth is not None
    copied = _staged_copies(ctx.bandwidth.settings)
    for m in _pairs(ctx):
        if m.mode != "oneway" or m.path != "p2p":
            continue
        staged = copied.get((m.src, m.dst))
        how = "the same copy staged through host memory (P2P=Disabled)"
        if staged is None:
            d2h = ctx.bandwidth.find("d2h", m.src, -1)
            h2d = ctx.bandwidth.find("h2d", -1, m.dst)
            if d2h is None or h2d is None or d2h.value is None or h2d.value is None:
                continue
            staged, how = min(d2h.value.median, h2d.value.median), "staging through host memory"
        if m.value.median < 0.9 * staged:
            yield Issue(
                f"GPU{m.src}-GPU{m.dst}",
                f"P2P GPU{m.src}->GPU{m.dst} at {m.value.median:.1f} GB/s is slower than {how} ({staged:.1f} GB/s)",
                {"p2p_gbps": round(m.value.median, 2), "staged_gbps": round(staged, 2)},
            )


def _staged_copies(settings: dict[str, object]) -> dict[tuple[int, int], float]:
    """A posted P2P=Disabled matrix's copies (bandwidth_posted.py), by (source, destination)."""
    got = settings.get(STAGED_KEY)
    if not isinstance(got, list):
        return {}
    return {(int(a), int(b)): float(v) for a, b, v in (x for x in got if isinstance(x, list) and len(x) == 3)}


@rule(
    "TD703",
    "bw-pcie-fallback",
    "error",
    needs=("bandwidth",),
)
def bw_pcie_fallback(ctx: Context) -> Iterator[Issue]:
    """An NVLink-connected pair measures at PCIe speed: the copies did not use NVLink.

    Why it matters: the pair is wired for NVLink but moves data at a fraction of its rate, and
    NCCL's traffic between the two GPUs will too.

    How to fix: check P2P status (TD302), the fabric manager (TD501) and peer access; a process may
    also have P2P disabled.
    """
    exp = ctx.expected_bandwidth
    for m in _pairs(ctx):
        e = exp.get((m.src, m.dst))
        if e is None or not e.cls.startswith("NV") or e.pcie_gbps is None:
            continue
        per_dir = m.value.median
        if per_dir <= PCIE_SPEED_FACTOR * e.pcie_gbps:
            yield Issue(
                f"GPU{m.src}-GPU{m.dst}",
                f"{m.mode} GPU{m.src}->GPU{m.dst} ({e.cls}) measures {per_dir:.1f} "
                f"GB/s, PCIe speed (link {e.pcie_gbps:.0f} GB/s); path {m.path}",
                {
                    "gbps": round(per_dir, 2),
                    "pcie_gbps": e.pcie_gbps,
                    "path": m.path,
                    "nvlink_bytes": m.nvlink_bytes,
                    "connection": e.cls,
                },
            )


@rule(
    "TD704",
    "bw-host-link-slow",
    "warning",
    needs=("bandwidth",),
)
def bw_host_link_slow(ctx: Context) -> Iterator[Issue]:
    """Host-to-GPU or GPU-to-host copies run below the GPU's PCIe link norm.

    Why it matters: data loading, checkpoints and any traffic staged through host memory run at this
    rate; causes are a downtrained link (TD203/TD204), a far NUMA node, or a busy host.

    How to fix: check the GPU's PCIe link (TD203/TD204) and the NUMA placement of the copying
    process; reseat the card if it persists.
    """
    assert ctx.bandwidth is not None
    for m in ctx.bandwidth.measurements:
        if m.mode not in ("h2d", "d2h") or m.value is None:
            continue
        gpu = m.dst if m.mode == "h2d" else m.src
        # Against the link it should be (max width): a downtrained link must not lower the bar.
        ref = host_link_gbps(ctx.snap, gpu, full_width=True) or host_link_gbps(ctx.snap, gpu)
        if ref and m.value.median < HOST_LINK_FLOOR * ref:
            yield Issue(
                f"GPU{gpu}",
                f"{m.mode} GPU{gpu}: {m.value.median:.1f} GB/s, below {HOST_LINK_FLOOR:.0%} of "
                f"its PCIe link's {ref:.1f} GB/s",
                {"mode": m.mode, "gbps": round(m.value.median, 2), "link_gbps": ref},
            )


@rule(
    "TD705",
    "bw-data-corruption",
    "critical",
    needs=("bandwidth",),
)
def bw_data_corruption(ctx: Context) -> Iterator[Issue]:
    """Data read back after a copy differs from what was sent.

    Why it matters: a GPU or link that delivers wrong data corrupts a job silently: fast numbers do
    not make it fit.

    How to fix: drain the node now; run the GPU vendor diagnostics (dcgmi diag -r 3) and service the
    GPUs or links involved.
    """
    assert ctx.bandwidth is not None
    for m in ctx.bandwidth.measurements:
        if m.verified is False:
            who = _subject(m)
            yield Issue(
                who,
                f"{m.mode} {m.src}->{m.dst}: data mismatch after copy",
                {"mode": m.mode, "size_bytes": m.size_bytes},
            )


@rule(
    "TD706",
    "bw-copy-failed",
    "critical",
    needs=("bandwidth",),
)
def bw_copy_failed(ctx: Context) -> Iterator[Issue]:
    """A copy hung past its timeout or failed outright (out of memory is TD708).

    Why it matters: a copy that hangs or fails on a checked GPU will do so in a job, as a hang or a
    crash.

    How to fix: check the kernel log for Xid errors, the fabric manager and GPU health; drain the
    node.
    """
    assert ctx.bandwidth is not None
    for m in ctx.bandwidth.measurements:
        if m.error is not None and not _out_of_memory(m):
            yield Issue(_subject(m), f"{m.mode} {m.src}->{m.dst}: {m.error}", {"mode": m.mode, "error": m.error})


def _out_of_memory(m: Measurement) -> bool:
    return m.error is not None and "out of memory" in m.error


@rule(
    "TD708",
    "bw-copy-out-of-memory",
    "error",
    needs=("bandwidth",),
)
def bw_copy_out_of_memory(ctx: Context) -> Iterator[Issue]:
    """A copy could not allocate its buffers on the GPU (another process holds the memory).

    Why it matters: the pairs that needed the buffers were not measured; and memory held by another
    process is memory a job will not have.

    How to fix: measure on idle GPUs, or with a smaller --size.
    """
    assert ctx.bandwidth is not None
    for m in ctx.bandwidth.measurements:
        if m.error is not None and _out_of_memory(m):
            yield Issue(_subject(m), f"{m.mode} {m.src}->{m.dst}: {m.error}", {"mode": m.mode, "error": m.error})


@rule(
    "TD707",
    "bw-gpu-busy",
    "info",
    needs=("bandwidth",),
)
def bw_gpu_busy(ctx: Context) -> Iterator[Issue]:
    """A GPU was busy with someone else's work when measuring started or while the copies ran: numbers may be low.

    Someone else's: a compute process that is not topodoctor's own, or, where no process shows at
    all, utilisation of 50 % or more (as TD007); topodoctor's own workers never count. A process NVML
    listed only while the copies ran (it is read a few times a second) counts too.

    Why it matters: copies share the GPU and its links with the other work, so low figures may be
    the load, not the hardware; findings on this GPU's pairs are less certain.

    How to fix: measure on idle GPUs for numbers you can compare.
    """
    assert ctx.bandwidth is not None
    bw = ctx.bandwidth
    yield from busy_issues(loads(bw.snapshot or ctx.snap, bw.activity, bw.during))
