"""What NVML showed while a run went on, as causes: clocks held down by protection while it ran, link
error counters that rose between its start and its end; and what the samples rule out (no other
process, no slowdown, no counter moved), or that the run was not sampled at all.

Someone else's process seen during the run is judged with the others, as load (``load.py``). SW
power cap alone is never a cause: a GPU at full load sits at its power limit by design; HW slowdown,
SW / HW thermal slowdown and the HW power brake are protection acting, and are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.during import GpuDuring, RunSampling

Found = tuple[list[Candidate], list[str]]
# A slowdown seen in under this share of a GPU's samples is too brief to explain a run's figure.
BRIEF = 0.1
# PCIe replays a second from which they cost bandwidth (as TD2xx judge the PCIe retry counters);
# a few replays over a run are the normal life of many links. Any NVLink replay, recovery or CRC
# error during a run is a link at fault: healthy links count none.
PCIE_REPLAYS_PER_S = 100.0


def _gpus(during: RunSampling, indices: Iterable[int]) -> list[GpuDuring]:
    wanted = set(indices)
    return [g for g in during.gpus if g.index in wanted]


def _names(gpus: Iterable[GpuDuring]) -> str:
    return ", ".join(f"GPU{g.index}" for g in gpus)


OLDER = "a result from before runs were sampled, or NVML was not available"


def not_sampled(why: str = OLDER) -> str:
    """The note a result without samples carries into every cause."""
    return f"NVML during the run: not sampled ({why}); who else ran, clocks and link counters unknown"


def sampled(during: RunSampling | None, indices: Iterable[int], unsampled: str = OLDER, clocks: bool = True) -> Found:
    """Candidates and ruled-out notes from the samples of the run's GPUs (without ``clocks``, the
    link counters alone: a slowdown makes a run slow, never a failure)."""
    if during is None:
        return [], [not_sampled(unsampled)]
    gpus = _gpus(during, indices)
    if not gpus:
        return [], ["NVML during the run: none of the run's GPUs sampled"]
    cands: list[Candidate] = []
    ruled: list[str] = []
    quiet = [g for g in gpus if not g.foreign]
    if quiet:
        ruled.append(
            f"other processes during the run: none on {_names(quiet)} in {during.ticks} samples over "
            f"{during.duration_s:.1f} s (topodoctor's own excluded)"
        )
    checks = [held_down(gpus)] if clocks else []
    for got in (*checks, counters_rose(gpus, during.duration_s)):
        cands.extend(got[0])
        ruled.extend(got[1])
    failed = [f"GPU{g.index} ({g.error})" for g in gpus if g.error]
    if failed:
        ruled.append("NVML during the run: sampling stopped on " + ", ".join(failed))
    return cands, ruled


def held_down(gpus: list[GpuDuring]) -> Found:
    """A GPU whose clocks protection held down in a tenth of its samples or more."""
    found: list[Candidate] = []
    ruled: list[str] = []
    capped = []
    for g in gpus:
        slow = g.slowdown()
        if g.reasons.get("sw_power_cap"):
            capped.append(f"GPU{g.index} in {g.reasons['sw_power_cap']}")
        if not slow:
            continue
        name, n = max(slow.items(), key=lambda kv: kv[1])
        if n < BRIEF * max(1, g.samples):
            ruled.append(f"clocks during the run: {name} on GPU{g.index} in {n} of {g.samples} samples, too brief")
            continue
        bits = [f"{k} in {v} of {g.samples} samples" for k, v in sorted(slow.items(), key=lambda kv: -kv[1])]
        if g.sm_mhz_min is not None and g.sm_mhz_max:
            bits.append(f"SM clock down to {g.sm_mhz_min} of {g.sm_mhz_max} MHz")
        if g.temp_max_c is not None:
            bits.append(f"up to {g.temp_max_c} C")
        what = f"GPU{g.index}'s clocks were held down while the run went on ({', '.join(bits)})"
        fix = (
            f"Find what holds GPU{g.index}'s clocks down (cooling, airflow, power delivery: `nvidia-smi -q -d "
            "PERFORMANCE`, TD530); drain the node until it is fixed."
        )
        evidence: dict[str, Any] = {
            "gpu": g.index,
            "reasons_in_samples": slow,
            "samples": g.samples,
            "sm_mhz_min": g.sm_mhz_min,
            "sm_mhz_max": g.sm_mhz_max,
            "temp_max_c": g.temp_max_c,
            "power_max_w": g.power_max_w,
            "power_limit_w": g.power_limit_w,
        }
        found.append(Candidate(what, fix, evidence))
    calm = [g for g in gpus if not g.slowdown() and g.samples]
    if calm:
        cap = f" (SW power cap on {', '.join(capped)} samples: a GPU at its power limit, normal at full load)"
        ruled.append(f"clocks during the run: no slowdown reason on {_names(calm)}" + (cap if capped else ""))
    return found, ruled


def _describe(rose: dict[str, int], duration_s: float) -> tuple[list[str], list[str]]:
    """(what rose that is a fault, what rose too little to be one)."""
    faults: list[str] = []
    small: list[str] = []
    for name, n in sorted(rose.items()):
        if name == "pcie_replay":
            rate = n / duration_s if duration_s > 0 else float("inf")
            (faults if rate >= PCIE_REPLAYS_PER_S else small).append(f"PCIe replays +{n}")
        else:
            link, kind = name.removeprefix("nvlink").split("_", 1)
            faults.append(f"NVLink {link} {kind} +{n}")
    return faults, small


def counters_rose(gpus: list[GpuDuring], duration_s: float) -> Found:
    """A GPU whose NVLink replay, recovery or CRC counters rose during the run, or whose PCIe link
    replayed at a rate that costs bandwidth."""
    found: list[Candidate] = []
    ruled: list[str] = []
    still = []
    for g in gpus:
        if not g.counters_before or not g.counters_after:
            ruled.append(f"link counters of GPU{g.index}: not read ({g.counters_error or 'no answer'})")
            continue
        faults, small = _describe(g.rose(), duration_s)
        if small:
            ruled.append(f"GPU{g.index}: {', '.join(small)} in {duration_s:.1f} s, under {PCIE_REPLAYS_PER_S:.0f}/s")
        if not faults:
            still.append(g)
            continue
        what = f"GPU{g.index}'s link error counters rose during the run ({', '.join(faults)})"
        fix = (
            f"Check GPU{g.index}'s links (`nvidia-smi nvlink -e -i {g.index}`, `nvidia-smi -q -d PCIE -i {g.index}`): "
            "a link that replays or recovers under load is marginal; reseat or service it, drain the node meanwhile."
        )
        evidence = {"gpu": g.index, "rose": g.rose(), "run_s": duration_s}
        found.append(Candidate(what, fix, evidence, confidence="medium"))
    if still:
        ruled.append(f"link counters: no NVLink replay, recovery or CRC error during the run on {_names(still)}")
    return found, ruled
