"""The cause of a slow or failed collective, from everything the run left: its settings as NCCL
logged them, NCCL's account (transports, channels, per-call choices, warnings), who else was on the
GPUs, the GPUs' own state, the copy rates between them, and the topology's model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topodoctor.diagnosis import during, gpu_state
from topodoctor.diagnosis.fallback import facts_of_run, fallback_transports
from topodoctor.diagnosis.load import loads
from topodoctor.diagnosis.nccl_causes import OpRun, failure_candidates, slow_candidates
from topodoctor.diagnosis.rank import Candidate, best_cause
from topodoctor.diagnosis.run import model_busbw, rank_gpus, ring_gbps, settings
from topodoctor.model.collectives import CollectivesResult
from topodoctor.model.copies import BandwidthResult
from topodoctor.model.findings import Cause
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.topology.copy_rates import expected_pairs
from topodoctor.topology.view import HostView

COPY_HEALTHY = 0.8  # a one-way copy at this share of its path's nominal rate or more: the link is fine


@dataclass(frozen=True)
class CollectiveSymptom:
    """What a finding says went wrong with a collective."""

    op: str
    size_bytes: int
    measured_gbps: float | None = None  # busbw, for a slow op
    failure: str | None = None  # hang, error, oom, died, join: for a failed op
    rank: int | None = None  # the rank a slow-rank or failure finding names


def _op_run(snap: HostSnapshot, res: CollectivesResult, op: str, size: int, gpus: tuple[int, ...]) -> OpRun:
    model, ring = model_busbw(snap, res, op, size), ring_gbps(snap, res)
    return OpRun(op, size, snap, res.nccl, gpus, len(res.nodes), model, ring, _fell(snap, res))


def _fell(snap: HostSnapshot, res: CollectivesResult) -> dict[str, int]:
    """The connections NCCL sent off P2P on one node, by the join TD003 and diagnose read (fallback.py)."""
    if res.nccl is None:
        return {}
    links = {pair: c.label for pair, c in HostView(snap).connections.items()}
    return fallback_transports(facts_of_run(res, rank_gpus(snap, res), links))


def _copies(
    snap: HostSnapshot, bw: BandwidthResult | None, gpus: tuple[int, ...], model: float | None
) -> tuple[list[Candidate], list[str]]:
    """The measured copies between the run's GPUs: slow copies point at the links, healthy ones clear them."""
    if bw is None or len(gpus) < 2:
        return [], []
    exp = expected_pairs(snap)
    worst: tuple[float, int, int, float, float] | None = None
    for a in gpus:
        for b in gpus:
            m = bw.find("oneway", a, b) if a != b else None
            e = exp.get((a, b))
            if m is None or m.value is None or e is None or not e.nominal_gbps:
                continue
            share = m.value.median / e.nominal_gbps
            if worst is None or share < worst[0]:
                worst = (share, a, b, m.value.median, e.nominal_gbps)
    if worst is None:
        return [], []
    share, a, b, got, nominal = worst
    if share >= COPY_HEALTHY:
        return [], [f"links: copies GPU{a}->GPU{b} at {got:.0f} GB/s, {share:.2f} of the path's {nominal:.0f}"]
    what = f"copies GPU{a}->GPU{b} are slow too ({got:.0f} of {nominal:.0f} GB/s): the link, not NCCL"
    fix = f"Check the GPU{a}-GPU{b} links (TD1xx, TD7xx findings; `topodoctor bandwidth`)."
    expected = model * share / COPY_HEALTHY if model is not None else None
    return [Candidate(what, fix, {"pair": [a, b], "copy_gbps": round(got, 1), "nominal_gbps": nominal}, expected)], []


def _unsampled(res: CollectivesResult) -> str:
    """Why a run carries no samples of NVML."""
    if res.source == "nccl-tests":
        return "nccl-tests' result"
    if res.backend != "nccl":
        return f"a {res.backend} run"
    return during.OLDER


def _choice(res: CollectivesResult, op: str, size: int, settings_found: bool) -> list[Candidate]:
    """NCCL's own choice for the call, where its TUNING log says it: a protocol other than Simple for a
    large message, with no setting to explain it, points at a tuner plugin or a config file."""
    acc = res.nccl
    c = acc.choice(op, size) if acc is not None else None
    if c is None or settings_found or c.protocol == "Simple":
        return []
    what = f"NCCL chose {c.algorithm}/{c.protocol} for {op} at {size >> 20} MiB (Simple carries large messages)"
    fix = "Look for a tuner plugin (NCCL_TUNER_PLUGIN) or nccl.conf settings that steer NCCL's choice."
    return [Candidate(what, fix, {"algorithm": c.algorithm, "protocol": c.protocol, "channels": c.channels})]


def collective_cause(
    sym: CollectiveSymptom,
    snap: HostSnapshot,
    res: CollectivesResult,
    bandwidth: BandwidthResult | None,
    fallback_fix: str,
) -> Cause:
    """The cause of one collective symptom, ranked from every candidate the evidence offers."""
    by_rank = rank_gpus(snap, res)
    gpus = tuple(sorted(set(by_rank.values())))
    run = _op_run(snap, res, sym.op, sym.size_bytes, gpus)
    if sym.failure is not None:
        return _failed(sym, run, res, gpus, fallback_fix)
    if sym.rank is not None:
        focus = (by_rank[sym.rank],) if sym.rank in by_rank else gpus
        return _slow_rank(sym, run, res, focus, fallback_fix)
    return _slow(sym, run, res, bandwidth, fallback_fix)


class _Gather:
    """Candidates and ruled-out notes as the checks hand them over."""

    def __init__(self) -> None:
        self.cands: list[Candidate] = []
        self.ruled: list[str] = []

    def add(self, got: tuple[list[Candidate], list[str]]) -> None:
        self.cands.extend(got[0])
        self.ruled.extend(got[1])


def _slow(
    sym: CollectiveSymptom, run: OpRun, res: CollectivesResult, bandwidth: BandwidthResult | None, fix: str
) -> Cause:
    g = _Gather()
    reference, snap, gpus = run.model, run.snap, run.gpus
    g.add(slow_candidates(settings(res), run))
    g.add(gpu_state.foreign_load(loads(snap, res.activity, res.during), gpus, reference))
    g.add(during.sampled(res.during, gpus, _unsampled(res)))
    g.add(gpu_state.links_down(snap, gpus, reference))
    g.add(gpu_state.clocks_held(snap, gpus))
    g.add(_copies(snap, bandwidth, gpus, reference))
    g.add(gpu_state.p2p_refused(snap, [(a, b) for a in gpus for b in gpus if a < b], None))
    g.cands.extend(_choice(res, sym.op, sym.size_bytes, any(c.evidence.get("variable") for c in g.cands)))
    symptom: dict[str, Any] = {
        "op": sym.op,
        "size_bytes": sym.size_bytes,
        "measured_gbps": sym.measured_gbps,
        "model_gbps": None if reference is None else round(reference, 1),
    }
    choice = res.nccl.choice(sym.op, sym.size_bytes) if res.nccl is not None else None
    if choice is not None:  # NCCL's own account of the call (its TUNING log), beside the cause
        symptom["nccl_choice"] = {
            "algorithm": choice.algorithm,
            "protocol": choice.protocol,
            "channels": choice.channels,
            "predicted_busbw_gbps": choice.predicted_busbw_gbps,
        }
    return best_cause(g.cands, reference, sym.measured_gbps, g.ruled, fix, symptom)


def _slow_rank(sym: CollectiveSymptom, run: OpRun, res: CollectivesResult, focus: tuple[int, ...], fix: str) -> Cause:
    """A rank slower than the others: its GPU's state and load, its pace (1 / its time ratio) against 1."""
    g = _Gather()
    g.add(gpu_state.foreign_load(loads(run.snap, res.activity, res.during), focus, 1.0))
    g.add(during.sampled(res.during, focus, _unsampled(res)))
    g.add(gpu_state.links_down(run.snap, focus, 1.0))
    g.add(gpu_state.clocks_held(run.snap, focus))
    g.add(gpu_state.memory_faults(run.snap, focus))
    ratio = sym.measured_gbps
    pace = 1.0 / ratio if ratio else None
    symptom = {"op": sym.op, "size_bytes": sym.size_bytes, "rank": sym.rank, "time_ratio": ratio}
    return best_cause(g.cands, 1.0, pace, g.ruled, fix, symptom)


def _failed(sym: CollectiveSymptom, run: OpRun, res: CollectivesResult, gpus: tuple[int, ...], fix: str) -> Cause:
    g = _Gather()
    warnings = res.nccl.warnings if res.nccl is not None else ()
    g.add(failure_candidates(settings(res), run, sym.failure or "error", warnings))
    g.add(gpu_state.lost(run.snap, gpus))
    g.add(during.sampled(res.during, gpus, _unsampled(res), clocks=False))  # a link that recovered mid-run
    if sym.failure == "oom":
        held, ruled = gpu_state.foreign_load(loads(run.snap, res.activity, res.during), gpus, None)
        g.ruled.extend(ruled)
        for c in held:
            what = c.what.replace("another job's process", "another job's process holding memory")
            g.cands.append(Candidate(what, c.fix, c.evidence, confidence="high"))
    g.add(gpu_state.memory_faults(run.snap, gpus))
    symptom = {"op": sym.op, "size_bytes": sym.size_bytes, "failure": sym.failure, "rank": sym.rank}
    return best_cause(g.cands, None, None, g.ruled, fix, symptom)
