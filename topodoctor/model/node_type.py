"""A node's type: what makes two nodes comparable (the same GPUs, as many, on the same fabric), as
a check's result records it and the fleet groups nodes by it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from topodoctor.model.snapshot import HostSnapshot


@dataclass(frozen=True)
class NodeType:
    """What makes two nodes comparable: the same GPUs, as many, on the same fabric."""

    gpu_model: str
    gpu_count: int
    fabric: str  # "PCIe only", "18 NVLinks/GPU to NVSwitch", "4 NVLinks/GPU direct"

    @property
    def label(self) -> str:
        """The type as a table heading: ``4x NVIDIA H200, 18 NVLinks/GPU to NVSwitch``."""
        return f"{self.gpu_count}x {self.gpu_model}, {self.fabric}"


def node_type(snap: HostSnapshot) -> NodeType:
    """GPU model, count and NVLink fabric, from what does not change when a link fails.

    Link *counts* and where links lead stand for the fabric, not link states: a node with a
    link down is still of its type, and is compared with its peers for exactly that reason.
    """
    names = Counter(g.name for g in snap.gpus if isinstance(g.name, str))
    model = names.most_common(1)[0][0] if names else "unknown GPU"
    count = snap.gpu_count if isinstance(snap.gpu_count, int) else len(snap.gpus)
    links = max((g.nvlink_count for g in snap.gpus if isinstance(g.nvlink_count, int)), default=0)
    switched = bool(snap.nvswitches) or any(ln.remote_type == "switch" for g in snap.gpus for ln in g.nvlinks)
    if links == 0:
        fabric = "PCIe only"
    else:
        fabric = f"{links} NVLinks/GPU {'to NVSwitch' if switched else 'direct'}"
    return NodeType(model, count, fabric)
