"""A small collective's latency measured with one process driving several GPUs (TD970): nccl-tests' `-g N` runs N
GPUs from one thread, which launches each GPU's kernel in turn, so every collective pays CUDA's launch latency once
per GPU on top of NCCL's own time. NCCL's published small-message latencies are taken with one process per GPU
(nccl-tests built with MPI=1, `-g 1` under mpirun) and with CUDA graph launch (`-G`), which leaves the launch out.
Data in, findings' parts out; no I/O."""

from __future__ import annotations

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.findings import Severity


def latency_findings(f: Facts) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence): a latency the reporter states beside an nccl-tests run that drives
    several GPUs from one process."""
    said = [c.latency_us for c in f.prose if c.latency_us is not None]
    runs = [x for x in f.launches if x.program.endswith("_perf") and (x.gpus_per_process or 1) > 1]
    if not said or not runs:
        return []
    run = max(runs, key=lambda x: x.gpus_per_process or 1)
    msg = (
        f"the latency asked about ({max(said):g} µs) was measured with one process driving {run.gpus_per_process} "
        f"GPUs (`{run.text[:120]}`): nccl-tests then launches every GPU's kernel in turn from one thread, so each "
        "small collective pays CUDA's launch latency once per GPU beside NCCL's own time. NCCL's published "
        "small-message latencies are taken with one process per GPU (nccl-tests built with MPI=1, `-g 1` under "
        "mpirun) and CUDA graph launch (`-G`)"
    )
    ev: dict[str, object] = {"latency_us": max(said), "gpus_per_process": run.gpus_per_process, "command": run.text}
    return [("warning", "latency", msg, ev)]
