"""A snapshot that contradicts itself is refused before any rule or renderer indexes into it.

Snapshots come from files as often as from the probe (``--replay``, ``bandwidth --from``):
a GPU pair missing, an index twice or below zero, a count that disagrees with the GPUs listed
would otherwise surface as a KeyError deep in a rule, an exit 3 or, worse, a healthy verdict.
"""

from __future__ import annotations

from topodoctor.core.errors import InputError, TopodoctorError
from topodoctor.model.snapshot import HostSnapshot


def validate_snapshot(snap: HostSnapshot, origin: str) -> None:
    """Refuse a snapshot that contradicts itself, before any rule indexes into it.

    From a file that is an input error (2); from the live probe it is our failure (3).
    """
    err: type[TopodoctorError] = TopodoctorError if origin == "live" else InputError
    what = f"{origin}: inconsistent snapshot"
    indices = [g.index for g in snap.gpus]
    if any(i < 0 for i in indices):
        raise err(f"{what}: negative GPU index {min(indices)}")
    dup = sorted({i for i in indices if indices.count(i) > 1})
    if dup:
        raise err(f"{what}: GPU index {dup[0]} appears twice")
    count = snap.gpu_count
    if isinstance(count, int) and (count < 0 or count != len(indices)):
        raise err(f"{what}: GPU count {count} but {len(indices)} GPUs described")
    known = set(indices)
    pairs = [(p.a, p.b) for p in snap.pairs]
    for a, b in pairs:
        if not (a < b and a in known and b in known):
            raise err(f"{what}: GPU pair {a}-{b} names no pair of its GPUs (a < b, both present)")
    if len(set(pairs)) != len(pairs):
        raise err(f"{what}: a GPU pair is described twice")
    missing = [(a, b) for a in indices for b in indices if a < b and (a, b) not in set(pairs)]
    if missing:
        a, b = missing[0]
        raise err(f"{what}: no entry for GPU pair {a}-{b} ({len(missing)} pairs missing)")
    for sw in snap.nvswitches:
        stray = [gi for gi, _ in sw.gpu_links if gi not in known]
        if stray:
            raise err(f"{what}: NVSwitch {sw.id} links to GPU {stray[0]}, which is not described")
