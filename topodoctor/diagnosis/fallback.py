"""Where NCCL carried traffic through SHM or the network between GPUs of one node it would join by P2P:
the one join behind TD003 and the cause engine's transport fallback (a probed host and its run,
``facts_of_run``: ``collectives`` and ``check``'s collectives pass) and the diagnosis of a user's
evidence (``facts_of``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from topodoctor.diagnosis.evidence_facts import Conn, Facts, path_class
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.model.collectives import CollectivesResult

# paths.cc: NCCL runs P2P up to PATH_PXB by default (through PCIe switches, not the host bridge), and
# over NVLink always; PHB, NODE and SYS pairs go through SHM unless NCCL_P2P_LEVEL says otherwise.
P2P_BY_DEFAULT = ("NV", "PIX", "PXB")
NVLINK_ONLY = ("NV",)
FALLBACK_CAUSES = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_HOSTID", "NCCL_SHM_DISABLE", "NCCL_CUMEM_ENABLE")


@dataclass(frozen=True)
class Fallback:
    """One GPU pair NCCL joined through SHM or NET: the channel connections by transport, the path."""

    gpus: tuple[int, int]
    ranks: tuple[int, int]
    by: dict[str, int]  # transport -> channel connections
    path: str  # the pair's path as topo -m prints it (NV18, PIX)
    quotes: tuple[Quote, ...]


def fallbacks(f: Facts, classes: tuple[str, ...] = P2P_BY_DEFAULT) -> list[Fallback]:
    """The pairs of one node, joined by a path of ``classes``, whose ranks NCCL connected via SHM or NET."""
    seen: dict[tuple[int, int], dict[str, int]] = {}
    ranks_of: dict[tuple[int, int], tuple[int, int]] = {}
    quotes: dict[tuple[int, int], list[Quote]] = {}
    for c in f.conns:
        if c.kind not in ("shm", "net") or c.gpus is None or c.same_node is not True or c.gpus[0] == c.gpus[1]:
            continue
        a, b = sorted(c.gpus)
        label = f.link(a, b)
        if label is None or path_class(label) not in classes:
            continue
        by = seen.setdefault((a, b), {})
        by[c.transport] = by.get(c.transport, 0) + c.channels
        ranks_of[(a, b)] = (min(c.ranks), max(c.ranks))
        if c.quote is not None and len(quotes.setdefault((a, b), [])) < 2:
            quotes[(a, b)].append(c.quote)
    return [
        Fallback((a, b), ranks_of[(a, b)], by, f.link(a, b) or "", tuple(quotes.get((a, b), ())))
        for (a, b), by in sorted(seen.items())
    ]


def causes_set(f: Facts) -> list[str]:
    """The variables that send traffic off P2P, as ``NAME=value``, where the facts show them set."""
    return [f"{k}={f.settings[k][0]}" for k in FALLBACK_CAUSES if k in f.settings]


def facts_of_run(res: CollectivesResult, gpus: Mapping[int, int], links: Mapping[tuple[int, int], str]) -> Facts:
    """The facts topodoctor's own run gives: its ranks' GPUs (rank -> NVML index), the pairs' paths from
    the probed host's graph (a < b -> label), NCCL's account and the ranks' settings."""
    settings = {k: (v, Quote("the run's environment")) for k, v in res.env.items()}
    conns: list[Conn] = []
    if res.nccl is not None:
        settings.update({k: (v, Quote("NCCL's log")) for k, v in res.nccl.env.items()})
        node = {r.rank: r.node or r.host for r in res.ranks}
        for c in res.nccl.connections:
            pair = (gpus[c.rank], gpus[c.peer]) if c.rank in gpus and c.peer in gpus else None
            same = node.get(c.rank) == node.get(c.peer)
            conns.append(Conn((c.rank, c.peer), c.kind, c.transport, c.channels, gpus=pair, same_node=same))
    return Facts(links=dict(links), settings=settings, conns=tuple(conns), nccl_logged=res.nccl is not None)


def fallback_transports(f: Facts, classes: tuple[str, ...] = P2P_BY_DEFAULT) -> dict[str, int]:
    """Channel connections by transport that NCCL sent off P2P between ranks of one node: those of the
    pairs ``fallbacks`` finds, and those between ranks whose GPUs are not known (their path cannot
    clear them). SHM between GPUs NCCL joins through host memory by default (PHB, NODE, SYS) is not
    a fallback."""
    by: dict[str, int] = {}
    for fb in fallbacks(f, classes):
        for t, n in fb.by.items():
            by[t] = by.get(t, 0) + n
    for c in f.conns:
        if c.kind in ("shm", "net") and c.same_node is True and c.gpus is None:
            by[c.transport] = by.get(c.transport, 0) + c.channels
    return by
