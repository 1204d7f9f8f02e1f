"""GPU fitness rules (TD530-TD549): clocks held down, power capped, running hot.

They read the clock-event reasons, violation times, limits and temperatures the probe
recorded for each GPU. A SW power cap is never a finding: at full load an H200 sits at its
700 W limit with the SW power cap reason set most of the time (measured on nvidia-h200: a
sustained bf16 GEMM held it in 162 of 265 samples at a 1470 MHz median SM clock), and that
is the GPU working as designed, not a fault.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from topodoctor.model.fitness import reason_names
from topodoctor.model.snapshot import Gpu
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

# Clock-event reasons that mean the hardware or the driver's thermal protection is holding
# the clocks down (nvmlClocksEventReason*): a GPU in this state runs a job at a fraction of
# its speed, and a collective at the speed of its slowest rank.
SLOWDOWN_BITS = {
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
# Violation counters of the same causes (ns since the driver loaded). The power policy (the
# SW power cap), sync boost and low utilisation are left out on purpose.
SLOWDOWN_TIMES = ("thermal", "sw_thermal", "hw_thermal", "hw_power_brake")
IDLE_BIT = 0x1
# An idle GPU this close to its slowdown temperature has no headroom left for a job: cooling
# (fans, airflow, liquid loop) is failing or the inlet is too hot. H200s idle near 38 C with
# slowdown at 89 C.
IDLE_SLOWDOWN_MARGIN_C = 15


def _subject(g: Gpu) -> str:
    return f"GPU{g.index}"


@rule(
    "TD530",
    "gpu-clock-slowdown",
    "error",
)
def gpu_clock_slowdown(ctx: Context) -> Iterator[Issue]:
    """A GPU's clocks are held down by a hardware or thermal slowdown.

    A clock-event reason is active now: HW slowdown, HW thermal or HW power brake slowdown, or SW
    thermal slowdown. The SW power cap reason is not one of them: it is the normal state of a GPU at
    full load.

    Why it matters: these reasons mean the GPU protects itself from heat or from a power fault: its
    SM clock drops far below what a job expects, and every collective of the job waits for it.

    How to fix: find the cause the finding names: HW thermal or SW thermal slowdown means cooling
    (fans, airflow, liquid loop, inlet temperature); HW power brake means the board or the PSU
    signalled an external power limit (PSU failure, power shelf); HW slowdown alone can be either.
    Drain the node until it is fixed.
    """
    for g in ctx.live_gpus:
        mask = ctx.need(g.fitness.clock_events, _subject(g), "fitness.clock_events")
        if mask is None:
            continue
        active = [name for bit, name in SLOWDOWN_BITS.items() if mask & bit]
        if active:
            sm = g.fitness.sm_clock_mhz
            yield Issue(
                _subject(g),
                f"GPU{g.index} clocks are held down by {', '.join(active)}",
                {"reasons": active, "mask": mask, "all_reasons": reason_names(mask), "sm_clock_mhz": _num(sm)},
            )


def _num(v: object) -> Any:
    return v if isinstance(v, (int, float)) else None


@rule(
    "TD531",
    "gpu-slowdown-time-rising",
    "error",
)
def gpu_slowdown_time_rising(ctx: Context) -> Iterator[Issue]:
    """A GPU spent time in a thermal or power-brake slowdown during the check.

    Its violation counters (thermal policy, SW thermal, HW thermal, HW power brake) rose between the
    two readings the probe takes. They count since the driver loaded, so only their rise during the
    check says something about the GPU today. The power policy (SW power cap), sync boost and low
    utilisation counters rise on healthy GPUs and are not judged.

    Why it matters: a slowdown can come and go faster than a single reading of the reasons sees
    (TD530); the counters add up every nanosecond of it. A GPU that throttles while idle or lightly
    loaded will throttle under a job, and the job waits for it.

    How to fix: check cooling and power as for TD530, and drain the node until the GPU holds its
    clocks.
    """
    for g in ctx.live_gpus:
        start, end = g.fitness.start.violation_ns, g.fitness.end.violation_ns
        rose: dict[str, int] = {}
        for name in SLOWDOWN_TIMES:
            a = ctx.need(getattr(start, name), _subject(g), f"fitness.start.violation_ns.{name}")
            b = ctx.need(getattr(end, name), _subject(g), f"fitness.end.violation_ns.{name}")
            if a is not None and b is not None and b > a:
                rose[name] = b - a
        if rose:
            text = ", ".join(f"{k} +{v / 1e6:.1f} ms" for k, v in rose.items())
            yield Issue(_subject(g), f"GPU{g.index} was slowed during the check: {text}", {"rise_ns": rose})


@rule(
    "TD532",
    "applications-clocks-below-max",
    "warning",
)
def applications_clocks_below_max(ctx: Context) -> Iterator[Issue]:
    """A GPU's applications clocks are set below its maximum clocks.

    The applications clocks are the SM and memory clocks a job is allowed to run at. GPUs whose
    default applications clocks are below their maximum (some older data-centre boards) are reported
    too: the evidence shows both numbers.

    Why it matters: applications clocks stay as someone set them (nvidia-smi -ac) until reset or
    reboot; a GPU left below its maximum runs every job slower than its peers.

    How to fix: reset the applications clocks (`nvidia-smi -rac -i N`) unless the node is meant to
    run below its maximum clocks; a previous job or an administrator left them set.
    """
    for g in ctx.live_gpus:
        f = g.fitness
        for what, app_v, max_v in (
            ("SM", f.app_sm_clock_mhz, f.sm_clock_max_mhz),
            ("memory", f.app_memory_clock_mhz, f.memory_clock_max_mhz),
        ):
            key = "sm" if what == "SM" else "memory"
            app = ctx.need(app_v, _subject(g), f"fitness.app_{key}_clock_mhz")
            top = ctx.need(max_v, _subject(g), f"fitness.{key}_clock_max_mhz")
            if app is not None and top is not None and app < top:
                yield Issue(
                    _subject(g),
                    f"GPU{g.index} {what} applications clock is {app} MHz, below its maximum {top} MHz",
                    {"clock": key, "applications_mhz": app, "max_mhz": top},
                )


@rule(
    "TD533",
    "power-limit-below-default",
    "warning",
)
def power_limit_below_default(ctx: Context) -> Iterator[Issue]:
    """A GPU's enforced power limit is below its default (or expected) limit.

    The reference is the default limit, or, with an expectations file that holds one, the limit of
    this node type: below it, someone capped the GPU.

    Why it matters: under a sustained load the GPU then holds its clocks lower than its peers (an
    H200 at 500 W instead of 700 W), so a compute-bound job runs at the pace of the capped GPU.

    How to fix: restore the limit (`nvidia-smi -pl DEFAULT_W -i N`, as root) unless the node is
    meant to run capped.
    """
    expected_w = ctx.expect.power_limit_w if ctx.expect is not None else None
    for g in ctx.live_gpus:
        limit = ctx.need(g.fitness.power_limit_mw, _subject(g), "fitness.power_limit_mw")
        default = ctx.need(g.fitness.power_default_mw, _subject(g), "fitness.power_default_mw")
        # The node type's limit wins over the GPU's default: a fleet may run capped on purpose.
        should_mw = expected_w * 1000 if expected_w is not None else default
        if limit is None or should_mw is None or limit >= should_mw:
            continue
        yield Issue(
            _subject(g),
            f"GPU{g.index} power limit is {limit / 1000:.0f} W, below the {should_mw / 1000:.0f} W it should have",
            {"limit_w": limit / 1000, "default_w": _watts(default), "expected_w": expected_w},
        )


def _watts(mw: int | None) -> float | None:
    return mw / 1000 if mw is not None else None


@rule(
    "TD534",
    "idle-temperature-near-slowdown",
    "warning",
)
def idle_temperature_near_slowdown(ctx: Context) -> Iterator[Issue]:
    """An idle GPU is within 15 C of its slowdown temperature.

    Idle means the idle clock-event reason is set; a busy GPU is not judged: under load it is meant
    to run warm.

    Why it matters: an idle GPU should run far below its thresholds (H200s idle near 38 C against a
    slowdown at 89 C); one this hot before a job starts will throttle once the job loads it.

    How to fix: check the cooling of this GPU (fans, airflow, blanking panels, liquid loop) and the
    inlet temperature.
    """
    for g in ctx.live_gpus:
        mask = ctx.need(g.fitness.clock_events, _subject(g), "fitness.clock_events")
        if mask is None or not mask & IDLE_BIT:
            continue
        temp = ctx.need(g.fitness.temperature_c, _subject(g), "fitness.temperature_c")
        slowdown = ctx.need(g.fitness.slowdown_c, _subject(g), "fitness.slowdown_c")
        if temp is not None and slowdown is not None and temp >= slowdown - IDLE_SLOWDOWN_MARGIN_C:
            yield Issue(
                _subject(g),
                f"GPU{g.index} is idle at {temp} C, within {slowdown - temp} C of its slowdown at {slowdown} C",
                {"temperature_c": temp, "slowdown_c": slowdown, "margin_c": IDLE_SLOWDOWN_MARGIN_C},
            )
