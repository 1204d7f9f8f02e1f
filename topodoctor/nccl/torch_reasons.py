"""torch's ProcessGroupNCCL and NCCLComm messages that say NCCL failed without saying why, each read for what
torch's source says it means (c10d ProcessGroupNCCL.cpp, NCCLUtils): the watchdog's ``Timeout at NCCL work: N,
last enqueued NCCL work: M, last completed NCCL work: K.`` (printed after it timed a work out), the heartbeat
monitor's ``Heartbeat monitor timed out!`` (the watchdog thread itself made no progress), WorkNCCL's
``Some NCCL operations have failed or timed out`` (the exception the watchdog set on a work, rethrown right
after), and NCCLComm's ``NCCL communicator was aborted on rank N.`` (a call on a communicator aborted earlier,
``Original reason for failure was: ...`` where torch kept it); the heartbeat monitor's ``Received a dump signal
due to a collective timeout from ...`` with this rank's last enqueued and completed work (equal: no collective in
flight), the watchdog's counters of the work it timed out, and the NCCL backend's argument checks (a CPU tensor,
no GPU). Text in, fields and candidates out."""

from __future__ import annotations

import re

# (kind, pattern) read by ``nccl.classify`` like NCCL's own messages: the watchdog's report of the work it timed
# out names the work, the process group and the rank, not the operation or the timeout (the line before does)
TIMEOUT_AT = re.compile(
    r"\[PG (?:ID )?(?P<pg>\S+)[^\]]*?Rank (?P<wrank>\d+)\]\s+Timeout at NCCL work: (?P<seq>\d+), last enqueued NCCL "
    r"work: (?P<enqueued>-?\d+), last completed NCCL work: (?P<completed>-?\d+)"
)
HEARTBEAT = re.compile(r"Heartbeat monitor timed out! Process will be terminated")
# the heartbeat monitor's report when a rank's watchdog timed a work out (2.3+, getNCCLWatchdogTimeoutErrorMsg):
# "from this local rank" (this rank's own timeout, its watchdog line says more) or "from  rank N" (another rank
# timed out and flagged it through the store); with this rank's state of its default process group: the last work
# it enqueued and the last that completed. Enqueued equal to completed: this rank had no collective in flight.
# 2.8+ names the backend ("Last enqueued NCCL work" from "Last enqueued ", backend, " work").
DUMP_SIGNAL = re.compile(
    r"(?i)Received a dump signal due to a collective timeout from\s+"
    r"(?:(?P<local>this local rank)|rank\s+(?P<src>-?\d+))"
    r".*?Last enqueued (?:\w+ )?work: (?P<enqueued>-?\d+), "
    r"last completed (?:\w+ )?work: (?P<completed>-?\d+)"
)
# the watchdog's line after the timeout of a work on this rank: 2.2-2.4 "Exception (either an error or timeout)
# detected by watchdog at work: N, last enqueued NCCL work: E, last completed NCCL work: C.", 2.5+ " failure
# detected by watchdog at work sequence id: N PG status: last enqueued work: E, last completed work: C"
WATCHDOG_STATUS = re.compile(
    r"(?i)\[PG (?:ID )?(?P<pg>\S+)[^\]]*?Rank (?P<rank>\d+)\]\s+"
    r"(?:Exception .*? at work: |failure detected by watchdog at work sequence id: )(?P<seq>\d+)"
    r"(?:.*?last enqueued (?:NCCL )?work: (?P<enqueued>-?\d+), "
    r"last completed (?:NCCL )?work: (?P<completed>-?\d+))?"
)
NO_GPU = "no GPU visible to the process"  # the one refusal that is the process's environment, not its call
NO_NCCL = "a torch built without NCCL (Windows and macOS builds, a CPU build)"  # the build, not the call
# the arguments torch's NCCL backend refuses before NCCL is called (ProcessGroupNCCL.cpp check_gpu_single_tensor,
# ProcessGroupNCCL's constructor; ProcessGroup.hpp getBackend for a device no backend of the group serves):
# the program's own call, not the GPUs or the network. (what, pattern)
USAGE = (
    ("a tensor on the CPU (or a sparse one)", re.compile(r"Tensors must be CUDA and dense")),
    (
        "a CPU tensor on a group whose only backend is NCCL",
        re.compile(r"No backend type associated with device type cpu"),
    ),
    (NO_GPU, re.compile(r"ProcessGroupNCCL is only supported with GPUs, no GPUs found")),
    (
        "tensors on several devices in one call",
        re.compile(r"Tensors must be on the same device|Expected list of tensors on the same device"),
    ),
    ("a non-contiguous tensor", re.compile(r"Tensors must be (?:non-overlapping and dense|contiguous)")),
    # distributed_c10d.py: backend="nccl" asked of a torch whose build has no NCCL
    (NO_NCCL, re.compile(r"Distributed package doesn't have NCCL built in|NCCL support is not compiled")),
)

# torch's words that NCCL failed, with no reason of their own: (what, pattern)
_FAILED = (
    (
        "aborted",
        re.compile(r"NCCL communicator was aborted on rank (?P<rank>\d+)\.?(?:\s*(?P<why>Original reason .*))?"),
    ),
    ("failed", re.compile(r"(?:\[Rank (?P<rank>\d+)\]\s*)?Some NCCL operations have failed or timed out")),
    # the watchdog's status line alone (its timeout or error line not pasted): a work of the rank failed or timed out
    ("failed", re.compile(r"Rank (?P<rank>\d+)\]\s+failure detected by watchdog at work sequence id")),
)

_EARLIER = (
    "an earlier timeout or NCCL error on this rank, after which torch's watchdog aborted the communicator: the "
    "rank's first error above this line (`Watchdog caught collective operation timeout`, `NCCL error: ...`)"
)
_PEER_FIRST = (
    "another rank failed first (its process died: out of memory, a crash; or it hung) and this rank's watchdog "
    "saw the error or the timeout it left: every rank's first error, by time"
)
_NETWORK = "the network between the nodes failed under a collective (NCCL_DEBUG=WARN's lines name the connection)"
CANDIDATES = {
    "aborted": (
        _EARLIER,
        _PEER_FIRST,
        "the program aborted or destroyed the process group (destroy_process_group, an elastic restart, an abort "
        "on another thread) and called a collective on it after",
    ),
    "failed": (
        "a collective past its timeout: a rank never joined it (it died, hung or was busy elsewhere): the "
        "`Watchdog caught collective operation timeout` line with the work and its timeout",
        _PEER_FIRST,
        _NETWORK,
        "a GPU fault on this or a peer's node (`dmesg` for an Xid)",
    ),
}
SAID = {
    "aborted": "torch's NCCL communicator was aborted before this call (NCCLComm: a call on an aborted communicator "
    "raises this); the reason it was aborted is in this rank's earlier lines or in torch's 'Original reason' when "
    "printed",
    "failed": "torch's watchdog set an exception on a work of this rank (a timeout or an NCCL error NCCL reported "
    "asynchronously) and torch rethrows it next; its text is the reason",
}
COLLECT = (
    "the lines torch printed around this one (the exception it rethrows: `what():`, `terminated with exception:`), "
    "every rank's first error by time, the run with NCCL_DEBUG=WARN, and the flight recorder "
    "(TORCH_NCCL_TRACE_BUFFER_SIZE=2000 with TORCH_NCCL_DUMP_ON_TIMEOUT=1) for each rank's last collectives"
)


def usage(line: str) -> str:
    """What a line of torch's argument checks of the NCCL backend says the program passed; "" for any other."""
    return next((what for what, pattern in USAGE if pattern.search(line)), "")


def torch_failed(line: str) -> dict[str, str] | None:
    """torch's words that NCCL failed without a reason: which (``aborted``, ``failed``), the rank, and torch's
    own reason where it kept one; None for any other line."""
    for what, pattern in _FAILED:
        if m := pattern.search(line):
            return {"what": what, **{k: v for k, v in m.groupdict().items() if v}}
    return None
