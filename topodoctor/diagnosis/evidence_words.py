"""What the reporter's words say of the run that no pasted output decides: one release of a library slower than
another (TD997); the ranks of one node in pods or containers that each see one GPU (TD034). Reads the prose's
words (``evidence.prose_checked``); pure."""

from __future__ import annotations

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.findings import Severity


def version_slower_findings(f: Facts) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence): the reporter's words that the run is slower with one release than
    with another, the release's own change the first candidate."""
    said = [c for c in f.prose if "version-slower" in c.checked]
    if not said:
        return []
    msg = (
        "the reporter says the run is slower with one release than with another: a regression of the slower "
        "release, or a default it changed (a protocol threshold, a transport, the channel count), is the first "
        "candidate; running both releases on the same nodes with their debug output tells it apart from a change "
        "of the system between the runs"
    )
    return [("warning", "release", msg, {"piece": said[0].piece, "lines": list(said[0].lines)})]


def one_gpu_each_findings(f: Facts) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence): the reporter's words that each pod or container of a node sees one
    GPU, where no NCCL log shows how the ranks connected (its connections decide it, ``evidence_causes``)."""
    said = [c for c in f.prose if "one-gpu-each" in c.checked]
    if not said or f.conns:
        return []
    msg = (
        "the reporter's words: each pod or container sees one GPU, so NCCL cannot open CUDA IPC to a GPU its "
        "process does not see, and the ranks of one node join through SHM or the network (NET/Socket), not "
        "NVLink or PCIe peer-to-peer"
    )
    return [("warning", "transport", msg, {"piece": said[0].piece, "lines": list(said[0].lines)})]
