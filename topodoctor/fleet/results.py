"""What the fleet reads: one result file reduced to what the roll-up and the history need (its
node, kind, verdict, findings, figures, node type, time, GPUs and counters), and a file that
could not be read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from topodoctor.model.findings import Finding

Kind = Literal["check", "bandwidth", "collectives", "fitness", "history"]  # history: the judgement over time
Better = Literal["higher", "lower"]
SourceState = Literal["healthy", "unhealthy", "unknown", "measured", "unreadable", "slow"]
# Plain tuples, not records: a collector reads ten thousand results a day, each with its GPUs and
# up to a hundred counters (model.stamp's GpuId and Reading, as the result files hold them).
GpuRef = tuple[int, str | None, str | None, str | None]  # NVML index, UUID, serial, bus id
CounterValue = tuple[str, str, int]  # subject (GPU3, mlx5_0/1), counter, value


@dataclass(frozen=True)
class NodeType:
    """What makes two nodes comparable: the same GPUs, as many, on the same fabric."""

    gpu_model: str
    gpu_count: int
    fabric: str  # "PCIe only", "18 NVLinks/GPU to NVSwitch", "4 NVLinks/GPU direct"

    @cached_property
    def label(self) -> str:
        """The type as a table heading: ``4x NVIDIA H200, 18 NVLinks/GPU to NVSwitch``."""
        return f"{self.gpu_count}x {self.gpu_model}, {self.fabric}"


@dataclass(frozen=True)
class NodeFigure:
    """One number a node measured that its peers measured too: a rate (GB/s = 1e9 bytes/s, or
    TFLOP/s), where higher is better, or a latency (us, ns), where lower is."""

    source: Literal["bandwidth", "collectives", "fitness"]
    metric: str  # oneway, bidir, h2d, d2h, latency; the collective op: all_reduce busbw; hbm ce, ...
    subject: str  # GPU1->GPU2, host->GPU0; or the size: "1073741824 B", "... in-place"
    gbps: float  # the value, in ``unit``
    unit: str = "GB/s"
    better: Better = "higher"

    @property
    def key(self) -> str:
        """The figure's name for comparing it across nodes: the metric and what it is about."""
        return f"{self.metric} {self.subject}"


@dataclass(frozen=True)
class NodeResult:
    """One result file, reduced to what the roll-up needs."""

    node: str
    kind: Kind
    path: str
    state: SourceState  # the verdict the file itself carries, or "measured" when it carries none
    reason: str  # its one-line reason, where it has one
    findings: tuple[Finding, ...] = ()
    figures: tuple[NodeFigure, ...] = ()
    node_type: NodeType | None = None
    measured_at: float | None = None  # seconds since the epoch (UTC); None: not known
    time_from: Literal["result", "file"] = "result"  # "file": an older result, timed by the file's mtime
    gpus: tuple[GpuRef, ...] = ()
    counters: tuple[CounterValue, ...] = ()


@dataclass(frozen=True)
class Unreadable:
    """A result file that could not be read, and why."""

    path: str
    error: str  # one line that names the file
    node: str | None = None  # the node its file name names, where that node sent other results
