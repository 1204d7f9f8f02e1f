"""`job` as the service runs it: a job's flight-recorder dumps, rank map, the nodes' results, NCCL
RAS and this node's GPUs, each read or asked under the command's one budget, joined into one verdict."""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from topodoctor.core import codec, fileio
from topodoctor.core.budget import Budget, run_with_budget
from topodoctor.core.errors import InputError, TopodoctorError
from topodoctor.job import load, ras
from topodoctor.job.placement import Place, by_rank
from topodoctor.job.ras import RasReport
from topodoctor.job.verdict import JobInput, JobOutcome, judge_job
from topodoctor.model.activity import ActivitySample
from topodoctor.model.stamp import GpuId
from topodoctor.probe import sampler
from topodoctor.service.request_job import JobRequest as JobRequest  # re-exported: what a job verdict runs
from topodoctor.service.stamping import stamp


def diagnose(req: JobRequest, budget: Budget) -> tuple[JobOutcome, dict[str, Any] | None]:
    """The verdict, and the live sampling's recording when one was asked for."""
    started_at = time.time()
    if not (req.dumps or req.ras or req.ras_file or req.live or req.replay_live):
        raise InputError("nothing to judge: give dumps, --ras, --ras-file, --live or --replay-live")
    notes: list[str] = []
    got, dump_notes = load.read_dumps(list(req.dumps), budget.left()) if req.dumps else ((), ())
    notes += dump_notes
    if req.dumps and not got and not (req.ras or req.ras_file or req.live or req.replay_live):
        raise InputError(
            f"no readable flight-recorder dump ({dump_notes[0] if dump_notes else 'no file named <prefix><rank>'})"
        )
    places = by_rank(tuple(p for m in req.rank_map for p in load.read_map(m)))
    if req.host_from_dir:  # dumps collected per node: DIR/node07/nccl_trace_rank_12
        places = {**{d.rank: Place(d.rank, Path(d.source).parent.name) for d in got}, **places}
    nodes, bad = load.read_results(list(req.results), max(budget.left(), 1.0)) if req.results else ((), ())
    notes += bad
    report = None
    if req.ras_file is not None:
        report = load.read_ras(req.ras_file)
    elif req.ras is not None:
        report = _ask_ras(req.ras, req.ras_json, budget.left(), notes)
    sample, recording = None, None
    if req.live or req.replay_live:
        try:
            sample, recording = _activity(req, budget)
        except TopodoctorError as exc:  # NVML missing, the budget spent: a note where other evidence stands
            if isinstance(exc, InputError) or not (got or report is not None):
                raise
            notes.append(f"--live: {exc}")
    job_input = JobInput(
        got,
        places,
        req.world_size,
        report,
        sample,
        req.host or (socket.gethostname() if req.live else ""),  # the node sampled, named
        nodes,
        req.last,
        req.late_ms,
        tuple(notes),
        req.fails_from,
    )
    verdict = stamp(judge_job(job_input), None, started_at)
    if sample is not None:  # the GPUs of the node it ran on, as NVML named them while sampling
        ids = tuple(GpuId(g.index, g.uuid or None, None, g.bus_id or None) for g in sample.gpus)
        verdict = replace(verdict, gpu_ids=ids)
    return verdict, recording


def _ask_ras(address: str, as_json: bool, left: float, notes: list[str]) -> RasReport | None:
    try:
        return ras.parse(ras.query(address, min(left, 30.0), "json" if as_json else "text"), f"RAS at {address}")
    except ras.RasUnavailable as exc:
        notes.append(str(exc))
        return None


def _activity(req: JobRequest, budget: Budget) -> tuple[ActivitySample, dict[str, Any] | None]:
    """This node's GPUs sampled through NVML in a killable child (or a recorded sampling)."""
    if req.replay_live is not None:
        doc = fileio.read_json(req.replay_live, "activity recording")
        return sampler.replay_activity(doc, str(req.replay_live)), None
    interval = 0.25
    samples = max(2, int(req.live_seconds / interval) + 1)

    def work(deadline: float) -> dict[str, object]:
        got, doc = sampler.live_activity(samples, interval, req.record_live is not None)
        return {"sample": codec.to_jsonable(got), "recording": doc}

    answer = run_with_budget(work, budget)
    sample = codec.from_jsonable(ActivitySample, answer["sample"], "activity sample")
    recording = answer.get("recording")
    return sample, recording if isinstance(recording, dict) else None
