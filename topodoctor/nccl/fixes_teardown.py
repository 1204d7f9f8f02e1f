"""NCCL's proxy service thread failing while the ranks shut down (TD075): proxy.cc's ``Failed to execute operation
Close from rank N`` names the Close operation, which a rank's proxy runs when its communicator is destroyed or its
process exits, so the ``Accept failed`` and ``Could not receive type`` WARNs and return-code trails around it are the
teardown's, not a collective that failed. Data in, a ``Said`` out; no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topodoctor.nccl.evidence import Builder, LogContext, Said
from topodoctor.nccl.parse import Event


def _teardown(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    msg = "NCCL's proxy service thread lost its local peers' sockets during shutdown (the Close operation of a rank "
    msg += "whose communicator was being destroyed or whose process exited): teardown warnings, not a failed collective"
    fix = (
        "Nothing failed in the run itself where its work completed before these lines. To end without them, destroy "
        "the communicators before the processes exit, every rank alike (`torch.distributed.destroy_process_group()`, "
        "`ncclCommDestroy`), so no rank's proxy is still serving a peer that is already gone."
    )
    return Said("TD075", msg, fix, {"operation": "Close"})


TEARDOWN: dict[str, Builder] = {"proxy-teardown": _teardown}
