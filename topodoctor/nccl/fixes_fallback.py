"""NCCL gone on over TCP sockets after the network plugin it should use failed: aws-ofi-nccl's own failure at init
(``NET/OFI aws-ofi-nccl initialization failed``), then ``Using network Socket``, so EFA carries nothing between the
nodes (TD084). NCCL drops a plugin whose init fails and takes its internal networks, IB then sockets, without a
word of warning of its own. A run that went on so is TD108, a warning (a host without EFA runs so by design); one
the post or the log says failed, TD084. Data in, a ``Said`` out; no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topodoctor.nccl.evidence import Builder, LogContext, Said
from topodoctor.nccl.parse import Event

FIX = (
    "Give the process its EFA devices: `fi_info -p efa` in the same container or pod must list them (`ls "
    "/dev/infiniband/uverbs*`; on Kubernetes the EFA device plugin and `vpc.amazonaws.com/efa` in the pod's "
    "resources; with docker `--device` for each uverbs device), with the libfabric and aws-ofi-nccl of the EFA "
    "installer; the plugin's lines above its failure (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET) name the call that "
    "failed. On a host without EFA, leave the plugin out (NCCL_NET=Socket) and expect TCP's rate."
)


def _fallback(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    msg = "aws-ofi-nccl failed at init, so NCCL runs over TCP sockets (`Using network Socket`, connections via "
    msg += "NET/Socket): EFA carries nothing between the nodes"
    return Said("TD084" if f.get("failed") else "TD108", msg, FIX, {"network": "Socket"})


FALLBACK: dict[str, Builder] = {"ofi-fallback": _fallback}
