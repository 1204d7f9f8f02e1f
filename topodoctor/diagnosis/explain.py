"""One place where findings that report a symptom get their cause.

The rules say what is wrong (a collective short of the topology's busbw, a hang, a slow copy, low
HBM); this joins what else the check or run gathered and names why, in the finding itself: the
message and the fix lead with the cause, the cause object carries its evidence, confidence and what
was ruled out. Severity is never touched: a finding explained is as bad as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from topodoctor.diagnosis.collective import CollectiveSymptom, collective_cause
from topodoctor.diagnosis.devices import DeviceSymptom, device_cause
from topodoctor.diagnosis.symptoms import SYMPTOMS, SymptomKind
from topodoctor.model.collectives import CollectivesResult
from topodoctor.model.copies import BandwidthResult, Mode
from topodoctor.model.findings import NOT_FOUND, Cause, Finding
from topodoctor.model.fitness_results import FitnessResult
from topodoctor.model.snapshot import HostSnapshot

SIZE = re.compile(r" at (\d+)([KMG])\b")
GPU = re.compile(r"^GPU(\d+)(?:-GPU(\d+))?$")
RULED_SHOWN = 2  # ruled-out items a "cause not found" message names; the cause object has them all


@dataclass(frozen=True)
class Case:
    """What the check or run gathered besides the findings: the host, the results, the environment."""

    snap: HostSnapshot
    collectives: CollectivesResult | None = None
    bandwidth: BandwidthResult | None = None
    fitness: FitnessResult | None = None


def _size(f: Finding) -> int | None:
    size = f.evidence.get("size_bytes")
    if isinstance(size, int):
        return size
    m = SIZE.search(f.message)
    if m is None:
        return None
    return int(m.group(1)) << {"K": 10, "M": 20, "G": 30}[m.group(2)]


def _collective(f: Finding, kind: SymptomKind, case: Case) -> Cause | None:
    res = case.collectives
    if res is None:
        return None
    op = str(f.evidence.get("op") or f.subject)
    if kind == "collective-failed":
        failure = str(f.evidence.get("kind") or "error")
        sym = CollectiveSymptom(op, _size(f) or 0, failure=failure, rank=f.evidence.get("rank"))
    elif kind == "rank-slow":
        ratio = f.evidence.get("ratio")
        sym = CollectiveSymptom(op, _size(f) or 0, float(ratio) if ratio else None, rank=f.evidence.get("rank"))
    else:
        got = f.evidence.get("busbw_gbps", f.evidence.get("measured_gbps"))
        size = _size(f)
        if size is None:
            row = res.largest(op)  # type: ignore[arg-type]
            size = row.size_bytes if row is not None else 0
        sym = CollectiveSymptom(op, size, float(got) if isinstance(got, (int, float)) else None)
    return collective_cause(sym, case.snap, res, case.bandwidth, f.fix)


def _device(f: Finding, kind: SymptomKind, case: Case) -> Cause | None:
    m = GPU.match(f.subject)
    if m is None:
        return None
    src, dst = int(m.group(1)), (int(m.group(2)) if m.group(2) else None)
    ev = f.evidence
    if kind == "copy-slow":
        if case.bandwidth is None:
            return None
        if ev.get("mode") in ("h2d", "d2h"):
            dst = -1
        measured = ev.get("gbps")
        reference = ev.get("peer_median_gbps") or ev.get("nominal_gbps") or ev.get("link_gbps")
        modes: dict[Any, Mode] = {
            "bidir": "bidir",
            "h2d": "h2d",
            "d2h": "d2h",
            "sm_oneway": "sm_oneway",
            "sm_bidir": "sm_bidir",
        }
        mode = modes.get(ev.get("mode"), "oneway")
        ends = (-1, src) if mode == "h2d" else (src, dst if dst is not None else -1)
        copy = case.bandwidth.find(mode, *ends)
        path, nvlink = (copy.path, copy.nvlink_bytes) if copy is not None else (None, None)
        sym = DeviceSymptom("copy", src, dst, measured, reference, path, nvlink)
        return device_cause(sym, case.snap, case.bandwidth.activity, f.fix, case.bandwidth.during, sampled=True)
    if case.fitness is None:
        return None
    measured = ev.get("traffic_gbps", ev.get("gbps", ev.get("tflops")))
    reference = ev.get("peak_gbps") or ev.get("peer_median_gbps") or ev.get("peer_median_tflops")
    sym = DeviceSymptom("memory" if kind == "memory-low" else "compute", src, None, measured, reference)
    # the memory figures are sampled while the kernels run; compute comes from the GEMM stress's own samples
    return device_cause(sym, case.snap, case.fitness.activity, f.fix, case.fitness.during, kind == "memory-low")


def cause_of(f: Finding, case: Case) -> Cause | None:
    """The cause of one finding's symptom, or None when the finding reports no symptom."""
    kind = SYMPTOMS.get(f.code)
    if kind is None:
        return None
    if kind.startswith(("collective", "rank")):
        return _collective(f, kind, case)
    return _device(f, kind, case)


def _lead(f: Finding, cause: Cause) -> Finding:
    if cause.found:
        return replace(f, message=f"{cause.what}: {f.message}", fix=f"{cause.fix} ({f.fix})", cause=cause)
    shown = "; ".join(cause.ruled_out[:RULED_SHOWN])
    tail = f" ({NOT_FOUND}; ruled out: {shown})" if shown else f" ({NOT_FOUND})"
    return replace(f, message=f.message + tail, cause=cause)


def explain(findings: Iterable[Finding], case: Case) -> tuple[Finding, ...]:
    """The findings, each symptom with its cause leading its message and fix; the rest unchanged.

    A fault in the engine on some input it did not foresee leaves that finding as the rule raised it,
    saying so in its cause: an explanation never costs a check the fault it found."""
    out = []
    for f in findings:
        try:
            cause = cause_of(f, case)
        except Exception as exc:  # the finding stands; only its cause could not be derived
            why = f"the cause engine failed on this finding ({type(exc).__name__}: {str(exc)[:80]})"
            cause = Cause(NOT_FOUND, "none", f.fix, {"error": why}, None, (why,))
        out.append(f if cause is None else _lead(f, cause))
    return tuple(out)


def cause_json(cause: Cause) -> dict[str, Any]:
    """The cause as JSON carries it (``what`` first)."""
    return {
        "what": cause.what,
        "confidence": cause.confidence,
        "explains": cause.explains,
        "evidence": cause.evidence,
        "ruled_out": list(cause.ruled_out),
        "others": list(cause.others),
        "fix": cause.fix,
    }
