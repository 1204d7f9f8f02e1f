"""Horovod's build judged (TD978): a build whose tensor operations hold no NCCL reduces GPU tensors with Gloo or
MPI, which copy them to host memory and move them over TCP or the MPI library's own transport, so NVLink and
GPUDirect RDMA go unused however the host is built. Data in, findings' parts out; no I/O."""

from __future__ import annotations

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.findings import Severity

GPU_FRAMEWORKS = ("TensorFlow", "PyTorch", "MXNet")  # the frameworks whose GPU tensors NCCL would reduce


def build_findings(f: Facts) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence): each Horovod build with GPU frameworks and no NCCL operations."""
    out: list[tuple[Severity, str, str, dict[str, object]]] = []
    for b in f.horovod:
        ops = [name for name, built in b.operations if built]
        if not b.operations or any(name.upper() == "NCCL" for name in ops):
            continue
        frameworks = [name for name, built in b.frameworks if built and name in GPU_FRAMEWORKS]
        with_ = f"with {', '.join(ops)} only" if ops else "with no tensor operation built"
        msg = (
            f"Horovod v{b.version} is built without NCCL ({with_}"
            + (f", for {', '.join(frameworks)}" if frameworks else "")
            + "): its allreduce of GPU tensors goes through host memory over "
            + ("Gloo's TCP" if "Gloo" in ops else "the MPI library")
            + ", so NVLink and GPUDirect RDMA are not used and adding GPUs adds little"
        )
        ev: dict[str, object] = {"version": b.version, "operations": ops, "seen_in": f.where.get(b.piece, "")}
        out.append(("warning", "horovod", msg, ev))
    said = [c for c in f.prose if "horovod-gloo" in c.checked]
    if said and not f.horovod:  # the reporter's words alone: the build's own account decides it
        msg = (
            "the reporter's words: Horovod runs on Gloo, not NCCL; a build without NCCL reduces GPU tensors through "
            "host memory, so NVLink and GPUDirect RDMA are not used. Post `horovodrun --check-build`: NCCL must be "
            "marked under its tensor operations"
        )
        out.append(("warning", "horovod", msg, {"piece": said[0].piece, "lines": list(said[0].lines)}))
    return out
