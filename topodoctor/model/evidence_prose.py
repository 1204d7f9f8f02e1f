"""What a reporter's sentences say, as plain data: the claims the prose reader (``evidence/prose.py``)
takes from the text around the tools' output ("8x H100 ... the algbw is about 250 GB/s ... the spec says
900 GB/s"). A claim is weaker evidence than a tool's own output: it is what someone wrote, not what a tool
printed, and every finding built on it says so. Fields the sentences did not state stay empty (``None``,
``""``): not stated is never zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from topodoctor.model.evidence_scaling import ScalingSaid

# What a figure is, as the sentence names it: nccl-tests' bus bandwidth ("busbw", "bus bandwidth", "wire
# bw"), its algorithm bandwidth ("algbw"), or a bandwidth the sentence does not qualify.
FigureKind = Literal["busbw", "algbw", "unspecified"]
# What the figure stands for in the sentence: what the reporter measured, what they expected or were told
# ("should reach", "the spec says", "NVIDIA claims"), or a NIC's line rate ("HDR 200G", "100 Gbps network").
FigureRole = Literal["measured", "expected", "nic"]
Bound = Literal["", "above", "below"]  # "exceeds 100Gbps": the run measured more than the figure says
Scope = Literal["", "one-node", "nodes"]  # where its sentence places the figure: one node, across nodes
# The kinds of host whose descriptions point to known causes of a slow run (diagnosis/evidence_hosts.py): an AMD
# EPYC host, a virtual machine (passthrough, SR-IOV), a bonded RoCE NIC, RoCE itself, an NVSwitch host.
HostKind = Literal["epyc", "vm", "bond", "roce", "nvswitch"]
# What the sentences say was looked at or set already: flow control on RoCE (PFC, ECN, pause frames), the
# fabric manager, the IOMMU, ACS, ATS, the NPS setting, GPUDirect RDMA's module; and what they say changed (a run
# slower with GDR on, slower with one release than another) and how the ranks were placed (a pod or container of
# one GPU each) or reduce (Horovod on Gloo, not NCCL).
Checked = Literal[
    "flow-control",
    "fabric-manager",
    "iommu",
    "acs",
    "ats",
    "nps",
    "gdr",
    "gdr-trouble",
    "p2p-on",
    "gdr-slower",
    "version-slower",
    "one-gpu-each",
    "horovod-gloo",
    "one-rank-waits",
]


@dataclass(frozen=True)
class FigureSaid:
    """One bandwidth figure with its unit, as a sentence states it."""

    line: int  # 1-based, in the piece's input
    gbps: float  # in GB/s (bytes): 125 Gbps is 15.625
    text: str  # the figure as written: "125 Gbps", "4~6GB/s"
    unit: str  # as written: "GB/s", "Gbps", "GiB/s", "MB/s"
    kind: FigureKind = "unspecified"
    role: FigureRole = "measured"
    bound: Bound = ""
    nvlink: bool = False  # the sentence ties it to NVLink ("the NVLink bw is 900 GB/s")
    scope: Scope = ""
    gpus: int | None = None  # the GPUs its sentence says it was measured on ("8 GPU max performance: 28GB/s")
    tool: str = ""  # another tool the sentence names it by (iperf3, NTTTCP, ib_write_bw): not NCCL's figure
    sentence: str = ""  # the sentence it stands in, cut to a few hundred characters
    nodes: int | None = None  # the nodes its sentence says it was measured on ("with three servers ... 70 GB/s")
    op: str = ""  # the collective its sentence names ("the allreduce can saturate over 50Gbps"), "" where none


@dataclass(frozen=True)
class ProseSaid:
    """What one input's sentences claim about the run and its hardware."""

    piece: int
    figures: tuple[FigureSaid, ...] = ()
    gpu: str = ""  # the GPU as written ("H100 PCIe", "a800", "p5.48xlarge")
    gpu_model: str = ""  # its name in the GPU model table (topology/gpu_models.py), where it is there
    gpu_count: int | None = None  # GPUs per node, where stated ("8x H100", "8 NVLink a800 GPU")
    nodes: int | None = None  # nodes, where stated ("2 nodes", "12 compute nodes", "two machines")
    across_nodes: bool = False  # a run across nodes said, with or without their number ("multi-node")
    op: str = ""  # nccl-tests' name of the op: all_reduce, all_gather, ...
    size_bytes: int | None = None  # the message size the figure was measured at, where stated
    nic_kind: str = ""  # HDR, NDR, EDR, EFA, RoCE, TCP, InfiniBand
    nic_gbit_s: float | None = None  # one NIC's line rate, Gb/s, where stated
    nics: int | None = None  # NICs per node, where stated ("1 HDR 200G IB card", "8 x 100 Gbps")
    nvls: bool = False  # NVLink SHARP (NVLS) named
    images: bool = False  # the figures were posted as images (a screenshot, ![...](...))
    shared: bool = False  # the sentences say other traffic shares the network ("storage traffic is on this IB card")
    dual_port: bool = False  # the NICs said to have two ports ("IB 200Gb * 4 (dual port)"): one rate or twice it
    hosts: tuple[HostKind, ...] = ()  # the kinds of host the sentences name ("AMD EPYC 7K62", "passthrough VM")
    checked: tuple[Checked, ...] = ()  # what they say was looked at or set ("I turned off IOMMU and ACS")
    slow: bool = False  # they say the run is short or slow ("much slower", "did not perform as expected")
    asks: bool = False  # they ask whether a speed is what it should be ("is this normal?", "reasonable?")
    lines: tuple[int, ...] = ()  # the lines the claims come from, 1-based
    scaling: ScalingSaid | None = None  # what they say of how the job scales (evidence/scaling.py)
    listed: tuple[tuple[int, str], ...] = ()  # the GPUs listed one per line (index, name as written): a rig's parts
    pcie_said: tuple[tuple[int, int, int], ...] = ()  # (GPU, PCIe generation, width) a sentence puts a GPU on
    amd: bool = False  # the GPUs are AMD's (Instinct MI*, ROCm's tools, xGMI): outside the NVIDIA model table
    copy_tools: tuple[str, ...] = ()  # the copy tools the sentences say were run (p2pBandwidthLatencyTest, nvbandwidth)
    stack: str = ""  # the library other than NCCL the sentences are about (UCX, MPI, NVSHMEM), "" for NCCL or none
    no_gdr: str = ""  # the cloud instance named whose NICs have no GPUDirect RDMA by design ("g6e"), "" where none
    latency_us: float | None = None  # a latency the sentences state, in microseconds ("around 9µs")
