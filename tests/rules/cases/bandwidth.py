"""The rule cases of bandwidth and fitness (TD7xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from dataclasses import replace

from rule_case_kit import Case, bw_activity, bw_measure, measured, set_measured
from rule_case_kit_data_path import sm
from rule_case_kit_disagreeing import _expecting
from rule_case_kit_edges import NV18_GBPS, PEER_MEDIAN, X4_PCIE_GBPS, _bw, bw_alone, bw_value
from rule_case_kit_edges_counts import COPY, SLOW, oneway_only, pcie_pair_2_3, sm_latency_of_one_pair
from rule_case_kit_edges_fitness import (
    EXPECTED_BF16,
    HBM_PEAK,
    HBM_SM_MEDIAN,
    LATENCY_MEDIAN,
    _fit,
    both,
    figure,
    only_gpus,
)
from rule_case_kit_measured import _case
from rule_case_kit_variants import STAGED_2_3, _h2d_failed, x16_at_x8

CASES = [
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
    # bandwidth: peers 0.85, nominal 0.5, PCIe fallback 1.5x, host link 0.7
    _bw(
        "TD701",
        False,
        "one-way GPU1->GPU2 at 0.85 of its peers' median",
        bw_value("oneway", 1, 2, 0.85 * PEER_MEDIAN),
        "SLOW_VS_PEERS",
    ),
    _bw(
        "TD701",
        True,
        "one-way GPU1->GPU2 at 0.845 of its peers' median",
        bw_value("oneway", 1, 2, 0.845 * PEER_MEDIAN),
        "SLOW_VS_PEERS",
    ),
    _bw(
        "TD701",
        False,
        "one-way GPU1->GPU2 alone at half its path's rate",
        bw_alone(1, 2, 0.5 * NV18_GBPS),
        "SLOW_VS_NOMINAL",
    ),
    _bw(
        "TD701",
        True,
        "one-way GPU1->GPU2 alone at 0.497 of its path's rate",
        bw_alone(1, 2, 0.497 * NV18_GBPS),
        "SLOW_VS_NOMINAL",
    ),
    _bw(
        "TD703",
        True,
        "one-way GPU0->GPU3 at 1.5x its PCIe rate",
        bw_value("oneway", 0, 3, 1.5 * X4_PCIE_GBPS),
        "PCIE_SPEED_FACTOR",
    ),
    _bw(
        "TD703",
        False,
        "one-way GPU0->GPU3 at 1.507x its PCIe rate",
        bw_value("oneway", 0, 3, 1.507 * X4_PCIE_GBPS),
        "PCIE_SPEED_FACTOR",
    ),
    _bw("TD704", False, "host->GPU2 at 0.7 of its link", bw_value("h2d", -1, 2, 0.7 * X4_PCIE_GBPS), "HOST_LINK_FLOOR"),
    _bw(
        "TD704",
        True,
        "host->GPU2 at 0.697 of its link",
        bw_value("h2d", -1, 2, 0.697 * X4_PCIE_GBPS),
        "HOST_LINK_FLOOR",
    ),
    # TD701: three pairs of a connection give a median; two do not (only the nominal rate judges)
    Case(
        "TD701",
        True,
        "h200-x4",
        "three one-way pairs measured, GPU1->GPU2 at 0.7 of the other two",
        bandwidth=oneway_only(p0_1=COPY, p0_2=COPY, p1_2=SLOW),
        subjects=("GPU1-GPU2",),
        at="PEERS_FOR_MEDIAN",
    ),
    Case(
        "TD701",
        False,
        "h200-x4",
        "two one-way pairs measured, GPU1->GPU2 at 0.7 of the other (above half its path's rate)",
        bandwidth=oneway_only(p0_1=COPY, p1_2=SLOW),
        at="PEERS_FOR_MEDIAN",
    ),
    # TD725: two pairs of a connection are enough for a norm
    Case(
        "TD725",
        True,
        "h200-x4",
        "SM latency of GPU2->GPU3 and GPU3->GPU2 alone, the first 3.5x the second",
        bandwidth=sm_latency_of_one_pair(3.5),
        subjects=("GPU2-GPU3",),
    ),
    # TD702: the one-way copies through peer access are judged, not the bidirectional ones
    Case("TD702", False, "h200-x4", "bidirectional GPU2<->GPU3 at 0.1x", bandwidth=bw_measure("bidir", 2, 3, 0.1)),
    Case(
        "TD702",
        False,
        "h200-x4",
        "one-way GPU2->GPU3 at 0.1x, staged through the host",
        bandwidth=bw_measure("oneway", 2, 3, 0.1, path="staged"),
    ),
    # TD703: a pair joined over PCIe alone is not "NVLink at PCIe speed"
    Case("TD703", False, "h200-x4", "GPU2 and GPU3 unwired, GPU2->GPU3 at 50 GB/s over PCIe", bandwidth=pcie_pair_2_3),
    # fitness: HBM 0.70 of NVML's peak; peers 0.92 (latency 1.20) with 3 or more; 0.92 of the expectation
    _fit(
        "TD710",
        False,
        "GPU0 hbm ce at 0.70 of the peak",
        figure("hbm", "ce", 0, 0.7 * HBM_PEAK / 2),
        "HBM_SHARE_OF_PEAK",
    ),
    _fit(
        "TD710",
        True,
        "GPU0 hbm ce at 0.697 of the peak",
        figure("hbm", "ce", 0, 0.697 * HBM_PEAK / 2),
        "HBM_SHARE_OF_PEAK",
    ),
    _fit(
        "TD711",
        False,
        "GPU2 hbm sm at 0.92 of its peers",
        figure("hbm", "sm", 2, 0.92 * HBM_SM_MEDIAN),
        "SLOW_VS_PEERS",
    ),
    _fit(
        "TD711",
        True,
        "GPU2 hbm sm at 0.916 of its peers",
        figure("hbm", "sm", 2, 0.916 * HBM_SM_MEDIAN),
        "SLOW_VS_PEERS",
    ),
    _fit(
        "TD718",
        False,
        "GPU2 host latency at 1.20 of its peers",
        figure("latency", "sm", 2, 1.2 * LATENCY_MEDIAN, -1),
        "SLOW_LATENCY_VS_PEERS",
    ),
    _fit(
        "TD718",
        True,
        "GPU2 host latency at 1.205 of its peers",
        figure("latency", "sm", 2, 1.205 * LATENCY_MEDIAN, -1),
        "SLOW_LATENCY_VS_PEERS",
    ),
    _fit(
        "TD711",
        True,
        "three GPUs' HBM, GPU2 at half",
        both(only_gpus("hbm", 0, 1, 2), figure("hbm", "sm", 2, 0.5 * HBM_SM_MEDIAN)),
        "MIN_PEERS",
        subjects=("GPU2",),
    ),
    _fit(
        "TD711",
        False,
        "two GPUs' HBM, GPU2 at half",
        both(only_gpus("hbm", 0, 2), figure("hbm", "sm", 2, 0.5 * HBM_SM_MEDIAN)),
        "MIN_PEERS",
    ),
    _fit(
        "TD714",
        False,
        "GPU1 bf16 at 0.92 of the expectation",
        figure("compute", "bf16", 1, 0.92 * EXPECTED_BF16),
        "BELOW_EXPECTED",
        expect_from="h200-x4",
    ),
    _fit(
        "TD714",
        True,
        "GPU1 bf16 at 0.916 of the expectation",
        figure("compute", "bf16", 1, 0.916 * EXPECTED_BF16),
        "BELOW_EXPECTED",
        expect_from="h200-x4",
    ),
    # bandwidth (the measured x4 result, one measurement changed)
    Case("TD701", False, "h200-x4", "one-way GPU1->GPU2 at 0.9x", bandwidth=bw_measure("oneway", 1, 2, 0.9)),
    Case(
        "TD701",
        True,
        "h200-x4",
        "one-way GPU1->GPU2 at 0.8x",
        bandwidth=bw_measure("oneway", 1, 2, 0.8),
        subjects=("GPU1-GPU2",),
    ),
    Case("TD702", True, "h200-x4", "one-way GPU2->GPU3 at 0.1x", bandwidth=bw_measure("oneway", 2, 3, 0.1)),
    Case("TD704", True, "h200-x4", "GPU2->host at 0.6x", bandwidth=bw_measure("d2h", 2, -1, 0.6), subjects=("GPU2",)),
    Case("TD704", True, "h200-x4", "host->GPU1 at 0.6x", bandwidth=bw_measure("h2d", -1, 1, 0.6), subjects=("GPU1",)),
    Case(
        "TD707",
        True,
        "h200-x4",
        "GPU1 at 50% utilisation, no process listed (someone we cannot see)",
        bandwidth=bw_activity(1, utilization_pct=50),
        subjects=("GPU1",),
    ),
    Case("TD707", True, "h200-x4", "GPU3 with one process", bandwidth=bw_activity(3, processes=1), subjects=("GPU3",)),
    Case(
        "TD707",
        False,
        "h200-x4",
        "GPU1 utilisation and processes unknown",
        bandwidth=bw_activity(1, utilization_pct=None, processes=None),
    ),
    Case(
        "TD702",
        False,
        "h200-x4",
        "one-way GPU2->GPU3 at 0.2x, above host staging",
        bandwidth=bw_measure("oneway", 2, 3, 0.2),
    ),
    Case(
        "TD703",
        False,
        "h200-x4",
        "one-way GPU0->GPU3 at 0.25x, above 1.5x its PCIe rate",
        bandwidth=bw_measure("oneway", 0, 3, 0.25),
    ),
    Case("TD704", False, "h200-x4", "host->GPU2 at 0.85x", bandwidth=bw_measure("h2d", -1, 2, 0.85)),
    Case(
        "TD705",
        False,
        "h200-x4",
        "one-way GPU3->GPU0 not verified",
        bandwidth=bw_measure("oneway", 3, 0, verified=None),
    ),
    Case(
        "TD706",
        False,
        "h200-x4",
        "one-way GPU0->GPU1 out of memory (TD708)",
        bandwidth=bw_measure("oneway", 0, 1, error="CUDA out of memory"),
    ),
    Case(
        "TD707", False, "h200-x4", "GPU1 at 49% utilisation, no process", bandwidth=bw_activity(1, utilization_pct=49)
    ),
    Case(
        "TD708",
        False,
        "h200-x4",
        "one-way GPU0->GPU1 timed out (TD706)",
        bandwidth=bw_measure("oneway", 0, 1, error="timeout: no answer after 20 s"),
    ),
    _case("TD710", True, "hbm-all-slow", ("GPU0", "GPU0", "GPU1", "GPU1", "GPU2", "GPU2", "GPU3", "GPU3")),
    _case("TD710", False, "hbm-all-near"),
    _case("TD710", False, "healthy"),
    _case("TD711", True, "hbm-slow-gpu2", ("GPU2", "GPU2")),
    _case("TD711", False, "hbm-near-gpu2"),
    _case("TD711", False, "hbm-all-slow"),  # peers agree: the limit (TD710) catches it
    _case("TD712", True, "compute-slow-gpu1", ("GPU1",)),
    _case("TD712", False, "compute-near-gpu1"),
    _case("TD713", True, "hw-thermal-gpu3", ("GPU3",)),
    _case("TD713", False, "healthy"),  # SW power cap in every sample of every GPU: normal at full load
    _case("TD714", True, "compute-slow-gpu1", ("GPU1",), expect_from="h200-x4"),
    _case("TD714", True, "hbm-all-slow", expect_from="h200-x4"),
    _case("TD714", False, "compute-near-gpu1", expect_from="h200-x4"),
    _case("TD715", True, "wrong-data-gpu1", ("GPU1",)),
    _case("TD715", False, "healthy"),
    _case("TD716", True, "timeout-gpu3", ("GPU3",)),
    _case("TD716", False, "busy-gpu0"),  # refused on purpose: could not check (TD901), not a failure
    _case("TD717", True, "pair-slow-0-1", ("GPU0-GPU1",)),
    _case("TD717", False, "pair-near-0-1"),
    _case("TD718", True, "latency-slow-gpu2", ("GPU2",)),
    _case("TD718", False, "latency-near-gpu2"),
    # host copies: named by their GPU, judged against the link the GPU should have
    Case(
        "TD706",
        True,
        "h200-x4",
        "host->GPU1 copy timed out",
        bandwidth=bw_measure("h2d", -1, 1, error="timeout: no answer after 20 s"),
        subjects=("GPU1",),
    ),
    Case(
        "TD704",
        True,
        "h200-x4",
        "GPU2 at x8 of x16, host->GPU2 at 40 GB/s: below 0.7 of the x16 it should have",
        bandwidth=x16_at_x8(2, 40.0),
        subjects=("GPU2",),
    ),
    # P2P against staging through the host: 0.9 of the slower host copy
    Case(
        "TD702",
        False,
        "h200-x4",
        "one-way GPU2->GPU3 at 0.9 of staging",
        bandwidth=bw_value("oneway", 2, 3, 0.9 * STAGED_2_3),
    ),
    Case(
        "TD702",
        True,
        "h200-x4",
        "one-way GPU2->GPU3 at 0.895 of staging",
        bandwidth=bw_value("oneway", 2, 3, 0.895 * STAGED_2_3),
    ),
    Case(
        "TD702",
        False,
        "h200-x4",
        "one-way GPU2->GPU3 at 10 GB/s, host->GPU3 failed: staging unknown",
        bandwidth=_h2d_failed,
    ),
]

# a fitness run that measured its figures and also says what it could not: the figures are judged
CASES.append(
    Case(
        "TD711",
        True,
        "h200-x4",
        "fitness result hbm-slow-gpu2, the run also reporting an error of its own",
        fitness="hbm-slow-gpu2",
        context=lambda ctx: set_measured(
            ctx, "fitness", replace(measured(ctx, "fitness"), errors=("GPU3: the compute pass timed out",))
        ),
        subjects=("GPU2", "GPU2"),
    )
)

# a slowdown reason listed with no sample active in it (as a reader that lists every reason writes it)
CASES.append(
    Case(
        "TD713",
        False,
        "h200-x4",
        "fitness result healthy, GPU0's HW thermal slowdown listed at 0 samples",
        fitness="healthy",
        context=lambda ctx: set_measured(
            ctx,
            "fitness",
            replace(
                measured(ctx, "fitness"),
                stress=tuple(
                    replace(s, reason_samples={**s.reason_samples, "hw_thermal_slowdown": 0}) if s.index == 0 else s
                    for s in measured(ctx, "fitness").stress
                ),
            ),
        ),
    )
)

# an expectations file that holds a latency (lower is better): TD714 judges rates only
CASES.append(
    Case(
        "TD714",
        False,
        "h200-x4",
        "fitness result healthy, the file expecting 2000 ns of SM latency (measured 830)",
        fitness="healthy",
        expect_from="h200-x4",
        context=_expecting(fitness={"latency sm": 2000.0}),
    )
)

# a slowdown reason active in a single sample of the load is a slowdown under load
CASES.append(
    Case(
        "TD713",
        True,
        "h200-x4",
        "fitness result healthy, GPU0 in HW thermal slowdown in 1 sample",
        fitness="healthy",
        context=lambda ctx: set_measured(
            ctx,
            "fitness",
            replace(
                measured(ctx, "fitness"),
                stress=tuple(
                    replace(s, reason_samples={**s.reason_samples, "hw_thermal_slowdown": 1}) if s.index == 0 else s
                    for s in measured(ctx, "fitness").stress
                ),
            ),
        ),
        subjects=("GPU0",),
    )
)
