"""The rule cases of NVLink (TD1xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from dataclasses import replace

from rule_case_kit import Case, both, every_gpu, gpu, link, link_errors, only_gpus
from rule_case_kit_disagreeing import _expecting
from rule_case_kit_edges import unwired
from rule_case_kit_edges_counts import HGX, one_link_left
from rule_case_kit_shapes import DIRECT, NV1, NV1_DOWN, every_link_at, first_links
from rule_case_kit_variants import UNREAD

from topodoctor.core.probed import ProbeError

CASES = [
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
    # TD103: a link at the edge of the host's speed
    Case(
        "TD103",
        True,
        "h200-x4",
        "GPU2 link 7 at 25233 MB/s, just under 0.95 of 26562",
        link(2, 7, speed_mbps=25233),
        at="SLOW_LINK_SHARE",
    ),
    Case(
        "TD103",
        False,
        "h200-x4",
        "GPU2 link 7 at 25234 MB/s, just over 0.95 of 26562",
        link(2, 7, speed_mbps=25234),
        at="SLOW_LINK_SHARE",
    ),
    # TD102: one link left of 18 is fewer, not none
    Case(
        "TD102",
        True,
        "h200-x4",
        "GPU3 with link 0 alone active",
        one_link_left(3),
        subjects=("GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    # TD102: peers' norm over the pairs that have NVLink, not the unwired ones; none expected, none judged
    Case(
        "TD102",
        True,
        HGX,
        "GPUs 4-7 unwired (22 pairs without NVLink), GPU3's link 0 down",
        both(unwired(4, 5, 6, 7), link(3, 0, active=False)),
        subjects=("GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    Case("TD102", False, "pcie-2socket", "no NVLink, and the node type expects none", expect_from="pcie-2socket"),
    # what could not be read is neither up nor down
    Case(
        "TD102",
        False,
        "x4-nvlink-down",
        "GPU1's link count unreadable: its pairs not judged short",
        gpu(1, nvlink_count=UNREAD),
    ),
    Case(
        "TD101", False, "x4-nvlink-down", "GPU1 link 5's state unreadable: not judged down", link(1, 5, active=UNREAD)
    ),
]

# Rare shapes: a pair joined by exactly one NVLink (NV1), and a direct link whose two ends answer
# differently (tests/support/rule_case_kit_shapes.py)
CASES += [
    Case(
        "TD102",
        True,
        DIRECT,
        "one NVLink between the pair (NV1, each GPU counts 1); the node type has 18",
        NV1,
        expect_from=DIRECT,
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD101",
        True,
        DIRECT,
        "each GPU with one NVLink, up; the node type gives 18 active",
        NV1,
        expect_from=DIRECT,
        subjects=("GPU0", "GPU1"),
    ),
    Case(
        "TD102",
        False,
        DIRECT,
        "NV1 on a node type whose file says 1 link per pair",
        NV1,
        expect_from=DIRECT,
        context=_expecting(nvlinks_per_pair=1, nvlinks_per_gpu=1),
    ),
    Case(
        "TD101",
        False,
        DIRECT,
        "each GPU's one link up, as the node type's file says",
        NV1,
        expect_from=DIRECT,
        context=_expecting(nvlinks_per_pair=1, nvlinks_per_gpu=1),
    ),
    Case(
        "TD102",
        True,
        DIRECT,
        "the NV1 pair's one link down at both ends, where the file says 1 per pair",
        NV1_DOWN,
        expect_from=DIRECT,
        context=_expecting(nvlinks_per_pair=1, nvlinks_per_gpu=1),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD101",
        True,
        DIRECT,
        "the one link of each GPU down, where the file says 1 active",
        NV1_DOWN,
        expect_from=DIRECT,
        context=_expecting(nvlinks_per_pair=1, nvlinks_per_gpu=1),
        subjects=("GPU0", "GPU1"),
    ),
    Case(
        "TD101",
        True,
        DIRECT,
        "GPU0 with two NVLinks, link 1 down",
        both(first_links(0, 2), link(0, 1, active=False)),
        subjects=("GPU0/nvlink1",),
    ),
    Case(
        "TD101",
        True,
        DIRECT,
        "GPU0 with three NVLinks, link 2 down",
        both(first_links(0, 3), link(0, 2, active=False)),
        subjects=("GPU0/nvlink2",),
    ),
    Case(
        "TD101",
        True,
        DIRECT,
        "GPU0 with two NVLinks, both down; GPU1's up",
        both(first_links(0, 2), link(0, 0, active=False), link(0, 1, active=False)),
        subjects=("GPU0",),
    ),
    # the peers' norm is what most pairs have, NV1 included: two GPUs of four on one link leave
    # five pairs at 1 and one at 18, none fewer than the norm
    Case(
        "TD102",
        False,
        "h200-x4",
        "GPU0 and GPU1 with link 0 alone active: five NV1 pairs of six",
        both(one_link_left(0), one_link_left(1)),
    ),
    # a direct link whose ends disagree: the end that says down is the one named
    Case(
        "TD101",
        True,
        DIRECT,
        "link 5 up at GPU0's end, down at GPU1's",
        link(1, 5, active=False),
        subjects=("GPU1/nvlink5",),
    ),
    Case(
        "TD101",
        True,
        DIRECT,
        "link 5 down at GPU0's end, up at GPU1's",
        link(0, 5, active=False),
        subjects=("GPU0/nvlink5",),
    ),
    Case(
        "TD102",
        True,
        DIRECT,
        "link 5 down at GPU0's end: 17 links where the file says 18",
        link(0, 5, active=False),
        expect_from=DIRECT,
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD102",
        True,
        DIRECT,
        "link 5 down at GPU1's end: the pair has 17 links whichever end says so",
        link(1, 5, active=False),
        expect_from=DIRECT,
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD103",
        True,
        DIRECT,
        "link 5 at NVLink 3.1 at GPU1's end, 4.0 at GPU0's",
        link(1, 5, version=5),
        subjects=("GPU1/nvlink5",),
    ),
    Case(
        "TD103",
        True,
        DIRECT,
        "link 5 at 94% of the host's speed at GPU0's end only",
        link(0, 5, speed_mbps=24968),
        subjects=("GPU0/nvlink5",),
    ),
    # TD103: a link exactly 5 % below the host's rate is not under 0.95 of it
    Case(
        "TD103",
        False,
        "h200-x4",
        "every link at 20000 MB/s, GPU2 link 7 at 19000 (0.95 of it exactly)",
        both(every_link_at(20000), link(2, 7, speed_mbps=19000)),
        at="SLOW_LINK_SHARE",
    ),
    # what decides a pair's links: a link past NVML's count or inactive needs no far end; an active
    # link's far end that could not be read stops the pair's judgement
    Case(
        "TD102",
        True,
        "h200-x4",
        "GPU1 counts 17 links; link 17, past the count, has its state unreadable",
        both(gpu(1, nvlink_count=17), link(1, 17, active=UNREAD)),
        subjects=("GPU0-GPU1", "GPU1-GPU2", "GPU1-GPU3"),
    ),
    Case(
        "TD102",
        True,
        "x4-nvlink-down",
        "GPU1's inactive link 5 with its far end's type and bus id unreadable",
        link(1, 5, remote_type=UNREAD, remote_bus_id=UNREAD),
        subjects=("GPU0-GPU1", "GPU1-GPU2", "GPU1-GPU3"),
    ),
    Case(
        "TD102",
        False,
        "x4-nvlink-down",
        "GPU1's active link 0 with its far end's bus id unreadable: GPU1's pairs not judged",
        link(1, 0, remote_bus_id=UNREAD),
    ),
]

# a direct pair whose ends count their links differently (NVML's link count 17 at one end, 18 at the
# other): the end short of links is named
CASES += [
    Case(
        "TD101",
        True,
        DIRECT,
        "GPU1 counts 17 links, GPU0 18; the node type gives 18",
        first_links(1, 17),
        expect_from=DIRECT,
        subjects=("GPU1",),
    ),
    Case(
        "TD102",
        True,
        DIRECT,
        "GPU0 counts 17 links, GPU1 18; the node type has 18 a pair",
        first_links(0, 17),
        expect_from=DIRECT,
        subjects=("GPU0-GPU1",),
    ),
]
