"""What each GPU model is built with, by design: its NVLinks, its PCIe link, whether it talks to its
peers directly, NVLink SHARP, its memory. Data only, each figure with its source; the one table every
expectation of a GPU model reads (the per-link signalling rates are graph.py's NVLINK_LINK_GBPS,
NCCL's own per-link credit busbw.py's NCCL_NVLINK_GBPS).

Figures are per GPU. ``nvlink_links`` is the count the design gives a GPU (A100 SXM4: 12; H100 SXM5: 18;
H100 NVL: 12 over its three bridges; V100 SXM2: 6); ``nvlink_gbps`` is per link and per direction, as
``nvidia-smi nvlink -s`` prints it. ``fabric`` says how the links reach the peers: ``nvswitch`` (every
GPU of a baseboard reaches every other at the whole bundle), ``bridge`` (pairs or quads of cards), ``mesh``
(the V100 hybrid cube mesh: direct links to some peers only), ``none``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Fabric = Literal["nvswitch", "bridge", "mesh", "none"]

# Sources, named once: the figures below cite them by key.
SOURCES = {
    "a100": "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100), and the NVIDIA A100 "
    "Tensor Core GPU Architecture whitepaper (12 third-generation NVLinks, 600 GB/s)",
    "h100": "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100): SXM 900 GB/s NVLink, "
    "PCIe 600 GB/s NVLink bridge, H100 NVL 600 GB/s bridge; the NVIDIA H100 Tensor Core GPU Architecture "
    "whitepaper (18 fourth-generation NVLinks per SXM5 GPU); H100 PCIe Product Brief PB-11133-001",
    "x800": "NVIDIA A800 and H800 product specifications (nvidia.cn data-center pages, NVIDIA's statement of "
    "2022-11-07): the A100 and H100 with NVLink held to 400 GB/s both ways per GPU (8 links where A100 has 12 "
    "and H100 SXM 18), memory and PCIe unchanged",
    "h200": "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200): SXM 900 GB/s NVLink, "
    "141 GB HBM3e at 4.8 TB/s; H200 NVL 2- or 4-way NVLink bridge at 900 GB/s",
    "h20": "NVIDIA H20 product specifications (HGX H20): 96 GB HBM3, 4.0 TB/s, NVLink 900 GB/s, PCIe Gen5 x16",
    "b200": "NVIDIA DGX B200 / HGX B200 datasheet (nvidia.com/en-us/data-center/dgx-b200): fifth-generation "
    "NVLink, 1.8 TB/s per GPU (18 links), HBM3e at 8 TB/s",
    "gh200": "NVIDIA GH200 Grace Hopper Superchip datasheet: NVLink 4 900 GB/s to other superchips, "
    "NVLink-C2C 900 GB/s to Grace, 96 GB HBM3 at 4 TB/s (144 GB HBM3e at 4.9 TB/s)",
    "l4": "NVIDIA L4 Tensor Core GPU datasheet: PCIe Gen4 x16, no NVLink, 24 GB GDDR6 at 300 GB/s",
    "l40s": "NVIDIA L40S datasheet: PCIe Gen4 x16, no NVLink, 48 GB GDDR6 at 864 GB/s",
    "a10g": "AWS EC2 G5 instances (A10G): PCIe Gen4 x16, no NVLink, 24 GB GDDR6 at 600 GB/s",
    "a40": "NVIDIA A40 datasheet: PCIe Gen4 x16, NVLink bridge 112.5 GB/s bidirectional (2 cards), "
    "48 GB GDDR6 at 696 GB/s",
    "a6000": "NVIDIA RTX A6000 datasheet: PCIe Gen4 x16, NVLink bridge 112.5 GB/s bidirectional (2 cards), "
    "48 GB GDDR6 at 768 GB/s",
    "geforce": "GeForce RTX 3090 / 4090 / 5090 specifications (nvidia.com/en-us/geforce): PCIe Gen4 x16 / Gen4 x16 / "
    "Gen5 x16; NVLink only on the 3090 (a 2-card bridge, 112.5 GB/s both ways); 24 GB GDDR6X at 936 / 1008 GB/s, "
    "32 GB GDDR7 at 1792 GB/s; RTX 2080 Ti: PCIe Gen3 x16, a 2-card NVLink bridge (2 links, 100 GB/s both ways), "
    "11 GB GDDR6 at 616 GB/s; peer-to-peer over PCIe is not enabled by the GeForce driver "
    "(cudaDeviceCanAccessPeer answers 0; NVIDIA/nccl#1127, nccl-tests#117)",
    "v100": "NVIDIA Tesla V100 datasheet: SXM2 300 GB/s NVLink (6 second-generation links, hybrid cube mesh on "
    "8 GPUs), PCIe 32 GB/s, 900 GB/s HBM2",
    "t4": "NVIDIA T4 datasheet: PCIe Gen3 x16, no NVLink, 16 GB GDDR6 at 320 GB/s",
    "nvls": "NCCL's NVLS transport (src/transport/nvls.cc): multicast needs an NVSwitch and compute capability "
    "9.0 or later (cudaDevAttrMulticastSupported); elsewhere NCCL builds 0 nvls channels",
}


@dataclass(frozen=True)
class GpuModel:
    """One GPU model as designed: how it reaches its peers and its host, and its memory."""

    name: str  # our name for it: "H100 SXM"
    pattern: str  # a regular expression nvidia-smi's name matches (case-blind)
    arch: str  # Volta, Turing, Ampere, Ada, Hopper, Blackwell
    compute_capability: str
    nvlink_gen: float | None  # None: no NVLink
    nvlink_links: int  # by design, per GPU
    nvlink_gbps: float | None  # per link, per direction
    fabric: Fabric
    pcie_gen: int
    pcie_width: int
    p2p_pcie: bool  # peer-to-peer over PCIe allowed by the driver
    nvls: bool  # NVLink SHARP (multicast) possible on the platform it ships in
    memory: str  # "80 GB HBM3"
    memory_tbps: float  # memory bandwidth, TB/s
    source: str  # key into SOURCES

    @property
    def nvlink_total_gbps(self) -> float | None:
        """The whole bundle per direction: links x rate (H100 SXM: 18 x 26.5625 = 478 GB/s)."""
        return self.nvlink_links * self.nvlink_gbps if self.nvlink_gbps else None


_NV3, _NV4, _NV5 = 25.0, 26.5625, 53.125  # per link, per direction (nvidia-smi nvlink -s)
_A_BRIDGE = 14.0625  # GA102's NVLink: 4 links x 14.0625 = 56.25 GB/s per direction (112.5 both ways)

# Order matters: the first whose pattern matches names the model (H200 NVL before H200, GH200 apart).
MODELS: tuple[GpuModel, ...] = (
    # one superchip per node as most sites have it: its 18 links reach other nodes only through an NVLink
    # Switch system (NVL32), which this table does not assume
    GpuModel("GH200", r"\bGH200\b", "Hopper", "9.0", 4.0, 18, _NV4, "none", 5, 16, True, False,
             "96 GB HBM3", 4.0, "gh200"),
    GpuModel("H200 NVL", r"\bH200 NVL\b", "Hopper", "9.0", 4.0, 18, _NV4, "bridge", 5, 16, True, False,
             "141 GB HBM3e", 4.8, "h200"),
    GpuModel("H200 SXM", r"\bH200\b", "Hopper", "9.0", 4.0, 18, _NV4, "nvswitch", 5, 16, True, True,
             "141 GB HBM3e", 4.8, "h200"),
    GpuModel("H100 NVL", r"\bH100 NVL\b", "Hopper", "9.0", 4.0, 12, _NV4, "bridge", 5, 16, True, False,
             "94 GB HBM3", 3.9, "h100"),
    GpuModel("H100 PCIe", r"\bH100\b.*PCIe", "Hopper", "9.0", 4.0, 12, _NV4, "bridge", 5, 16, True, False,
             "80 GB HBM2e", 2.0, "h100"),
    GpuModel("H100 SXM", r"\bH100\b", "Hopper", "9.0", 4.0, 18, _NV4, "nvswitch", 5, 16, True, True,
             "80 GB HBM3", 3.35, "h100"),
    GpuModel("H800 PCIe", r"\bH800\b.*PCIe", "Hopper", "9.0", 4.0, 8, _NV4, "bridge", 5, 16, True, False,
             "80 GB HBM2e", 2.0, "x800"),
    GpuModel("H800 SXM", r"\bH800\b", "Hopper", "9.0", 4.0, 8, _NV4, "nvswitch", 5, 16, True, True,
             "80 GB HBM3", 3.35, "x800"),
    GpuModel("H20", r"\bH20\b", "Hopper", "9.0", 4.0, 18, _NV4, "nvswitch", 5, 16, True, True,
             "96 GB HBM3", 4.0, "h20"),
    GpuModel("B200", r"\bB200\b", "Blackwell", "10.0", 5.0, 18, _NV5, "nvswitch", 5, 16, True, True,
             "180 GB HBM3e", 8.0, "b200"),
    GpuModel("A100 PCIe", r"\bA100\b.*PCIE", "Ampere", "8.0", 3.0, 12, _NV3, "bridge", 4, 16, True, False,
             "80 GB HBM2e", 1.935, "a100"),
    GpuModel("A100 SXM", r"\bA100\b", "Ampere", "8.0", 3.0, 12, _NV3, "nvswitch", 4, 16, True, False,
             "80 GB HBM2e", 2.039, "a100"),
    GpuModel("A800 PCIe", r"\bA800\b.*PCIE", "Ampere", "8.0", 3.0, 8, _NV3, "bridge", 4, 16, True, False,
             "80 GB HBM2e", 1.935, "x800"),
    GpuModel("A800 SXM", r"\bA800\b", "Ampere", "8.0", 3.0, 8, _NV3, "nvswitch", 4, 16, True, False,
             "80 GB HBM2e", 2.039, "x800"),
    GpuModel("L40S", r"\bL40S\b", "Ada", "8.9", None, 0, None, "none", 4, 16, True, False,
             "48 GB GDDR6", 0.864, "l40s"),
    GpuModel("L4", r"\bL4\b", "Ada", "8.9", None, 0, None, "none", 4, 16, True, False,
             "24 GB GDDR6", 0.3, "l4"),
    GpuModel("A10G", r"\bA10G\b", "Ampere", "8.6", None, 0, None, "none", 4, 16, True, False,
             "24 GB GDDR6", 0.6, "a10g"),
    GpuModel("A40", r"\bA40\b", "Ampere", "8.6", 3.0, 4, _A_BRIDGE, "bridge", 4, 16, True, False,
             "48 GB GDDR6", 0.696, "a40"),
    GpuModel("RTX A6000", r"\bRTX A6000\b", "Ampere", "8.6", 3.0, 4, _A_BRIDGE, "bridge", 4, 16, True, False,
             "48 GB GDDR6", 0.768, "a6000"),
    GpuModel("RTX 5090", r"\bRTX 5090\b", "Blackwell", "12.0", None, 0, None, "none", 5, 16, False, False,
             "32 GB GDDR7", 1.792, "geforce"),
    GpuModel("RTX 3090", r"\bRTX 3090\b", "Ampere", "8.6", 3.0, 4, _A_BRIDGE, "bridge", 4, 16, False, False,
             "24 GB GDDR6X", 0.936, "geforce"),
    GpuModel("RTX 4090", r"\bRTX 4090\b", "Ada", "8.9", None, 0, None, "none", 4, 16, False, False,
             "24 GB GDDR6X", 1.008, "geforce"),
    GpuModel("RTX 2080 Ti", r"\bRTX 2080 ?Ti\b", "Turing", "7.5", 2.0, 2, _NV3, "bridge", 3, 16, False, False,
             "11 GB GDDR6", 0.616, "geforce"),
    GpuModel("V100 SXM2", r"\bV100\b.*SXM2", "Volta", "7.0", 2.0, 6, _NV3, "mesh", 3, 16, True, False,
             "32 GB HBM2", 0.9, "v100"),
    GpuModel("V100 PCIe", r"\bV100S?\b.*PCIE", "Volta", "7.0", None, 0, None, "none", 3, 16, True, False,
             "32 GB HBM2", 0.9, "v100"),
    GpuModel("T4", r"\bT4\b", "Turing", "7.5", None, 0, None, "none", 3, 16, True, False,
             "16 GB GDDR6", 0.32, "t4"),
)  # fmt: skip
_COMPILED = tuple((re.compile(m.pattern, re.IGNORECASE), m) for m in MODELS)


def model_of(name: str) -> GpuModel | None:
    """The model an nvidia-smi name ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB") is, or None."""
    for rx, m in _COMPILED:
        if rx.search(name or ""):
            return m
    return None
