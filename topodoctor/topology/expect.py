"""Expectations per node type: what a known-good host of this kind looks like.

``topodoctor expect -o FILE`` writes one from a healthy host (live or replayed); ``check
--expect FILE`` compares against it. Without a file, rules compare each GPU with its peers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from topodoctor.core import codec
from topodoctor.model.snapshot import HostSnapshot

if TYPE_CHECKING:
    from topodoctor.core.budget import Budget

EXPECT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Expectations:
    kind: Literal["expectations"]
    schema_version: int
    gpu_count: int
    gpu_model: str
    nvlinks_per_gpu: int  # active NVLinks each GPU should have (0: none)
    nvlinks_per_pair: int  # bonded links nvidia-smi shows between any two GPUs (NV#); 0: PCIe only
    pcie_gen: int | None
    pcie_width: int | None
    nics: tuple[str, ...]  # RDMA devices that must be present
    mig_enabled: bool = False


def _mode(values: list[int]) -> int | None:
    return Counter(values).most_common(1)[0][0] if values else None


def from_snapshot(snap: HostSnapshot) -> Expectations:
    from topodoctor.topology.graph import build_graph, gpu_node, nvlink_count

    g = build_graph(snap)
    gpus = [x for x in snap.gpus if x.lost is None]
    names = [x.name for x in gpus if isinstance(x.name, str)]
    per_gpu = [sum(1 for link in x.nvlinks if link.active is True) for x in gpus]
    per_pair = [
        nvlink_count(g, gpu_node(a.index), gpu_node(b.index))[0] for i, a in enumerate(gpus) for b in gpus[i + 1 :]
    ]
    gens = [x.pcie.gen_max for x in gpus if isinstance(x.pcie.gen_max, int)]
    widths = [x.pcie.width_max for x in gpus if isinstance(x.pcie.width_max, int)]
    return Expectations(
        kind="expectations",
        schema_version=EXPECT_SCHEMA_VERSION,
        gpu_count=len(snap.gpus),
        gpu_model=Counter(names).most_common(1)[0][0] if names else "",
        nvlinks_per_gpu=min(per_gpu) if per_gpu else 0,
        nvlinks_per_pair=min(per_pair) if per_pair else 0,
        pcie_gen=_mode(gens),
        pcie_width=_mode(widths),
        nics=tuple(sorted(n.name for n in snap.nics if n.kind in ("infiniband", "roce"))),
        mig_enabled=any(x.mig_mode is True for x in gpus),
    )


def load_expectations(path: Path | str, budget: Budget | None = None) -> Expectations:
    """Read an expectations file, within what is left of ``budget``."""
    if budget is not None and budget.limited and budget.left() <= 0:
        raise budget.exceeded(" (reading the expectations file)")
    timeout = budget.left() if budget is not None and budget.limited else None
    data = codec.read_json(path, "expectations file", timeout)
    codec.check_header(data, "expectations", EXPECT_SCHEMA_VERSION, f"expectations file {path}")
    return codec.from_jsonable(Expectations, data, f"expectations file {path}")
