"""Which GPU pairs the topology wires with NVLink (TD201's base) and which of a GPU's NVLink answers
the probe could not read (what keeps TD102 and TD201 from judging a pair), on the x4 recording
with its links rewired: a link straight to another GPU, to the GPU itself, to an unknown far end
that names a GPU's bus, a link past NVML's count, and each answer unread in turn."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from rule_case_kit import snapshot

from topodoctor.core.probed import ProbeError
from topodoctor.model.snapshot import Gpu, HostSnapshot
from topodoctor.probe.environment import capture_environment
from topodoctor.rules import Context
from topodoctor.rules.nvlink import unread_links
from topodoctor.rules.pcie import _nvlink_wired

UNREAD = ProbeError("NO_PERMISSION", "nvmlDeviceGetNvLinkRemotePciInfo", 4)
X4 = snapshot("h200-x4")  # four GPUs, 18 links each, every link to the NVSwitch plane
BUS = [g.bus_id for g in X4.gpus]


def _links(s: HostSnapshot, i: int, **fields: Any) -> HostSnapshot:
    """Every link of GPU ``i`` with these fields."""
    g = s.gpu(i)
    links = tuple(replace(k, **fields) for k in g.nvlinks)
    return replace(s, gpus=tuple(replace(g, nvlinks=links) if g.index == i else g for g in s.gpus))


def _wired(s: HostSnapshot) -> set[tuple[int, int]]:
    return _nvlink_wired(Context(s, capture_environment({}, system_conf="/nonexistent")))


def test_a_switch_plane_wires_every_pair_once() -> None:
    assert _wired(X4) == {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)}


def test_direct_links_wire_their_pair_and_nothing_else() -> None:
    s = _links(X4, 0, remote_type="gpu", remote_bus_id=BUS[1])  # GPU0 -> GPU1
    s = _links(s, 1, remote_type="gpu", remote_bus_id=BUS[1])  # GPU1 -> itself: wires nothing
    s = _links(s, 2, remote_type="unknown", remote_bus_id=BUS[3])  # a far end of no known kind
    s = _links(s, 3, remote_type="gpu", remote_bus_id=UNREAD)  # a GPU's, bus unread
    assert _wired(s) == {(0, 1)}


def test_the_far_gpu_of_a_direct_link_pairs_from_either_side() -> None:
    s = _links(X4, 0, remote_type="unknown")
    s = _links(s, 1, remote_type="gpu", remote_bus_id=BUS[0])  # GPU1 -> GPU0 only
    s = _links(s, 2, remote_type="unknown")
    s = _links(s, 3, remote_type="unknown")
    assert _wired(s) == {(0, 1)}


def test_a_link_past_nvmls_count_wires_nothing() -> None:
    g = X4.gpu(3)
    links = tuple(replace(k, remote_type="switch" if k.link == 17 else "unknown") for k in g.nvlinks)
    at = replace(X4, gpus=tuple(replace(g, nvlinks=links) if g.index == 3 else g for g in X4.gpus))
    for c, pairs in ((17, {(0, 1), (0, 2), (1, 2)}), (18, {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)})):
        s = replace(at, gpus=tuple(replace(g, nvlink_count=c) if g.index == 3 else g for g in at.gpus))
        assert _wired(s) == pairs, c


def _gpu(**link0: Any) -> Gpu:
    g = X4.gpu(1)
    return replace(g, nvlinks=tuple(replace(k, **link0) if k.link == 0 else k for k in g.nvlinks))


@pytest.mark.parametrize(
    ("gpu", "unread"),
    [
        (_gpu(), []),
        (_gpu(active=UNREAD), [("nvlink0.active", UNREAD)]),
        (_gpu(remote_type=UNREAD), [("nvlink0.remote_type", UNREAD)]),
        (_gpu(remote_bus_id=UNREAD), [("nvlink0.remote_bus_id", UNREAD)]),  # a switch's far end
        (_gpu(remote_type="gpu", remote_bus_id=UNREAD), [("nvlink0.remote_bus_id", UNREAD)]),
        (_gpu(remote_type="unknown", remote_bus_id=UNREAD), []),  # names no GPU: nothing to miss
        (_gpu(active=False, remote_bus_id=UNREAD), []),  # a link down reaches nothing
        (replace(_gpu(active=UNREAD), bus_id=UNREAD), [("bus_id", UNREAD), ("nvlink0.active", UNREAD)]),
    ],
)
def test_the_answers_a_gpu_s_links_could_not_give(gpu: Gpu, unread: list[tuple[str, ProbeError]]) -> None:
    assert unread_links(gpu) == unread


def test_a_link_past_nvmls_count_is_not_missed() -> None:
    g = X4.gpu(1)
    links = tuple(replace(k, active=UNREAD) if k.link >= 16 else k for k in g.nvlinks)
    assert unread_links(replace(g, nvlinks=links, nvlink_count=17)) == [("nvlink16.active", UNREAD)]
    assert unread_links(replace(g, nvlinks=links, nvlink_count=UNREAD)) == [
        ("nvlink_count", UNREAD),
        ("nvlink16.active", UNREAD),
        ("nvlink17.active", UNREAD),
    ]
