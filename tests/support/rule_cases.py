"""The table of rule cases: for every rule, cases where it must fire and near misses where it
must stay silent, thresholds included. Coverage is computed from this table (and from the
derived scenarios, whose index lists the codes each must raise): a rule without a firing
case or without a near miss fails tests/rules/test_rule_cases.py.

A case starts from a real recording or a derived scenario (fixtures/derive.py) and may apply
one small, named edit to its snapshot, its bandwidth result or the process environment.
"""

from __future__ import annotations

import json
from dataclasses import replace

from conftest import BW_DERIVED, DERIVED, FIXTURES
from rule_case_kit import (
    FAILED,
    NA,
    Case,
    all_links_down,
    both,
    bridge_acs,
    every_gpu,
    every_pair_p2p,
    gpu,
    host_error,
    link,
    link_errors,
    nics,
    only_gpus,
    pair_p2p,
    pcie,
)
from rule_cases_data_path import DATA_PATH_CASES
from rule_cases_disagreeing import DISAGREEING_CASES
from rule_cases_edges_counts import COUNT_EDGE_CASES
from rule_cases_env import ENV_AND_BANDWIDTH_CASES
from rule_cases_fitness import FITNESS_CASES
from rule_cases_measured import MEASURED_CASES
from rule_cases_more import MORE_CASES

from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.snapshot import ComputeProcess, RemappedRows, RetiredPages

CASES: list[Case] = [
    # nvlink
    Case(
        "TD101",
        False,
        "h200-x4",
        "GPU1 link 17 inactive but NVML counts 17 links",
        both(gpu(1, nvlink_count=17), link(1, 17, active=False)),
    ),
    Case(
        "TD101",
        False,
        "h200-x4",
        "GPU1 link 5 inactive, its capability says no P2P",
        link(1, 5, active=False, capabilities=()),
    ),
    Case("TD101", False, "h100-x1", "a GPU with no NVLink"),
    Case(
        "TD102",
        False,
        "h200-x4",
        "link 5 down on every GPU: every pair has 17",
        every_gpu(lambda g: replace(g, nvlinks=tuple(replace(k, active=k.link != 5) for k in g.nvlinks))),
    ),
    Case("TD103", True, "h200-x4", "GPU2 link 7 at 94% of the host's speed", link(2, 7, speed_mbps=24968)),
    Case("TD103", False, "h200-x4", "GPU2 link 7 at 96% of the host's speed", link(2, 7, speed_mbps=25500)),
    Case("TD104", False, "h200-x4", "GPU0 link 3 reads 50 raw CRC errors, no replay", link_errors(0, 3, crc=50)),
    Case("TD104", True, "h200-x4", "GPU0 link 3 reads 1 replay", link_errors(0, 3, replay=1)),
    Case("TD105", False, "h200-x4", "GPU0 link 4 reads 3 replays, no recovery", link_errors(0, 4, replay=3)),
    Case("TD105", True, "h200-x4", "GPU0 link 4 reads 1 recovery", link_errors(0, 4, recovery=1)),
    Case("TD101", False, "x2-nvlinks-all-down", "one GPU left, every link down: nothing to compare with", only_gpus(0)),
    Case(
        "TD101",
        True,
        "h200-x4",
        "GPU1 has 17 links, all up; the node type has 18",
        both(gpu(1, nvlink_count=17), link(1, 17, active=False)),
        expect_from="h200-x4",
        subjects=("GPU1",),
    ),
    Case("TD101", False, "h200-x4", "18 links up as the node type says", expect_from="h200-x4"),
    Case("TD101", True, "x4-two-gpus-links-down", "two GPUs of four with no link up", subjects=("GPU2", "GPU3")),
    Case(
        "TD102",
        True,
        "x4-pcie-fallback",
        "GPU3's pairs have no NVLink; the node type has 18",
        expect_from="h200-x4",
        subjects=("GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    Case(
        "TD102",
        True,
        "x4-nvlink-down",
        "pairs of GPU1 at 17; the node type has 18",
        expect_from="h200-x4",
        subjects=("GPU0-GPU1", "GPU1-GPU2", "GPU1-GPU3"),
    ),
    Case("TD102", False, "x2-nvlink-down", "one pair: no peer pair to compare with"),
    Case("TD102", False, "h200-x4", "18 links per pair as the node type says", expect_from="h200-x4"),
    Case("TD103", True, "h200-x4", "GPU2 link 7 runs NVLink 3.1", link(2, 7, version=5), subjects=("GPU2/nvlink7",)),
    Case(
        "TD103",
        False,
        "h200-x4",
        "GPU2 link 7 version unreadable",
        link(2, 7, version=ProbeError("NO_PERMISSION", "f", 4)),
    ),
    # pcie
    Case(
        "TD201",
        True,
        "hgx-8gpu-2socket",
        "GPU5-7 lost every link: 18 of 28 pairs on PCIe, each its own finding",
        all_links_down(5, 6, 7),
        subjects=tuple(sorted(f"GPU{a}-GPU{b}" for b in (5, 6, 7) for a in range(b))),
    ),
    Case(
        "TD201",
        False,
        "h200-x2",
        "links down with no far end (no bridge, no switch): the topology wires no NVLink",
        every_gpu(
            lambda g: replace(g, nvlinks=tuple(replace(k, active=False, remote_type="unknown") for k in g.nvlinks))
        ),
    ),
    Case("TD201", False, "pcie-2socket", "the node type has no NVLink", expect_from="pcie-2socket"),
    Case(
        "TD201",
        True,
        "x4-pcie-fallback",
        "GPU3 without links: half the pairs still on NVLink",
        subjects=("GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    Case(
        "TD201",
        True,
        "x4-two-gpus-links-down",
        "NVLink pairs are the minority (1 of 6): every PCIe pair is named",
        subjects=("GPU0-GPU2", "GPU0-GPU3", "GPU1-GPU2", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    Case("TD202", False, "hgx-8gpu-2socket", "GPUs on two sockets but every pair on NVLink"),
    Case("TD203", False, "h200-x4", "GPU2 at x8 in an x8 link", pcie(2, width_current=8, width_max=8)),
    Case("TD203", True, "h200-x4", "GPU2 at x15 of x16", pcie(2, width_current=15)),
    Case("TD204", False, "h200-x4", "GPU2 at Gen4 on a Gen4 link", pcie(2, gen_current=4, gen_max=4)),
    Case("TD205", False, "h200-x4", "GPU1 replay counter 99", pcie(1, replay_counter=99)),
    Case("TD205", True, "h200-x4", "GPU1 replay counter 100", pcie(1, replay_counter=100)),
    Case("TD205", False, "h200-x4", "GPU1 replay counter 10000 (TD206)", pcie(1, replay_counter=10000)),
    Case("TD206", False, "h200-x4", "GPU1 replay counter 9999", pcie(1, replay_counter=9999)),
    Case("TD206", True, "h200-x4", "GPU1 replay counter 10000", pcie(1, replay_counter=10000)),
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
    # numa
    Case("TD401", False, "h200-x4", "one NUMA node, GPU numa_node -1"),
    Case(
        "TD401",
        False,
        "hgx-8gpu-2socket",
        "GPU0's NUMA node unreadable (TD901)",
        gpu(0, sysfs_numa_node=ProbeError("EACCES", "read numa_node")),
    ),
    Case(
        "TD401",
        True,
        "hgx-8gpu-2socket",
        "GPU0's local CPUs span both sockets",
        gpu(0, cpu_affinity=tuple(range(128))),
        subjects=("GPU0",),
    ),
    Case("TD401", False, "hgx-8gpu-2socket", "GPU0's local CPUs unknown", gpu(0, cpu_affinity=NA)),
    Case(
        "TD401", True, "hgx-numa-unsupported", "no NUMA node for any GPU", subjects=tuple(f"GPU{i}" for i in range(8))
    ),
    Case("TD402", False, "hgx-numa-unsupported", "Ethernet NICs with no NUMA node", nics(kind="ethernet")),
    Case(
        "TD402",
        False,
        "hgx-8gpu-2socket",
        "NIC NUMA nodes unreadable (TD901)",
        nics(numa_node=ProbeError("EACCES", "read numa_node")),
    ),
    Case("TD402", False, "hgx-8gpu-2socket", "every NIC on a known NUMA node"),
    Case(
        "TD403",
        True,
        "hgx-8gpu-2socket",
        "process bound to CPUs 64-127",
        process_cpus=tuple(range(64, 128)),
        subjects=("GPU0", "GPU1", "GPU2", "GPU3"),
    ),
    Case(
        "TD403",
        True,
        "hgx-8gpu-2socket",
        "process on 64-127, GPU0's local CPUs unknown",
        gpu(0, cpu_affinity=NA),
        process_cpus=tuple(range(64, 128)),
        subjects=("GPU1", "GPU2", "GPU3"),
    ),
    Case("TD403", False, "h200-x4", "process on CPU 5 of a host where every CPU is local", process_cpus=(5,)),
    Case(
        "TD403",
        False,
        "hgx-8gpu-2socket",
        "process bound to CPUs 63-64: one local to each socket",
        process_cpus=(63, 64),
    ),
    # fabric and health
    Case("TD501", False, "h100-x1", "fabric state not supported (no NVSwitch)"),
    Case(
        "TD502",
        False,
        "h200-x4",
        "GPU0 remap pending and failed (TD503)",
        gpu(0, remapped_rows=RemappedRows(0, 1, True, True)),
    ),
    Case(
        "TD503",
        False,
        "h200-x4",
        "GPU0 remap pending, not failed",
        gpu(0, remapped_rows=RemappedRows(0, 1, True, False)),
    ),
    Case(
        "TD504",
        False,
        "h200-x4",
        "GPU2 5 aggregate uncorrectable errors, 0 since reset",
        gpu(2, ecc_uncorrected_aggregate=5),
    ),
    Case("TD504", True, "h200-x4", "GPU2 1 uncorrectable error since reset", gpu(2, ecc_uncorrected_volatile=1)),
    Case("TD505", False, "h200-x4", "GPU3 persistence mode not supported", gpu(3, persistence_mode=NA)),
    Case(
        "TD508",
        False,
        "h200-x4",
        "GPU3 gave no handle: its bus id unknown, 4 GPUs on the bus",
        gpu(
            3,
            lost=ProbeError("GPU_IS_LOST", "nvmlDeviceGetHandleByIndex", 15),
            bus_id=ProbeError("GPU_IS_LOST", "x", 15),
        ),
    ),
    Case(
        "TD508",
        True,
        "x4-gpu-not-counted",
        "3 counted (one bus id unknown), 4 on the bus",
        gpu(
            2,
            lost=ProbeError("GPU_IS_LOST", "nvmlDeviceGetHandleByIndex", 15),
            bus_id=ProbeError("GPU_IS_LOST", "x", 15),
        ),
        subjects=("host",),
    ),
    Case("TD506", False, "x4-gpu-health", "MIG on where the expectations allow it", expect_from="x4-gpu-health"),
    Case(
        "TD507",
        False,
        "h200-x4",
        "GPU1 gave no handle: no permission (TD901)",
        gpu(1, lost=ProbeError("NO_PERMISSION", "nvmlDeviceGetHandleByIndex", 4)),
    ),
    Case(
        "TD508",
        False,
        "h200-x4",
        "no PCI listing (a container without /sys/bus/pci)",
        lambda s: replace(s, pci_gpus=Unsupported("ABSENT")),
    ),
    Case(
        "TD509", False, "h200-x4", "GPU2 3 retired pages, none pending", gpu(2, retired_pages=RetiredPages(2, 1, False))
    ),
    Case("TD511", True, "x4-foreign-processes", "a previous job on GPU1", subjects=("GPU1",), severity="info"),
    Case("TD511", False, "h200-x4", "no compute process on any GPU"),
    Case(
        "TD511",
        False,
        "x4-foreign-processes",
        "both processes are the check's own (its ranks, children of the probing process)",
        gpu(1, compute_processes=(ComputeProcess(3121, 1 << 30, 0, 3120, "python -m rank", True),)),
    ),
    Case(
        "TD511",
        False,
        "h200-x4",
        "GPU1's process list unreadable (TD901)",
        gpu(1, compute_processes=ProbeError("NO_PERMISSION", "nvmlDeviceGetComputeRunningProcesses", 4)),
    ),
    # expectations
    Case("TD801", True, "h200-x2", "2 GPUs where the x4 node type has 4", expect_from="h200-x4"),
    Case("TD801", False, "h200-x4", "the node type's own host", expect_from="h200-x4"),
    Case("TD802", True, "h100-x1", "an H100 where the node type has H200", expect_from="h200-x4"),
    Case("TD802", False, "h200-x2", "H200 as the node type says (count aside)", expect_from="h200-x4"),
    Case("TD803", True, "h200-x4", "no RDMA NIC where the HGX node type has 8", expect_from="hgx-8gpu-2socket"),
    Case("TD803", False, "hgx-8gpu-2socket", "every RDMA NIC present and active", expect_from="hgx-8gpu-2socket"),
    Case(
        "TD803",
        False,
        "h200-x4",
        "RDMA devices could not be listed (TD901)",
        host_error("list /sys/class/infiniband"),
        expect_from="hgx-8gpu-2socket",
    ),
    Case("TD803", True, "hgx-8gpu-2socket", "every port DOWN", nics(state="DOWN"), expect_from="hgx-8gpu-2socket"),
    Case(
        "TD803",
        False,
        "hgx-8gpu-2socket",
        "port state unreadable (TD901)",
        nics(state=ProbeError("EACCES", "read state")),
        expect_from="hgx-8gpu-2socket",
    ),
    # probe
    Case("TD901", True, "h200-x4", "GPU2 persistence mode: NO_PERMISSION", gpu(2, persistence_mode=FAILED)),
    Case("TD901", False, "h200-x4", "GPU2 persistence mode: NOT_SUPPORTED", gpu(2, persistence_mode=NA)),
    *ENV_AND_BANDWIDTH_CASES,
    *DISAGREEING_CASES,
]

# Each derived scenario raises exactly the codes its index lists: those are firing cases too.

SCENARIO_CASES = [Case(code, True, s["name"], s["change"]) for s in DERIVED for code in s["codes"]]
BW_SCENARIO_CASES = [
    Case(
        code,
        True,
        "h200-x4",
        s["change"],
        bandwidth=lambda r, n=s["file"]: r.update(json.loads((FIXTURES / "bandwidth" / "derived" / n).read_text())),
    )
    for s in BW_DERIVED
    for code in s["codes"]
]
ALL_CASES = (
    CASES
    + SCENARIO_CASES
    + BW_SCENARIO_CASES
    + MORE_CASES
    + FITNESS_CASES
    + MEASURED_CASES
    + DATA_PATH_CASES
    + COUNT_EDGE_CASES
)
