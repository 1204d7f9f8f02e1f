"""Where a fact of the evidence stands (a quote of its line), and what NCCL's logs say of its graph search: plain
data that the facts hold and the judges read, apart from both so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.model.nccl_account import NcclGraphSeen


@dataclass(frozen=True)
class Quote:
    """Where a fact stands: the input and line (``nccl.log:123``) and the text as it stood."""

    where: str
    text: str = ""

    def __str__(self) -> str:
        return f"{self.where}: {self.text}" if self.text else self.where


@dataclass(frozen=True)
class Searched:
    """What NCCL's logs and graph dumps say of its graph search, each fact with the line that shows it."""

    graphs: tuple[tuple[NcclGraphSeen, Quote], ...] = ()  # each graph found, and each pattern that found none
    unplaced: Quote | None = None  # the first line saying NCCL could not place a device in its PCI tree
    paths: tuple[tuple[str, float], ...] = ()  # NCCL's own paths between the GPUs of a node: (type, GB/s)
    # PCI links of NCCL's topology (its GRAPH tree) that carry several NICs' nets and no GPU, under the nets' total:
    # (the node below the link, the link's GB/s, each net's (id, GB/s)), with the line of the link
    pci_shared: tuple[tuple[str, float, tuple[tuple[str, float], ...], Quote], ...] = ()
