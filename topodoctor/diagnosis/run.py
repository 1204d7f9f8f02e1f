"""What a collectives run shows about itself: which GPUs its ranks ran on, the settings it ran with
(as NCCL logged them and as the ranks' environment held them), and what the topology's model gives
for an op at a size on those GPUs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topodoctor.topology.busbw import bottleneck
from topodoctor.topology.busbw_expect import Expectation, expected_busbw

if TYPE_CHECKING:  # annotations only: a static check's rules load this, and no result class
    from collections.abc import Mapping

    from topodoctor.model.collectives import CollectivesResult
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.model.snapshot import HostSnapshot

NCCL_LOG = "NCCL's log"
RUN_ENV = "the run's environment"


@dataclass(frozen=True)
class Seen:
    """A setting the run had: its value and where it was seen (NCCL's log wins: NCCL applied it)."""

    name: str
    value: str
    where: str


def rank_gpus(snap: HostSnapshot, res: CollectivesResult) -> dict[int, int]:
    """rank -> NVML index, by PCI bus id (ranks on other hosts map to nothing)."""
    here = snap.host.hostname
    by_bus = {g.bus_id.lower(): g.index for g in snap.gpus if isinstance(g.bus_id, str)}
    single = len(res.nodes) <= 1
    out = {
        r.rank: by_bus[r.bus_id.lower()]
        for r in res.ranks
        if r.bus_id and r.bus_id.lower() in by_bus and (single or r.host == here)
    }
    if single:
        # A rank known only by its CUDA ordinal (nccl-tests -g N keeps one bus id): CUDA numbers
        # identical GPUs in PCI order, as NVML does.
        pci_order = [i for _, i in sorted(by_bus.items())]
        for r in res.ranks:
            if r.rank not in out and r.bus_id is None and r.device is not None and r.device < len(pci_order):
                out[r.rank] = pci_order[r.device]
    return out


def settings(res: CollectivesResult) -> dict[str, Seen]:
    """The NCCL and CUDA settings of the run: NCCL's "set by environment" lines, else the ranks'
    environment (NCCL does not log every variable it reads, CUDA's never)."""
    out: dict[str, Seen] = {}
    for r in res.ranks:
        for k, v in r.env.items():
            out.setdefault(k, Seen(k, v, RUN_ENV))
    for k, v in res.env.items():
        out[k] = Seen(k, v, RUN_ENV)
    if res.nccl is not None:
        for k, v in res.nccl.env.items():
            out[k] = Seen(k, v, NCCL_LOG)
    return out


def run_expectation(
    snap: HostSnapshot,
    res: CollectivesResult,
    op: str,
    size_bytes: int,
    *,
    expect_gbps: float | None = None,
    copies: BandwidthResult | None = None,
    links: Mapping[tuple[int, int], Any] | None = None,
) -> Expectation | None:
    """What ``op`` should reach at ``size_bytes`` in this run (busbw_expect.py's one figure and its
    basis), on the GPUs its ranks ran on; the model only where every rank is placed on a GPU."""
    gpus = tuple(sorted(set(rank_gpus(snap, res).values())))
    return expected_busbw(
        snap,
        op,
        size_bytes,
        gpus,
        len(res.nodes) or 1,
        expect_gbps=expect_gbps,
        copies=copies,
        links=links,
        model=len(gpus) == res.world_size,
    )


def model_busbw(snap: HostSnapshot, res: CollectivesResult, op: str, size_bytes: int) -> float | None:
    """What the topology's model gives ``op`` at ``size_bytes`` on the run's GPUs (one node), or None:
    the figure TD020 and the collectives table state."""
    e = run_expectation(snap, res, op, size_bytes)
    return e.gbps if e is not None and e.basis == "model" else None


def ring_gbps(snap: HostSnapshot, res: CollectivesResult) -> float | None:
    """The ring bandwidth NCCL's search fills on the run's GPUs (the plateau before op efficiency)."""
    gpus = tuple(sorted(set(rank_gpus(snap, res).values())))
    b = bottleneck(snap, gpus) if len(gpus) >= 2 else None
    return None if b is None else b.ring_gbps
