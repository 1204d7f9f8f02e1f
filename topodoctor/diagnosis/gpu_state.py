"""Causes that live in the GPUs themselves, shared by every symptom: someone else's process, links
down, a PCIe link trained narrow, P2P refused, clocks held down, memory errors, a GPU lost.

Each check looks at the GPUs a symptom involves and returns candidates (with the share of the healthy
figure they leave, where that can be told) and what it ruled out. Reads the snapshot only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from topodoctor.core.text import plural
from topodoctor.diagnosis.load import Foreign, Load
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.fitness import reason_names
from topodoctor.model.snapshot import Gpu, HostSnapshot, RemappedRows

# nvmlClocksEventReason bits that mean protection is holding the clocks down (rules/fitness.py TD530)
SLOWDOWN_MASK = 0x8 | 0x20 | 0x40 | 0x80
IDLE = 0x1
Found = tuple[list[Candidate], list[str]]


def _scaled(reference: float | None, factor: float | None) -> float | None:
    return None if reference is None or factor is None else reference * factor


def _gpus(snap: HostSnapshot, indices: Iterable[int]) -> list[Gpu]:
    wanted = set(indices)
    return [g for g in snap.gpus if g.index in wanted]


def foreign_load(loads: dict[int, Load], indices: Iterable[int], reference: float | None) -> Found:
    """Someone else's work on the GPUs: the busiest such GPU, and the share of its time left to ours."""
    idx = sorted(set(indices))
    busy = [loads[i] for i in idx if i in loads and loads[i].busy]
    if not busy:
        seen = [i for i in idx if i in loads]
        if not seen:
            return [], []
        gpus = ", ".join(f"GPU{i}" for i in seen)
        return [], [f"other processes: none on {gpus} (topodoctor's own workers excluded)"]
    worst = max(busy, key=lambda x: (x.contenders, x.utilization_pct or 0, len(x.foreign)))
    k = worst.contenders
    named = bool(worst.foreign)
    evidence = {
        "gpu": worst.index,
        "utilization_pct": worst.utilization_pct,
        "processes": [_process(f) for f in worst.foreign],
    }
    pids = " ".join(str(f.pid) for f in worst.foreign) or "(see nvidia-smi)"
    fix = (
        f"Another process shares GPU{worst.index}: wait for it or stop it (kill {pids}), or move the job to idle "
        "GPUs; re-run the measurement on idle GPUs."
    )
    what = f"another job's process on {worst.describe()}"
    share = 1.0 / (1 + k) if k else None
    return [Candidate(what, fix, evidence, _scaled(reference, share), direct=named)], []


def _process(f: Foreign) -> dict[str, Any]:
    out: dict[str, Any] = {"pid": f.pid, "uid": f.uid, "command": f.command, "memory_bytes": f.memory_bytes}
    if f.seen is not None:  # seen by the samples during the run only
        out.update(first_s=f.seen.first_s, last_s=f.seen.last_s, run_s=f.run_s, sm_util_pct=f.seen.sm_util_pct)
    return out


def links_down(snap: HostSnapshot, indices: Iterable[int], reference: float | None) -> Found:
    """A GPU with fewer NVLinks up than its peers (or than it has): a ring runs at its pace."""
    gpus = [g for g in _gpus(snap, indices) if g.lost is None]
    counts = {g.index: sum(1 for ln in g.nvlinks if ln.active is True) for g in gpus}
    if not counts or max(counts.values()) == 0:
        return [], []
    full = max(max(counts.values()), *(len(g.nvlinks) for g in gpus))
    down = {i: n for i, n in counts.items() if n < full}
    if not down:
        return [], [f"NVLinks: all {full} up on " + ", ".join(f"GPU{i}" for i in sorted(counts))]
    worst = min(down, key=lambda i: down[i])
    factor = down[worst] / full
    what = f"GPU{worst} has {down[worst]} of {full} NVLinks up"
    fix = f"Bring GPU{worst}'s NVLinks back (TD1xx findings; a GPU reset or service); drain the node meanwhile."
    return [
        Candidate(what, fix, {"gpu": worst, "links_up": down[worst], "links": full}, _scaled(reference, factor))
    ], []


def pcie_narrow(snap: HostSnapshot, indices: Iterable[int], reference: float | None) -> Found:
    """A GPU whose PCIe link trained narrower than it can (the width does not drop at idle; the
    generation does, so it is left out)."""
    found: list[Candidate] = []
    for g in _gpus(snap, indices):
        cur, full = g.pcie.width_current, g.pcie.width_max
        if isinstance(cur, int) and isinstance(full, int) and 0 < cur < full:
            what = f"GPU{g.index}'s PCIe link trained at x{cur} of x{full}"
            fix = f"Reseat GPU{g.index} or check its riser and slot (TD2xx): its PCIe link runs at x{cur}."
            ev = {"gpu": g.index, "width": cur, "width_max": full}
            found.append(Candidate(what, fix, ev, _scaled(reference, cur / full)))
    return found, [] if found else ["PCIe: every link at its full width"]


def p2p_refused(snap: HostSnapshot, pairs: Iterable[tuple[int, int]], pcie_share: float | None) -> Found:
    """NVML says peer-to-peer reads or writes are not possible between two GPUs: traffic is staged."""
    found: list[Candidate] = []
    checked = 0
    for a, b in pairs:
        try:
            st = snap.p2p(a, b)
        except KeyError:
            continue
        checked += 1
        bad = [f"{k} {v}" for k, v in (("read", st.read), ("write", st.write)) if isinstance(v, str) and v != "OK"]
        if bad:
            what = f"P2P between GPU{a} and GPU{b} is not available (NVML: {', '.join(bad)})"
            fix = "Find why P2P is refused (TD3xx: ACS, the IOMMU, the fabric manager); NCCL stages through the host."
            found.append(Candidate(what, fix, {"pair": [a, b], "p2p": bad}, pcie_share))
    return found, [] if found or not checked else ["P2P: NVML allows it between every pair"]


def clocks_held(
    snap: HostSnapshot, indices: Iterable[int], memory: bool = False, reference: float | None = None
) -> Found:
    """Clocks held down by a slowdown reason (thermal, power brake, HW slowdown); for memory figures,
    the memory clock below its maximum scales the expected figure."""
    found: list[Candidate] = []
    read = []
    for g in _gpus(snap, indices):
        f = g.fitness
        mask = f.clock_events if isinstance(f.clock_events, int) else None
        if mask is None:
            continue
        read.append(g.index)
        factor = None
        mem, top = f.memory_clock_mhz, f.memory_clock_max_mhz
        # an idle GPU lowers its memory clock by design: only a busy one's lower clock is held down
        if memory and not mask & IDLE and isinstance(mem, int) and isinstance(top, int) and 0 < mem < top:
            factor = mem / top
        if mask & SLOWDOWN_MASK or factor is not None:
            names = reason_names(mask & SLOWDOWN_MASK) or ["memory clock below maximum"]
            what = f"GPU{g.index}'s clocks are held down ({', '.join(names)})"
            fix = f"Find what holds GPU{g.index}'s clocks down (TD530: cooling, power brake); drain until fixed."
            found.append(Candidate(what, fix, {"gpu": g.index, "reasons": names}, _scaled(reference, factor)))
    if found or not read:
        return found, []
    return [], ["clocks: no slowdown reason on " + ", ".join(f"GPU{i}" for i in read)]


def memory_faults(snap: HostSnapshot, indices: Iterable[int]) -> Found:
    """Row remapping pending or failed, uncorrectable ECC errors since the last reset."""
    found: list[Candidate] = []
    for g in _gpus(snap, indices):
        rows = g.remapped_rows
        bits = []
        if isinstance(rows, RemappedRows):
            if rows.pending:
                bits.append("row remapping pending")
            if rows.failed:
                bits.append("row remapping failed")
        if isinstance(g.ecc_uncorrected_volatile, int) and g.ecc_uncorrected_volatile > 0:
            bits.append(f"{plural(g.ecc_uncorrected_volatile, 'uncorrectable ECC error')}")
        if bits:
            what = f"GPU{g.index}'s memory: {', '.join(bits)}"
            fix = f"Reset GPU{g.index} to apply the remapping; replace it if errors recur (TD502-TD504)."
            found.append(Candidate(what, fix, {"gpu": g.index, "memory": bits}, direct=True, confidence="medium"))
    return found, []


def lost(snap: HostSnapshot, indices: Iterable[int]) -> Found:
    """A GPU that stopped answering NVML, or one the driver logged a fatal Xid for."""
    found: list[Candidate] = []
    for g in _gpus(snap, indices):
        if g.lost is not None:
            what = f"GPU{g.index} stopped answering NVML ({g.lost.error})"
            fix = f"GPU{g.index} is lost: drain the node and reset or replace the GPU (TD507)."
            found.append(Candidate(what, fix, {"gpu": g.index, "error": g.lost.error}, confidence="high"))
    events = snap.kernel_events
    buses = {g.bus_id.lower(): g.index for g in _gpus(snap, indices) if isinstance(g.bus_id, str)}
    for x in getattr(events, "xids", ()):
        idx = next((i for b, i in buses.items() if b.endswith(x.bus_id.lower()[-12:])), None)
        if idx is not None and x.code in (48, 74, 79, 94, 95, 119, 120, 144, 145, 146, 147, 148, 149, 150):
            what = f"the driver logged Xid {x.code} on GPU{idx}"
            fix = f"Xid {x.code} on GPU{idx}: see TD52x; drain the node and have the GPU checked."
            found.append(Candidate(what, fix, {"gpu": idx, "xid": x.code, "text": x.text[:120]}, confidence="high"))
    return found, []
