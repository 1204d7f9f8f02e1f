"""Probe rules (TD9xx): what could not be checked, said out loud.

``probe_failures`` walks a snapshot for every field that failed to probe, so a failure that
no selected rule reads is still reported (at info): nothing the probe could not read passes
silently, whichever rules run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from topodoctor.core.probed import ProbeError
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule


@rule(
    "TD901",
    "check-incomplete",
    "warning",
    also=("info",),
)
def check_incomplete(ctx: Context) -> Iterator[Issue]:
    """A check could not be made because its input could not be read (NVML error, unreadable file).

    Every rule reads its inputs through one accessor; an input that failed to probe makes that rule
    report "could not check" for the GPU (or link, pair, bridge, NIC) and field it could not read,
    under this code, with the skipped rules in the evidence. A field that failed to probe and that
    no selected rule reads is reported too, as info.

    Why it matters: a check that cannot read its input cannot vouch for the host: a silent pass
    would hide exactly the fault that broke the query. Whether an incomplete check fails the job is
    the fail level's choice: this code is a warning, so `--strict` (fail on warnings) fails an
    incomplete check and the default does not; the summary counts incomplete checks either way, even
    when this code is ignored.

    How to fix: run as root or fix the failing query (the evidence names it).
    """
    return iter(())


def _walk(value: object, path: str) -> Iterator[tuple[str, ProbeError]]:
    if isinstance(value, ProbeError):
        yield path, value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name), f"{path}.{f.name}" if path else f.name)


def probe_failures(snap: HostSnapshot) -> Iterator[tuple[str, str, ProbeError]]:
    """(subject, field, error) for every field of the snapshot that failed to probe.

    Lost GPUs, and pairs with one, are left out: TD507 reports the GPU itself.
    """
    lost = {g.index for g in snap.gpus if g.lost is not None}
    for where, err in _walk(snap.host, ""):
        yield "host", f"host.{where}", err
    for err in snap.probe_errors:
        if not (err.call.startswith("GPU") and err.call[3 : err.call.find(":")].isdigit()):
            yield "host", err.call, err
    for g in snap.gpus:
        if g.index in lost:
            continue
        for f in dataclasses.fields(g):
            if f.name in ("nvlinks", "lost"):
                continue
            for where, err in _walk(getattr(g, f.name), f.name):
                yield f"GPU{g.index}", where, err
        for link in g.nvlinks:
            for where, err in _walk(link, ""):
                yield f"GPU{g.index}/nvlink{link.link}", where, err
    for p in snap.pairs:
        if p.a in lost or p.b in lost:
            continue
        for where, err in _walk(p, ""):
            yield f"GPU{p.a}-GPU{p.b}", where, err
    for b in snap.bridges:
        for where, err in _walk(b, ""):
            yield f"bridge:{b.bus_id}", where, err
    for n in snap.nics:
        for where, err in _walk(n, ""):
            yield f"nic:{n.name}", where, err
    if isinstance(snap.pci_gpus, ProbeError):
        yield "host", "pci_gpus", snap.pci_gpus
