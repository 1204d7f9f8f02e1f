"""The rule cases of PCIe (TD2xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from dataclasses import replace

from rule_case_kit import NA, Case, all_links_down, both, every_gpu, gpu, only_gpus, pcie
from rule_case_kit_disagreeing import GEN4_GPU, X8_GPU, _expecting
from rule_case_kit_edges import unwired
from rule_case_kit_fitness import X1, at, fitness, sample
from rule_case_kit_shapes import BRIDGE_DOWN, DIRECT, NV1_DOWN, every_link
from rule_case_kit_variants import UNREAD

CASES = [
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
    # the expectations file asks for more than the GPU's own link can give: the file wins
    Case(
        "TD203",
        True,
        "h200-x4",
        "x16 expected of a GPU whose link trains x8 at most",
        X8_GPU,
        expect_from="h200-x4",
        subjects=("GPU1",),
    ),
    Case("TD203", False, "h200-x4", "x8 of an x8 link, and no expectations file", X8_GPU),
    Case(
        "TD203",
        False,
        "h200-x4",
        "x8 expected of an x8 link",
        X8_GPU,
        expect_from="h200-x4",
        context=_expecting(pcie_width=8),
    ),
    Case(
        "TD204",
        True,
        "h200-x4",
        "Gen5 expected of a GPU whose link runs Gen4 at most",
        GEN4_GPU,
        expect_from="h200-x4",
        subjects=("GPU1",),
    ),
    Case("TD204", False, "h200-x4", "Gen4 of a Gen4 link, and no expectations file", GEN4_GPU),
    # a pair off NVLink counts as a fallback when at least half its peers are on NVLink (and nothing says it is wired)
    Case(
        "TD201",
        True,
        "h200-x4",
        "GPU3's links down and unwired: 3 of 6 pairs on NVLink, exactly half",
        unwired(3),
        subjects=("GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    Case("TD201", False, "h200-x4", "GPU2's and GPU3's links down and unwired: 1 of 6 pairs on NVLink", unwired(2, 3)),
    # TD209: a replay rollover is TD211's, whatever else rose
    Case(
        "TD209",
        False,
        X1,
        "replay +1 and replay rollover +1 (TD211's)",
        sample("end", "pcie", replay=1, replay_rollover=1),
    ),
    # TD209 / TD211: L0-to-recovery counts as a retry; a rate is reported to one decimal
    Case("TD209", True, X1, "L0 to recovery +1 over 0.03 s", sample("end", "pcie", l0_to_recovery=136 + 1)),
    Case(
        "TD211",
        True,
        X1,
        "NAKs sent +101 over 0.7 s: 144.29 per second",
        both(sample("end", "pcie", naks_sent=13 + 101), at(100.0, 100.7)),
    ),
    # TD207 / TD208: uncorrectable errors
    Case("TD207", False, X1, "as recorded: no fatal error (14 receiver errors, 15 bad TLPs standing)"),
    Case("TD208", False, X1, "as recorded: no non-fatal error"),
    Case(
        "TD208",
        True,
        X1,
        "non-fatal count 2 at both readings",
        both(sample("start", "pcie", non_fatal=2), sample("end", "pcie", non_fatal=2)),
    ),
    # TD209 / TD211: retries rising
    Case(
        "TD209",
        False,
        X1,
        "correctable count 5000 at both readings: high, but standing still",
        both(sample("start", "pcie", correctable=5000), sample("end", "pcie", correctable=5000)),
    ),
    Case("TD209", True, X1, "bad DLLP +1 over 0.03 s", sample("end", "pcie", bad_dllp=1)),
    Case(
        "TD211",
        False,
        X1,
        "NAKs sent +99 over 1 s: 99 per second, just under the error rate",
        both(sample("end", "pcie", naks_sent=13 + 99), at(100.0, 101.0)),
    ),
    Case(
        "TD211",
        True,
        X1,
        "NAKs sent +101 over 1 s",
        both(sample("end", "pcie", naks_sent=13 + 101), at(100.0, 101.0)),
        at="ERROR_RATE_PER_S",
    ),
    Case(
        "TD211",
        False,
        X1,
        "NAKs sent +100 over 1 s: the error rate itself",
        both(sample("end", "pcie", naks_sent=13 + 100), at(100.0, 101.0)),
        at="ERROR_RATE_PER_S",
    ),
    Case(
        "TD209",
        True,
        X1,
        "bad DLLP +1 over 5 ms, counted over the shortest window (10 ms): 100 per second",
        both(sample("end", "pcie", bad_dllp=1), at(100.0, 100.005)),
        at="MIN_WINDOW_S",
    ),
    Case(
        "TD211",
        False,
        X1,
        "bad DLLP +1 over 5 ms, counted over the shortest window (10 ms): 100 per second",
        both(sample("end", "pcie", bad_dllp=1), at(100.0, 100.005)),
        at="MIN_WINDOW_S",
    ),
    Case("TD211", True, X1, "replay rollover +1", sample("end", "pcie", replay_rollover=1)),
    Case("TD210", True, "pcie-2socket", "GPU4/GPU5: nearest RDMA NIC across the socket link"),
    Case("TD210", False, "hgx-8gpu-2socket", "every GPU with a NIC under its own PCIe switch"),
    Case("TD201", False, "x4-pcie-fallback", "GPU3's bus id unreadable: its pairs not judged", gpu(3, bus_id=UNREAD)),
]

# TD201 where the wiring decides (no peer pairs on NVLink to go by), on the rarer shapes: a bridged
# pair with every link down, its far ends named, unknown or off the host; links NVML does not count
# or that cannot carry P2P wire nothing; an NV1 node type's pair down; one pair of three on NVLink
CASES += [
    Case(
        "TD201",
        True,
        DIRECT,
        "the bridged pair with every link down: wired by its links' far ends",
        BRIDGE_DOWN,
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD201",
        False,
        DIRECT,
        "every link down, its far end's type unknown (the bus ids kept)",
        both(BRIDGE_DOWN, every_link(remote_type="unknown")),
    ),
    Case(
        "TD201",
        False,
        DIRECT,
        "every link down, its far end a GPU on a bus not on this host",
        both(BRIDGE_DOWN, every_link(remote_bus_id="00000000:00:09.0")),
    ),
    Case(
        "TD201",
        False,
        "x2-nvlinks-all-down",
        "NVML counts no link: the switch links listed wire nothing",
        both(gpu(0, nvlink_count=0), gpu(1, nvlink_count=0)),
    ),
    Case(
        "TD201",
        False,
        "x2-nvlinks-all-down",
        "every link's capability says no P2P: they wire nothing",
        every_link(capabilities=()),
    ),
    Case(
        "TD201",
        True,
        DIRECT,
        "the NV1 pair's one link down at both ends, where the file says 1 per pair",
        NV1_DOWN,
        expect_from=DIRECT,
        context=_expecting(nvlinks_per_pair=1, nvlinks_per_gpu=1),
        subjects=("GPU0-GPU1",),
    ),
    Case(
        "TD201",
        False,
        "h200-x4",
        "three GPUs, GPU2 unwired: one pair of three on NVLink, under half",
        both(only_gpus(0, 1, 2), unwired(2)),
    ),
    # TD204 against an expectation the link can reach (Gen5 of a Gen5 link), and one whose link's
    # maximum NVML does not report
    Case(
        "TD204",
        True,
        "h200-x4",
        "GPU1 at Gen4 of a Gen5 link, the node type expects Gen5",
        pcie(1, gen_current=4),
        expect_from="h200-x4",
        subjects=("GPU1",),
    ),
    Case(
        "TD204",
        True,
        "h200-x4",
        "GPU1 at Gen4, its link's maximum not reported, the node type expects Gen5",
        pcie(1, gen_current=4, gen_max=NA),
        expect_from="h200-x4",
        subjects=("GPU1",),
    ),
]

# the time of the check's second reading unreadable: a rise is a rise (TD209), with no rate to judge (TD211)
_NO_END_TIME = both(
    sample("end", "pcie", bad_dllp=1000), lambda s: fitness(end=replace(s.gpu(0).fitness.end, at_s=UNREAD))(s)
)
CASES += [
    Case("TD209", True, X1, "bad DLLP +1000, the second reading's time unreadable", _NO_END_TIME),
    Case("TD211", False, X1, "bad DLLP +1000, the second reading's time unreadable: no rate", _NO_END_TIME),
]
