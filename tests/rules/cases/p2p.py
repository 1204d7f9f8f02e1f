"""The rule cases of P2P (TD3xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from dataclasses import replace

from rule_case_kit import NA, Case, both, bridge_acs, bw_measure, every_gpu, every_pair_p2p, pair_p2p, pcie
from rule_case_kit_data_path import CRAWL_AT, PCIE_AT, bridge, fabric_mask, sm
from rule_case_kit_disagreeing import unknown_virtualization
from rule_case_kit_shapes import first_links, p2p_one_way
from rule_case_kit_variants import UNREAD, fabric

CASES = [
    # p2p
    Case("TD301", False, "x4-p2p-disabled", "P2P off by a driver setting (TD305)"),
    Case(
        "TD301",
        True,
        "h200-x4",
        "GPU0-GPU1 read and write: CHIPSET_NOT_SUPPORTED",
        pair_p2p(0, 1, read="CHIPSET_NOT_SUPPORTED", write="CHIPSET_NOT_SUPPORTED"),
        subjects=("GPU0-GPU1",),
    ),
    Case("TD302", False, "x4-p2p-disabled", "NVLink P2P off because the driver disabled P2P (TD305)"),
    Case(
        "TD302",
        False,
        "h200-x4",
        "P2P read disabled by the driver, NVLink P2P not supported",
        every_pair_p2p(read="DISABLED_BY_REGKEY", nvlink="NOT_SUPPORTED"),
    ),
    Case(
        "TD302",
        True,
        "h200-x4",
        "GPU0-GPU2 NVLink P2P not supported",
        pair_p2p(0, 2, nvlink="NOT_SUPPORTED"),
        subjects=("GPU0-GPU2",),
    ),
    Case(
        "TD303",
        False,
        "hgx-iommu-translated",
        "the same host as a VM",
        lambda s: replace(s, host=replace(s.host, virtualization="vm")),
    ),
    Case(
        "TD303",
        False,
        "hgx-iommu-translated",
        "IOMMU groups in identity mode",
        every_gpu(lambda g: replace(g, iommu_group_type="identity")),
    ),
    Case(
        "TD304",
        False,
        "pcie-2socket",
        "ACS source validation and upstream forwarding, no redirect",
        bridge_acs("0000:04:00.0", 0x11),
    ),
    Case(
        "TD304",
        True,
        "pcie-2socket",
        "ACS request redirect alone",
        bridge_acs("0000:04:00.0", 0x4),
        subjects=("bridge:0000:04:00.0",),
    ),
    Case("TD304", True, "pcie-2socket", "ACS completion redirect alone", bridge_acs("0000:04:00.0", 0x8)),
    Case(
        "TD304",
        False,
        "hgx-8gpu-2socket",
        "ACS redirect above GPU0, whose pairs all use NVLink",
        bridge_acs("0000:15:01.0", 0x1D),
    ),
    Case("TD305", False, "pcie-2socket", "P2P off by the platform, not the driver"),
    Case("TD306", False, "x2-p2p-atomics-refused", "only P2P atomics refused: traffic flows (TD307)"),
    Case("TD306", False, "pcie-2socket", "P2P refused between PCIe-only GPUs: no links up (TD301)"),
    Case("TD306", False, "h100-x2", "NVML answers every P2P capability OK"),
    Case(
        "TD306",
        True,
        "h100-x2",
        "P2P write refused GPU0->GPU1 alone",
        pair_p2p(0, 1, write="NOT_SUPPORTED"),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD306",
        True,
        "h200-x4",
        "one-way GPU0->GPU3 at PCIe speed",
        bandwidth=bw_measure("oneway", 0, 3, PCIE_AT),
        at="PCIE_SPEED",
    ),
    Case(
        "TD306",
        False,
        "h200-x4",
        "one-way GPU0->GPU3 just above PCIe speed",
        bandwidth=bw_measure("oneway", 0, 3, PCIE_AT * 1.01),
        at="PCIE_SPEED",
    ),
    Case("TD306", True, "h200-x4", "SM one-way GPU1->GPU0 staged", bandwidth=sm("sm_oneway", 1, 0, path="staged")),
    Case("TD307", False, "x2-fabric-health-all-false", "every fabric condition reported FALSE"),
    Case("TD307", False, "x2-links-up-p2p-dead", "P2P dead: TD306 names it, not TD307"),
    Case(
        "TD307",
        True,
        "h100-x2",
        "GPU0's fabric route unhealthy (0x10)",
        fabric_mask(0, 0x10),
        subjects=("GPU0-GPU1",),
        severity="error",
    ),
    Case("TD307", True, "h100-x2", "GPU1's fabric recovering a route (0x4)", fabric_mask(1, 0x4), severity="warning"),
    Case("TD307", False, "h100-x2", "GPU1's fabric route recovery FALSE (0x8)", fabric_mask(1, 0x8)),
    Case(
        "TD307",
        True,
        "h200-x4",
        "one-way GPU1->GPU2 just under half the links' rate",
        bandwidth=bw_measure("oneway", 1, 2, CRAWL_AT * 0.99),
        subjects=("GPU1-GPU2",),
        severity="error",
        at="CRAWL",
    ),
    Case(
        "TD307",
        False,
        "h200-x4",
        "one-way GPU1->GPU2 at half the links' rate",
        bandwidth=bw_measure("oneway", 1, 2, CRAWL_AT),
        at="CRAWL",
    ),
    Case("TD308", False, "pcie-2socket", "every switch uplink at x16 Gen4, as its GPUs"),
    Case(
        "TD308",
        False,
        "pcie-2socket",
        "a downstream port above GPU0 at x8: GPU0's own link (TD203's)",
        bridge("0000:04:00.0", link_width=8),
    ),
    Case(
        "TD308",
        True,
        "pcie-2socket",
        "the outer switch's uplink above GPUs 0-3 at x8",
        bridge("0000:01:00.0", link_width=8),
        subjects=("bridge:0000:01:00.0",),
        severity="error",
    ),
    Case(
        "TD308",
        True,
        "pcie-2socket",
        "the outer switch's uplink above GPUs 0-3 at Gen3 of Gen4, full width",
        bridge("0000:01:00.0", link_speed="8.0 GT/s PCIe"),
        subjects=("bridge:0000:01:00.0",),
        severity="warning",
    ),
]

# TD303 where the probe could not tell a VM from bare metal: a GPU in translation mode is
# could-not-check, named once for the host; with none in translation there is nothing to tell apart
CASES += [
    Case(
        "TD303",
        False,
        "hgx-iommu-translated",
        "VM or bare metal unknown (cpuinfo unreadable): not judged",
        unknown_virtualization,
    ),
    Case(
        "TD901",
        True,
        "hgx-iommu-translated",
        "VM or bare metal unknown, IOMMU groups translating: TD303 could not check",
        unknown_virtualization,
        subjects=("host",),
    ),
    Case(
        "TD901",
        False,
        "hgx-iommu-translated",
        "the same host as a VM: its IOMMU groups are the hypervisor's, nothing left unchecked",
        lambda s: replace(s, host=replace(s.host, virtualization="vm")),
    ),
    Case(
        "TD901",
        False,
        "hgx-iommu-translated",
        "VM or bare metal unknown, IOMMU groups in identity mode",
        both(unknown_virtualization, every_gpu(lambda g: replace(g, iommu_group_type="identity"))),
    ),
]

# a pair through a lost GPU is the lost GPU's finding (TD507), whatever its P2P status reads
CASES.append(
    Case(
        "TD301",
        False,
        "x4-gpu-lost",
        "GPU0-GPU3 read and write CHIPSET_NOT_SUPPORTED, GPU3 lost",
        pair_p2p(0, 3, read="CHIPSET_NOT_SUPPORTED", write="CHIPSET_NOT_SUPPORTED"),
    )
)

# TD306 on the rarer shapes: one NVLink (slower than the host's PCIe link), three (faster, not by
# twice), and a host link whose rate NVML does not report
CASES += [
    Case(
        "TD306",
        True,
        "x2-links-up-p2p-dead",
        "each GPU with one NVLink (NV1), P2P dead: the link carries less than PCIe",
        both(first_links(0, 1), first_links(1, 1)),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD306",
        True,
        "x2-links-up-p2p-dead",
        "each GPU with three NVLinks (NV3), P2P dead: 80 GB/s of links against 63 of PCIe",
        both(first_links(0, 3), first_links(1, 3)),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD306",
        True,
        "x2-links-up-p2p-dead",
        "each GPU with five NVLinks (NV5), P2P dead: 133 GB/s of links against 63 of PCIe, twice",
        both(first_links(0, 5), first_links(1, 5)),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD306",
        True,
        "x2-links-up-p2p-dead",
        "P2P dead, GPU0's fabric state not supported (no fabric manager to wait for)",
        fabric(0, state="not_supported"),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD306",
        True,
        "x2-links-up-p2p-dead",
        "P2P dead, the GPUs' PCIe generation not reported",
        both(pcie(0, gen_current=NA, gen_max=NA), pcie(1, gen_current=NA, gen_max=NA)),
        subjects=("GPU0-GPU1",),
    ),
]

# a pair whose two directions answer differently: the direction that fails is the one named
CASES += [
    Case(
        "TD301",
        True,
        "h200-x4",
        "GPU1->GPU0 read and write CHIPSET_NOT_SUPPORTED, GPU0->GPU1 OK",
        p2p_one_way(0, 1, read="CHIPSET_NOT_SUPPORTED", write="CHIPSET_NOT_SUPPORTED"),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD306",
        True,
        "h200-x4",
        "GPU1->GPU0 P2P read NOT_SUPPORTED, GPU0->GPU1 OK",
        p2p_one_way(0, 1, read="NOT_SUPPORTED"),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD901",
        True,
        "h200-x4",
        "GPU1->GPU0 P2P read unreadable, GPU0->GPU1 read",
        p2p_one_way(0, 1, read=UNREAD),
        subjects=("GPU0-GPU1",),
        severity="warning",
    ),
]
