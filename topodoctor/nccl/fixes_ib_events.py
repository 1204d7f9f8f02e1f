"""The fatal asynchronous events of an RDMA device that NCCL's IB transport reports (transport/net_ib.cc's async
thread: ``NET/IB : mlx5_1:1 async fatal event on QP (0x...): invalid request local work queue error``), TD107.
The event's text is libibverbs' ``ibv_event_type_str``; each kind has its own candidates, most likely first.
Data in, a ``Said`` out; no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.nccl.evidence import Builder, LogContext, Said
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.parse import Event

_FIRMWARE = (
    "the NIC's firmware and driver out of step, or a firmware the adapter's vendor has since fixed: `ibv_devinfo` "
    "(fw_ver) and the MLNX_OFED / DOCA or inbox rdma-core release on every node, updated to one matched release"
)
_PEERS_DIFFER = (
    "the two nodes running different NCCL or network plugin builds, so one side posts requests the other's queue "
    "does not accept: the NCCL version banner and the plugin (NCCL_NET_PLUGIN, `Using network`) of every node"
)
_BUG = "a bug of the NCCL release in use with this NIC: the same run on the newest NCCL"
_ACCESS = (
    "the NIC refused to touch the memory of a transfer: GPUDirect RDMA into GPU memory blocked (ACS or the IOMMU "
    "between the NIC and the GPU, the peer-memory module or DMA-BUF missing): the run with NCCL_NET_GDR_LEVEL=0"
)
_ADAPTER = (
    "the adapter itself failed (a firmware fault, a hardware error, a reset under the run): `dmesg | grep -i mlx5` "
    "(health syndrome, firmware fatal), `mlxlink -d DEV` for the port; update the firmware, or replace the NIC "
    "where the fault returns"
)
# libibverbs' words for each event NCCL fails on, and their candidates
CANDIDATES: dict[str, tuple[str, ...]] = {
    "invalid request local work queue error": (_FIRMWARE, _PEERS_DIFFER, _BUG),
    "local access violation work queue error": (_ACCESS, _FIRMWARE, _BUG),
    "local work queue catastrophic error": (_ADAPTER, _FIRMWARE, _BUG),
    "local catastrophic error": (_ADAPTER, _FIRMWARE),
    "CQ error": (_BUG, _ADAPTER),
}


def _async_fatal(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    what, on = f.get("what", "").strip(), f.get("on", "")
    where = {"QP": "a queue pair", "CQ": "a completion queue"}.get(on, "the device")
    msg = f"{f.get('dev', 'an RDMA device')}:{f.get('port', '?')} raised a fatal event on {where}: {what}"
    order = next((c for k, c in CANDIDATES.items() if k.lower() == what.lower()), (_FIRMWARE, _ADAPTER, _BUG))
    fix = f"Candidates, most likely first: {numbered(order)}. {EXPLANATIONS['TD107'].fix}"
    return Said("TD107", msg, fix, {"event": what, "on": on or "device", "candidates": list(order)})


IB_EVENTS: dict[str, Builder] = {"ib-async-fatal": _async_fatal}
