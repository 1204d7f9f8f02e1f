"""TD608: the topology file NCCL_TOPO_FILE names, as the probe read it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator

from topodoctor.probed import ProbeError, Unsupported
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

_SUBJECT = "env:NCCL_TOPO_FILE"


def _bus_ids(ctx: Context) -> set[str]:
    known = {str(g.bus_id).lower() for g in ctx.snap.gpus} | {str(n.bus_id).lower() for n in ctx.snap.nics}
    return known | {b.bus_id.lower() for b in ctx.snap.bridges}


@rule(
    "TD608",
    "nccl-topo-file-bad",
    "error",
    fix="Point NCCL_TOPO_FILE at a topology file written for this host (NCCL_TOPO_DUMP_FILE writes one), or unset it.",
)
def nccl_topo_file_bad(ctx: Context) -> Iterator[Issue]:
    """NCCL_TOPO_FILE is missing, unreadable, unparsable, or names PCI bus ids that do not exist here.

    NCCL trusts the file over what it detects: a file from another host model routes traffic
    over paths that do not exist.
    """
    topo = ctx.environment.topo_file
    if topo is None:
        return
    v = topo.path
    ev = {"variable": "NCCL_TOPO_FILE", "value": v, "from": ctx.environment.where("NCCL_TOPO_FILE")}
    if isinstance(topo.text, Unsupported):
        yield Issue(_SUBJECT, f"NCCL_TOPO_FILE {v} does not exist", ev)
        return
    if isinstance(topo.text, ProbeError):
        yield Issue(_SUBJECT, f"NCCL_TOPO_FILE {v} could not be read: {topo.text.error}", ev)
        return
    try:
        root = ET.fromstring(topo.text)
    except ET.ParseError as exc:
        yield Issue(_SUBJECT, f"NCCL_TOPO_FILE {v} cannot be parsed: {exc}", ev)
        return
    known = _bus_ids(ctx)
    # NCCL writes bus ids without leading domain zeros sometimes; compare on the last 7 chars too.
    tails = {k[-7:] for k in known}
    named = {e.get("busid", "").lower() for e in root.iter() if e.get("busid")}
    missing = sorted(m for m in named - known if m[-7:] not in tails)
    if missing:
        yield Issue(
            _SUBJECT,
            f"NCCL_TOPO_FILE {v} names bus ids not on this host: {', '.join(missing[:6])}",
            dict(ev, missing=missing),
        )
