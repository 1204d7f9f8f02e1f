"""Rule cases of the data path (TD306-TD308) and the SM measurements (TD725): part of the table in
tests/support/rule_cases.py. The derived scenarios of fixtures/derived_data_path.py are their firing
cases through the scenario index; these are the near misses, and the thresholds at and across."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import BwEdit, Case, SnapEdit, bw_measure, pair_p2p

from fixtures.derived_data_path import with_sm
from topodoctor.model.snapshot import HostSnapshot


def sm(mode: str, src: int, dst: int, scale: float = 1.0, **fields: Any) -> BwEdit:
    """The measured x4 result given the SM figures, then one SM measurement changed."""

    def edit(r: dict[str, Any]) -> None:
        with_sm(r)
        bw_measure(mode, src, dst, scale, **fields)(r)

    return edit


def bridge(bdf: str, **fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, bridges=tuple(replace(b, **fields) if b.bus_id == bdf else b for b in s.bridges))

    return edit


def fabric_mask(i: int, mask: int) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        g = s.gpu(i)
        return replace(s, gpus=tuple(replace(x, fabric=replace(g.fabric, health_mask=mask)) if x.index == i else x
                                     for x in s.gpus))  # fmt: skip

    return edit


# one-way x4 pairs: 394 GB/s over links of 478.1 GB/s, PCIe (Gen5 x16) at 63.0 GB/s
CRAWL_AT = 0.5 * 478.125 / 394.0  # the share of its rate at which a pair's copy is under half the links'
PCIE_AT = 1.5 * 63.008 / 394.0  # ... and at which it runs at PCIe speed

DATA_PATH_CASES = [
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
    Case("TD725", False, "h200-x4", "every pair's SM latency as measured", bandwidth=sm("sm_latency", 0, 1)),
    Case(
        "TD725",
        False,
        "h200-x4",
        "GPU2 reading GPU3 at 1.19x",
        bandwidth=sm("sm_latency", 2, 3, 1.19),
        at="SLOW_LATENCY",
    ),
    Case(
        "TD725",
        True,
        "h200-x4",
        "GPU2 reading GPU3 at 1.2x",
        bandwidth=sm("sm_latency", 2, 3, 1.2),
        subjects=("GPU2-GPU3",),
        at="SLOW_LATENCY",
    ),
]
