"""The distinct causes of the failure classes whose message fits several, read from the sites that
raise it (NCCL's net_ib / ibvwrap, shmutils and shm transport, graph/xml, the IB / SHARP plugin),
ranked, each with what tells it apart: a line the log itself may hold (the plugin's network, a GID
index set by environment, the GID in use, the NCCL versions, the file NCCL loaded) and the output
to collect where it does not. A class's finding names one cause only when the log holds the line
that singles it out; otherwise it names the candidates, most likely first, and what to collect
next (``cause.confidence`` is ``candidates``). Data and pure functions; no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from topodoctor.core.text import numbered
from topodoctor.nccl.causes_host import HOST_CAUSES
from topodoctor.nccl.causes_launcher import LAUNCHER_CAUSES
from topodoctor.nccl.causes_network import NETWORK_CAUSES, PEER_CAUSES
from topodoctor.nccl.causes_process import PROCESS_CAUSES
from topodoctor.nccl.causes_registration import REGISTRATION_CAUSES
from topodoctor.nccl.evidence import LogContext, Said
from topodoctor.nccl.log_signs import gids_in_use, local_gid
from topodoctor.nccl.parse import Event
from topodoctor.nccl.stall import STALL_CAUSES

TABLE = (
    NETWORK_CAUSES + PEER_CAUSES + HOST_CAUSES + LAUNCHER_CAUSES + PROCESS_CAUSES + STALL_CAUSES + REGISTRATION_CAUSES
)


def _seen(evs: Sequence[Event], ctx: LogContext) -> str:
    """What the log shows of the link, before the causes: its layer and the GID in use."""
    gid = local_gid(evs)
    devices = ", ".join(ctx.link_layers)
    if gid:
        kind = "RoCE v2" if gid.lower().startswith("::ffff:") else "RoCE"
        return f"The link is {kind} (local GID {gid}). "
    if in_use := gids_in_use(ctx):
        shown = ", ".join(dict.fromkeys(f"index {i} {a}" + (f" on {h}" if h else "") for h, i, a in in_use[:4]))
        return f"The link is RoCE (GIDs in use: {shown}). "
    if ctx.link_layers:
        kind = "RoCE" if "RoCE" in ctx.link_layers.values() else "InfiniBand"
        return f"The link is {kind} ({devices}). "
    return ""


def ranked(said: Said, evs: Sequence[Event], ctx: LogContext) -> Said:
    """``said`` with its causes weighed: one cause when the log shows the line that singles it out,
    else the candidates, ranked, with what tells them apart and what to collect. A finding that
    ranks its candidates already (a CUDA call's site) stays as it is."""
    if "candidates" in said.extra:
        return said
    entry = next((t for t in TABLE if t.code == said.code and t.applies(evs)), None)
    if entry is None:
        return said
    kept = [c for c in entry.causes if not c.ruled_out(evs, ctx)]
    shown = [(c, line) for c in kept if (line := c.shows(evs, ctx))]
    if shown:
        cause, line = shown[0]
        fix = f"{_seen(evs, ctx)}The log shows it: {line}; so {cause.what}."
        rest = numbered(c.what for c in kept if c is not cause)
        if rest:
            fix += f" If not that, the other causes of this message: {rest}. Collect: {entry.collect}."
        return replace(said, fix=fix, extra={**said.extra, "narrowed_by": line})
    kept.sort(key=lambda c: not c.first(evs, ctx))  # stable: the table's order among equals
    listed = numbered(f"{c.what} [tells: {c.tells}]" for c in kept)
    fix = f"{_seen(evs, ctx)}The log does not show which cause; candidates, most likely first: {listed}. "
    fix += f"Collect: {entry.collect}."
    return replace(said, fix=fix, extra={**said.extra, "candidates": [c.what for c in kept], "collect": entry.collect})
