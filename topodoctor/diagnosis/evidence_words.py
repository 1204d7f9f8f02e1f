"""What the reporter's words say of the run that no pasted output decides: one release of a library slower than
another (TD997); the ranks of one node in pods or containers that each see one GPU (TD034); a collective said to
take long on one rank in a profile, which is that rank's wait for the others (TD971). Reads the prose's words
(``evidence.prose_checked``); pure."""

from __future__ import annotations

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.evidence_prose import Checked
from topodoctor.model.findings import Severity

Found = list[tuple[Severity, str, str, dict[str, object]]]  # (severity, subject, message, evidence) of each


def _words(f: Facts, kind: Checked, subject: str, msg: str) -> Found:
    """A warning where a sentence says ``kind``, quoting the first input that says it; none where none does."""
    said = [c for c in f.prose if kind in c.checked]
    return [("warning", subject, msg, {"piece": said[0].piece, "lines": list(said[0].lines)})] if said else []


def version_slower_findings(f: Facts) -> Found:
    """The reporter's words that the run is slower with one release than with another, the release's own change
    the first candidate."""
    msg = (
        "the reporter says the run is slower with one release than with another: a regression of the slower "
        "release, or a default it changed (a protocol threshold, a transport, the channel count), is the first "
        "candidate; running both releases on the same nodes with their debug output tells it apart from a change "
        "of the system between the runs"
    )
    return _words(f, "version-slower", "release", msg)


def one_gpu_each_findings(f: Facts) -> Found:
    """The reporter's words that each pod or container of a node sees one GPU, where no NCCL log shows how the
    ranks connected (its connections decide it, ``evidence_causes``)."""
    msg = (
        "the reporter's words: each pod or container sees one GPU, so NCCL cannot open CUDA IPC to a GPU its "
        "process does not see, and the ranks of one node join through SHM or the network (NET/Socket), not "
        "NVLink or PCIe peer-to-peer"
    )
    return [] if f.conns else _words(f, "one-gpu-each", "transport", msg)


def one_rank_waits_findings(f: Facts) -> Found:
    """The reporter's words that a collective takes long on one rank or device, as a profile shows it: a
    collective completes on every rank together, so its time on the rank that got there first is its wait for the
    last (launch skew, host-side work, a straggler), not the transfer."""
    msg = (
        "the reporter's words: a collective takes long on one rank or device. A collective ends on every rank "
        "together, so its kernel on the rank that arrived first runs until the last one joins: that time is the "
        "wait for a straggler (the ranks launching their kernels at different times, host-side work such as a "
        "broadcast of the step's inputs or a synchronisation on one rank, a slower GPU), not the transfer. The rank "
        "with the longest collective is the earliest; the late one is elsewhere in the profile"
    )
    return _words(f, "one-rank-waits", "skew", msg)
