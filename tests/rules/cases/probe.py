"""The rule cases of the probe (TD9xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from rule_case_kit import FAILED, NA, Case, gpu, host_error, link, pair_p2p, pcie
from rule_case_kit_edges_counts import HGX, UNREAD, kernel_log
from rule_case_kit_measured import _case

from topodoctor.core.probed import Unsupported

CASES = [
    # probe
    Case("TD901", True, "h200-x4", "GPU2 persistence mode: NO_PERMISSION", gpu(2, persistence_mode=FAILED)),
    Case("TD901", False, "h200-x4", "GPU2 persistence mode: NOT_SUPPORTED", gpu(2, persistence_mode=NA)),
    # TD901: a listing below /sys/class/infiniband that failed is the RDMA devices' listing failing
    Case(
        "TD901",
        True,
        HGX,
        "mlx5_3's ports could not be listed",
        host_error("list /sys/class/infiniband/mlx5_3/ports"),
        subjects=("host",),
    ),
    # TD901: a recording from before kernel events were read says nothing of them; a log that
    # could not be read is a could-not-check
    Case(
        "TD901",
        False,
        "h200-x4",
        "kernel events not probed (an older recording)",
        kernel_log(Unsupported("NOT_PROBED")),
    ),
    Case(
        "TD901",
        True,
        "h200-x4",
        "no kernel log to read",
        kernel_log(Unsupported("NO_ACCESS")),
        subjects=("kernel-log",),
    ),
    # TD901: a field inside a GPU's record and a link's field are named where they are
    Case(
        "TD901",
        True,
        "h200-x4",
        "GPU2's PCIe link width unreadable",
        pcie(2, width_current=UNREAD),
        subjects=("GPU2",),
    ),
    Case(
        "TD901",
        True,
        "h200-x4",
        "GPU2's link 3 state unreadable",
        link(2, 3, active=UNREAD),
    ),
    _case("TD901", True, "busy-gpu0"),
    Case(
        "TD901",
        True,
        "x4-nvlink-down",
        "GPU1's link count unreadable: GPU1 and its pairs could not be checked",
        gpu(1, nvlink_count=UNREAD),
        subjects=("GPU0-GPU1", "GPU1", "GPU1-GPU2", "GPU1-GPU3"),
        severity="warning",
    ),
]

# TD901 on a pair: a field no check reads is told at info, under the pair's name; a lost GPU's
# pairs are the lost GPU's (TD507), not a could-not-check
CASES += [
    Case(
        "TD901",
        True,
        "h200-x4",
        "GPU0-GPU1's PCI P2P status unreadable, read by no check",
        pair_p2p(0, 1, pci=UNREAD),
        subjects=("GPU0-GPU1",),
        severity="info",
    ),
    Case("TD901", False, "x4-gpu-lost", "GPU3 lost: its fields and its pairs' unreadable"),
    Case(
        "TD901",
        True,
        "h200-x4",
        "GPU2's serial number unreadable, read by no check",
        gpu(2, serial=UNREAD),
        subjects=("GPU2",),
        severity="info",
    ),
]
