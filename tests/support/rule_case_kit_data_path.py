"""Helpers of the rule cases of the data path (TD306-TD308) and the SM measurements (TD725): the
helpers those cases are written with (the cases themselves are in tests/rules/cases/, by family).
The derived scenarios of fixtures/derived_data_path.py are their firing cases through the scenario
index; these are the near misses, and the thresholds at and across."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import BwEdit, SnapEdit, bw_measure

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
