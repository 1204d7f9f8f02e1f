"""The cause of a slow copy or a low memory (HBM) or compute figure: the GPUs' own state joined with
who else was on them while the copy or the fitness pass ran."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topodoctor.diagnosis import during as sampled_run
from topodoctor.diagnosis import gpu_state
from topodoctor.diagnosis.load import loads
from topodoctor.diagnosis.rank import Candidate, best_cause
from topodoctor.model.copies import Activity
from topodoctor.model.during import RunSampling
from topodoctor.model.findings import Cause
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.topology.copy_rates import expected_pairs


@dataclass(frozen=True)
class DeviceSymptom:
    """A slow copy (``src``/``dst``, -1 for the host) or a low per-GPU figure (``src`` alone)."""

    kind: str  # copy, memory, compute
    src: int
    dst: int | None
    measured: float | None
    reference: float | None  # what a healthy GPU or path reaches (its peers, its path, its limit)
    path: str | None = None  # a copy's path as the copy worker saw it: p2p, staged (through the host)
    nvlink_bytes: int | None = None  # bytes NVML's NVLink counters saw during the copies


def _path(sym: DeviceSymptom, cls: str) -> list[Candidate]:
    """What the copy worker saw of the path: staged through host memory, or NVLink carrying nothing."""
    pair = f"GPU{sym.src}->GPU{sym.dst}"
    fix = f"Find why peer access between GPU{sym.src} and GPU{sym.dst} is off (TD3xx: P2P status, the fabric manager)."
    if sym.path == "staged":
        what = f"the driver staged the {pair} copies through host memory: no peer access over {cls}"
        return [Candidate(what, fix, {"path": sym.path}, confidence="high")]
    if sym.nvlink_bytes == 0:
        what = f"NVLink carried none of the {pair} copies (NVML's counters stood still)"
        return [Candidate(what, fix, {"nvlink_bytes": 0}, confidence="high")]
    return []


def device_cause(
    sym: DeviceSymptom,
    snap: HostSnapshot,
    activity: tuple[Activity, ...],
    fallback_fix: str,
    during: RunSampling | None = None,
    sampled: bool = False,
) -> Cause:
    """The cause of a copy or per-GPU symptom, ranked from the GPUs' state and their load; with
    ``sampled`` (a measurement that is watched while it runs, the copies), from what NVML showed
    while it ran too, or the note that it was not sampled."""
    gpus = tuple(i for i in (sym.src, sym.dst) if i is not None and i >= 0)
    ref = sym.reference
    cands: list[Candidate] = []
    ruled: list[str] = []

    def add(got: tuple[list[Candidate], list[str]]) -> None:
        cands.extend(got[0])
        ruled.extend(got[1])

    add(gpu_state.foreign_load(loads(snap, activity, during), gpus, ref))
    if sampled:
        add(sampled_run.sampled(during, gpus))
    add(gpu_state.clocks_held(snap, gpus, memory=sym.kind == "memory", reference=ref))
    if sym.kind == "copy":
        pair = sym.dst is not None and sym.dst >= 0 and sym.src >= 0
        cls = expected_pairs(snap).get((sym.src, sym.dst or 0)) if pair else None
        if cls is not None and cls.cls.startswith("NV"):
            cands.extend(_path(sym, cls.cls))
            add(gpu_state.links_down(snap, gpus, ref))
            share = cls.pcie_gbps / cls.nominal_gbps if cls.pcie_gbps and cls.nominal_gbps else None
            add(
                gpu_state.p2p_refused(
                    snap, [(sym.src, sym.dst or 0)], None if ref is None or share is None else ref * share
                )
            )
        else:
            add(gpu_state.pcie_narrow(snap, gpus, ref))
            if pair:
                add(gpu_state.p2p_refused(snap, [(sym.src, sym.dst or 0)], None))
    else:
        add(gpu_state.memory_faults(snap, gpus))
    add(gpu_state.lost(snap, gpus))
    symptom: dict[str, Any] = {"measured": sym.measured, "reference": ref}
    return best_cause(cands, ref, sym.measured, ruled, fallback_fix, symptom)
