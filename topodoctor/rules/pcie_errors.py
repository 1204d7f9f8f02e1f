"""PCIe link error rules (TD207-TD209, TD211-TD219): the GPU's own PCIe error counters.

NVML counts them since the driver loaded, and healthy links carry small counts (on
nvidia-h200: 14 receiver errors, 15 bad TLPs, 13 NAKs sent, 136 L0-to-recovery transitions,
all still). A count alone says little; a count that moves while topodoctor watches says the
link is failing now. The probe reads the counters twice and the rules judge the rise.
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.probed import Probed
from topodoctor.model.snapshot import Gpu
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.baseline import gpu_pcie_since

# Counters whose rise means the link is retrying: correctable, but each retry costs bandwidth.
RETRY_COUNTERS = ("correctable", "replay", "naks_received", "naks_sent", "receiver_errors", "bad_tlp", "bad_dllp")
# Above this many retry events per second the link is failing, not noisy. A Gen5 x16 link at
# full load moves 512 Gb/s; at the PCIe specification's worst allowed bit error ratio (1e-12)
# that is about 0.5 errors per second, so 100 per second is some 200 times the specification.
ERROR_RATE_PER_S = 100.0
# The shortest window a rate is computed over: two readings closer than this (a probe of one
# GPU takes a few tens of milliseconds) give a rate from a single event.
MIN_WINDOW_S = 0.01


def _subject(g: Gpu) -> str:
    return f"GPU{g.index}"


def _count(ctx: Context, g: Gpu, v: Probed[int], where: str) -> int | None:
    return ctx.need(v, _subject(g), f"fitness.{where}")


@rule(
    "TD207",
    "pcie-fatal-errors",
    "error",
)
def pcie_fatal_errors(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe link has counted a fatal uncorrectable error since the driver loaded.

    Why it matters: a fatal error means the link could not deliver a transaction and the device may
    be unusable until reset; no healthy GPU counts one, and the GPU may fall off the bus.

    How to fix: drain the node; reseat or replace the GPU or riser, and check the slot and the
    kernel log (AER), which names the port.
    """
    for g in ctx.live_gpus:
        n = _count(ctx, g, g.fitness.end.pcie.fatal, "end.pcie.fatal")
        if n:
            yield Issue(_subject(g), f"GPU{g.index} PCIe link counted {n} fatal errors", {"fatal": n})


@rule(
    "TD208",
    "pcie-non-fatal-errors",
    "error",
)
def pcie_non_fatal_errors(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe link has counted a non-fatal uncorrectable error since the driver loaded.

    Why it matters: non-fatal means the link stayed up, but a transaction was lost or poisoned: data
    the job relied on may be wrong, and the link is not healthy.

    How to fix: drain the node and check the link: reseat or replace the GPU or riser; the kernel
    log (AER) names the port.
    """
    for g in ctx.live_gpus:
        n = _count(ctx, g, g.fitness.end.pcie.non_fatal, "end.pcie.non_fatal")
        if n:
            yield Issue(_subject(g), f"GPU{g.index} PCIe link counted {n} non-fatal errors", {"non_fatal": n})


def _rises(ctx: Context, g: Gpu) -> tuple[dict[str, int], float | None]:
    """What each retry counter (and replay rollover, L0-to-recovery) rose by during the check,
    and the window in seconds (None when the probe could not time it)."""
    start, end = g.fitness.start, g.fitness.end
    rose: dict[str, int] = {}
    for name in (*RETRY_COUNTERS, "replay_rollover", "l0_to_recovery"):
        a = _count(ctx, g, getattr(start.pcie, name), f"start.pcie.{name}")
        b = _count(ctx, g, getattr(end.pcie, name), f"end.pcie.{name}")
        if a is not None and b is not None and b > a:
            rose[name] = b - a
    t0 = ctx.need(start.at_s, _subject(g), "fitness.start.at_s")
    t1 = ctx.need(end.at_s, _subject(g), "fitness.end.at_s")
    window = t1 - t0 if t0 is not None and t1 is not None else None
    return rose, window


def _rate(count: int, window: float | None) -> float | None:
    return count / max(window, MIN_WINDOW_S) if window is not None else None


def _judged(ctx: Context, g: Gpu) -> list[tuple[str, dict[str, int], float | None]]:
    """The rises to judge: during the check, and since the baseline when there is one."""
    rose, window = _rises(ctx, g)
    out = [("during the check", rose, window)]
    since = gpu_pcie_since(ctx.baseline, g)
    if since is not None:
        out.append((f"in the {since.window_s:.0f} s since the baseline", since.rise, since.window_s))
    return out


def _total(rose: dict[str, int]) -> int:
    return sum(v for k, v in rose.items() if k in (*RETRY_COUNTERS, "l0_to_recovery"))


def _failing(rose: dict[str, int], window: float | None) -> bool:
    rate = _rate(_total(rose), window)
    return "replay_rollover" in rose or (rate is not None and rate > ERROR_RATE_PER_S)


@rule(
    "TD209",
    "pcie-errors-rising",
    "warning",
)
def pcie_errors_rising(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe retry counters rose during the check or since the baseline.

    The counters are the correctable-error, replay, NAK, receiver, bad TLP / DLLP and L0-to-recovery
    ones; they are judged by their rise between the two readings of the check, or since an earlier
    snapshot of the same boot (`check --baseline`), never by their raw count (healthy H200 links
    hold small counts from their boot and keep them), and at a rate below the error rate of TD211.

    Why it matters: each of these is a retry the link recovered from; they cost bandwidth and often
    come before a link that downtrains or fails.

    How to fix: watch the link (`nvidia-smi -q -d PCIE` over a minute) and reseat the GPU or riser
    at the next maintenance.
    """
    for g in ctx.live_gpus:
        judged = _judged(ctx, g)
        if any(_failing(rose, window) for _, rose, window in judged):
            continue  # TD211 reports it
        for when, rose, window in judged:
            if _total(rose):
                text = ", ".join(f"{k} +{v}" for k, v in rose.items())
                yield Issue(_subject(g), f"GPU{g.index} PCIe error counters rose {when}: {text}", _ev(rose, window))
                break


def _ev(rose: dict[str, int], window: float | None) -> dict[str, object]:
    return {"rise": rose, "window_s": round(window, 4) if window is not None else None}


@rule(
    "TD211",
    "pcie-error-rate-high",
    "error",
)
def pcie_error_rate_high(ctx: Context) -> Iterator[Issue]:
    """A GPU's PCIe link retries more than 100 times per second, or its replay counter rolled over.

    The rate is measured during the check (or since the baseline); a rollover means the same packet
    was replayed until the link retrained.

    Why it matters: 100 events per second is some 200 times what the PCIe specification allows a
    Gen5 x16 link at full load (a bit error ratio of 1e-12 at 512 Gb/s is about 0.5 per second); a
    replay rollover forces the link to retrain. Either way transfers stall and the GPU drags its job
    down.

    How to fix: drain the node: the GPU's PCIe link is failing. Reseat or replace the GPU or riser
    and check the slot; the kernel log (AER) names the port.
    """
    for g in ctx.live_gpus:
        for when, rose, window in _judged(ctx, g):
            rate = _rate(_total(rose), window)
            if "replay_rollover" in rose:
                msg = f"GPU{g.index} PCIe replay counter rolled over {rose['replay_rollover']} times {when}"
            elif rate is not None and rate > ERROR_RATE_PER_S:
                msg = f"GPU{g.index} PCIe link retried {rate:.0f} times per second {when}"
            else:
                continue
            yield Issue(_subject(g), msg, {**_ev(rose, window), "rate_per_s": round(rate, 1) if rate else None})
            break
