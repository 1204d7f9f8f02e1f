"""Fitness rules (TD710-TD729): verdicts on measured HBM bandwidth, compute under load, SM copies
and latency, judged three ways: against the GPU's own limit from NVML, against its peers on the
host, and against the expectations file of the node type.

They run when a fitness result is in the context (``ctx.fitness``, from ``check
--level quick|long``) and are silent otherwise. A figure that was not measured (a busy GPU,
the JIT or torch missing, the budget spent) is reported as could-not-check (TD901), never
passed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from topodoctor.core.stats import median
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

SLOW_VS_PEERS = 0.92  # a GPU (or pair) 8 % below the median of its peers is named
SLOW_LATENCY_VS_PEERS = 1.20  # a latency 20 % above its peers' median (latency is noisier)
MIN_PEERS = 3  # a median of fewer says nothing about which one is slow
# Share of NVML's HBM peak (bus width x max memory clock x 2, reads and writes together) that a
# device-local copy reaches at least: on H200 the copy engine moves 0.88 of it and the copy
# kernel 0.83 (nvbandwidth's device_local_copy 0.87), on H100 nvbandwidth 0.89; a GPU under
# 0.70 is far outside what a healthy one does.
HBM_SHARE_OF_PEAK = 0.70
BELOW_EXPECTED = 0.92  # under this share of the expectations file's figure
HW_SLOWDOWN = {
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
    "sw_thermal_slowdown": "SW thermal slowdown",
}


def fitness_of(ctx: Context) -> Any:
    """The fitness result the rules judge, or None."""
    return ctx.fitness


def _judged(ctx: Context, kind: str, initiator: str | None = None) -> list[Any]:
    """Measured figures of ``kind``; a figure refused or with no value is reported as
    could-not-check for this rule (through ``ctx.missing``)."""
    res = fitness_of(ctx)
    if res is None:
        return []
    if not res.figures and res.errors:
        ctx.missing("host", f"fitness.{kind}", "; ".join(res.errors), "fitness")
        return []
    out = []
    for f in res.of(kind, initiator):
        if f.value is not None:
            out.append(f)
        elif f.refused:
            ctx.missing(f.subject, f"fitness.{f.label.replace(' ', '_')}", f.error or "not measured", "fitness")
    return out


def _slow_among_peers(figs: list[Any], higher_is_better: bool = True) -> Iterator[tuple[Any, float]]:
    if len(figs) < MIN_PEERS:
        return
    med = median(f.value.median for f in figs)
    for f in figs:
        v = f.value.median
        if (v < SLOW_VS_PEERS * med) if higher_is_better else (v > SLOW_LATENCY_VS_PEERS * med):
            yield f, med


def _spread(f: Any) -> str:
    return f"{f.value.median:.1f} {f.unit} (samples {f.value.min:.1f}-{f.value.max:.1f})"


@rule(
    "TD710",
    "hbm-below-limit",
    "error",
    tags=(),
)
def hbm_below_limit(ctx: Context) -> Iterator[Issue]:
    """A GPU's device-local copy moves far less than its memory can (NVML: bus width x max clock x 2).

    Why it matters: HBM bandwidth bounds every memory-bound kernel (attention, optimizers,
    all-reduce's reduction). A healthy H200 moves 0.88 of NVML's peak in a device-local copy by the
    copy engine and 0.83 with the copy kernel (reads and writes counted together; an H100 0.89 by
    nvbandwidth); this rule fires below 0.70, whatever its peers do, so a host of identical slow
    GPUs is caught too.

    How to fix: re-run idle; check clocks and clock-event reasons, remapped rows and ECC.
    """
    res = fitness_of(ctx)
    for f in _judged(ctx, "hbm"):
        lim = res.limit(f.src)
        peak = getattr(lim, "hbm_peak_gbps", None)
        if peak is None:
            ctx.missing(f.subject, "fitness.hbm_peak", "NVML did not give bus width and max memory clock", "fitness")
            continue
        traffic = 2 * f.value.median
        if traffic < HBM_SHARE_OF_PEAK * peak:
            yield Issue(
                f.subject,
                f"GPU{f.src} {f.label} copies {_spread(f)}: {traffic / peak:.2f} of its memory's "
                f"{peak:.0f} GB/s of traffic (a healthy H200: 0.83-0.88)",
                {
                    "gbps": round(f.value.median, 1),
                    "traffic_gbps": round(traffic, 1),
                    "peak_gbps": round(peak, 1),
                    "initiator": f.initiator,
                    "spread_pct": round(f.value.spread_pct, 2),
                },
            )


@rule(
    "TD711",
    "hbm-slow-vs-peers",
    "error",
    tags=(),
)
def hbm_slow_vs_peers(ctx: Context) -> Iterator[Issue]:
    """A GPU's HBM bandwidth is 8 % or more below the median of the host's GPUs.

    Why it matters: a data-parallel step waits for its slowest rank, so one GPU with slow memory
    slows the whole job by the same share. Peers are the same model on the same host, measured in
    the same run: nothing but the GPU differs.

    How to fix: check the GPU's memory clock, clock-event reasons and remapped rows; re-run idle.
    """
    for engine in ("ce", "sm"):
        for f, med in _slow_among_peers(_judged(ctx, "hbm", engine)):
            yield Issue(
                f.subject,
                f"GPU{f.src} {f.label} copies {_spread(f)}, {f.value.median / med:.2f} of its peers' median {med:.1f}",
                {"gbps": round(f.value.median, 1), "peer_median_gbps": round(med, 1), "initiator": engine},
            )


@rule(
    "TD712",
    "compute-slow-vs-peers",
    "error",
    tags=(),
)
def compute_slow_vs_peers(ctx: Context) -> Iterator[Issue]:
    """A GPU's sustained bf16 GEMM rate is 8 % or more below the median of the host's GPUs.

    Why it matters: all GPUs run at once, sharing the node's power and cooling as a job does; a GPU
    that computes slower under that load sets the pace of every synchronous step.

    How to fix: look at its SM clock, power and temperature during the test (TD713 names a hardware
    slowdown); check fans, airflow and the power supply.
    """
    res = fitness_of(ctx)
    stress = {s.index: s for s in res.stress} if res is not None else {}
    for f, med in _slow_among_peers(_judged(ctx, "compute")):
        s = stress.get(f.src)
        yield Issue(
            f.subject,
            f"GPU{f.src} bf16 GEMM {_spread(f)}, {f.value.median / med:.2f} of its peers' median {med:.1f}",
            {
                "tflops": round(f.value.median, 1),
                "peer_median_tflops": round(med, 1),
                "sm_mhz_median": getattr(s, "sm_mhz_median", None),
                "power_w_max": getattr(s, "power_w_max", None),
                "temp_c_max": getattr(s, "temp_c_max", None),
            },
        )


@rule(
    "TD713",
    "slowdown-under-load",
    "error",
    tags=(),
)
def slowdown_under_load(ctx: Context) -> Iterator[Issue]:
    """A GPU reported a HW slowdown, HW thermal slowdown, HW power brake or SW thermal slowdown during the stress.

    Why it matters: these reasons cut the clocks far below what the power budget allows; the GPU
    will run every job slow. The SW power cap is not one of them: a GPU at full load holding its
    power limit is normal (an H200 at 700 W sits at it most of a sustained GEMM).

    How to fix: cooling (temperature against the slowdown threshold), power delivery (power brake),
    or the board (HW slowdown with neither).
    """
    res = fitness_of(ctx)
    if res is None:
        return
    for s in res.stress:
        hit = {HW_SLOWDOWN[name]: n for name, n in s.reason_samples.items() if name in HW_SLOWDOWN and n > 0}
        if hit:
            yield Issue(
                f"GPU{s.index}",
                f"GPU{s.index} under load: {', '.join(f'{k} in {n} of {s.samples} samples' for k, n in hit.items())}"
                f" (SM clock median {s.sm_mhz_median} MHz, {s.temp_c_max} C max)",
                {
                    "reasons": hit,
                    "samples": s.samples,
                    "sm_mhz_median": s.sm_mhz_median,
                    "temp_c_max": s.temp_c_max,
                    "power_w_max": s.power_w_max,
                },
            )


@rule(
    "TD714",
    "fitness-below-expected",
    "error",
    tags=(),
    needs=("expect",),
)
def fitness_below_expected(ctx: Context) -> Iterator[Issue]:
    """A measured figure is 8 % or more below what the expectations file says for this node type.

    Why it matters: peers cannot show a fault every GPU of the host shares (a BIOS setting, a power
    cap on the whole node); a known-good host of the same type can.

    How to fix: compare the host's settings with the known-good one.
    """
    expect = ctx.expect
    wanted = getattr(expect, "fitness", None) or {}
    for label, expected in wanted.items():
        kind, _, initiator = label.partition(" ")
        for f in _judged(ctx, kind, initiator.split(" ")[0] or None):
            if f.label != label or f.kind == "latency":
                continue
            if f.value.median < BELOW_EXPECTED * expected:
                yield Issue(
                    f.subject,
                    f"{f.subject} {label} {_spread(f)}, {f.value.median / expected:.2f} of the expected {expected:.1f}",
                    {"value": round(f.value.median, 2), "expected": expected, "figure": label},
                )


@rule(
    "TD715",
    "fitness-data-wrong",
    "critical",
    tags=(),
)
def fitness_data_wrong(ctx: Context) -> Iterator[Issue]:
    """A copy, pointer chase or GEMM gave wrong data.

    Why it matters: a GPU that computes or copies wrong data silently corrupts training; fast
    numbers do not make it fit.

    How to fix: drain; check ECC, remapped rows and XIDs; service the GPU.
    """
    res = fitness_of(ctx)
    for f in res.figures if res is not None else ():
        if f.verified is False:
            yield Issue(
                f.subject,
                f"{f.subject} {f.label}: the data read back differs from what was written",
                {"figure": f.label},
            )


@rule(
    "TD716",
    "fitness-failed",
    "error",
    tags=(),
)
def fitness_failed(ctx: Context) -> Iterator[Issue]:
    """A fitness measurement failed on a GPU that was free to run it (a hang, a CUDA error).

    Why it matters: a kernel or copy that hangs or fails on an idle GPU will do so in a job.
    Measurements refused on purpose (a busy GPU, the JIT or torch missing) are not failures: they
    are reported as could-not-check (TD901).

    How to fix: read the error in the evidence and the kernel log.
    """
    res = fitness_of(ctx)
    for f in res.figures if res is not None else ():
        if f.error is not None and not f.refused:
            yield Issue(f.subject, f"{f.subject} {f.label}: {f.error}", {"figure": f.label, "error": f.error})


@rule(
    "TD717",
    "sm-copy-slow-vs-peers",
    "warning",
    tags=(),
)
def sm_copy_slow_vs_peers(ctx: Context) -> Iterator[Issue]:
    """An SM-initiated copy (GPU pair or host-GPU) is 8 % or more below the median of its peers.

    Why it matters: NCCL's kernels move data with SM loads and stores, not the copy engines: a path
    slow for SM copies is slow for collectives. Peers are the same kind of copy (pull or push, one
    way or both) over the same class of connection.

    How to fix: check the pair's NVLinks or PCIe link; re-run with the GPUs idle.
    """
    conn = ctx.connections if len(ctx.live_gpus) > 1 else {}
    groups: dict[tuple[str, str], list[Any]] = {}
    for f in _judged(ctx, "sm_copy"):
        host = f.src < 0 or f.dst < 0
        c = conn.get((min(f.src, f.dst), max(f.src, f.dst)))
        groups.setdefault((f.label, "host" if host else str(getattr(c, "cls", "?"))), []).append(f)
    for (label, cls), figs in groups.items():
        for f, med in _slow_among_peers(figs):
            yield Issue(
                f.subject,
                f"{f.subject} {label} ({cls}) {_spread(f)}, {f.value.median / med:.2f} of its peers' median {med:.1f}",
                {"gbps": round(f.value.median, 1), "peer_median_gbps": round(med, 1), "figure": label},
            )


@rule(
    "TD718",
    "sm-latency-slow-vs-peers",
    "warning",
    tags=(),
)
def sm_latency_slow_vs_peers(ctx: Context) -> Iterator[Issue]:
    """A pointer-chase latency (GPU-GPU or host-GPU) is 20 % or more above the median of its peers.

    Why it matters: small messages (NCCL's LL protocols, a pipeline's activations) pay this latency
    on every step. Host and peer latencies are compared each with their own kind.

    How to fix: check the path's link state and NUMA placement; re-run idle.
    """
    figs = _judged(ctx, "latency")
    for group in ([f for f in figs if f.dst < 0], [f for f in figs if f.dst >= 0]):
        for f, med in _slow_among_peers(group, higher_is_better=False):
            yield Issue(
                f.subject,
                f"{f.subject} latency {_spread(f)}, {f.value.median / med:.2f} x its peers' median {med:.0f} ns",
                {"ns": round(f.value.median, 1), "peer_median_ns": round(med, 1)},
            )
