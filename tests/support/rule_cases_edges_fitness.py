"""Rule cases at the edge of the fitness thresholds (TD710-TD718): part of the table in
tests/support/rule_cases.py, written as tests/support/rule_cases_edges.py says. Each starts from
the healthy derived fitness result on the h200-x4 recording and sets one figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rule_case_kit import Case, measured, set_measured
from rule_cases_measured import fitness_result

from topodoctor.core.stats import median
from topodoctor.model.copies import Stats


def figure(kind: str, initiator: str, src: int, value: float, dst: int | None = None) -> Callable[[Any], None]:
    """A context edit: the fitness figure of ``kind`` / ``initiator`` on GPU ``src`` measures ``value``."""

    def change(ctx: Any) -> None:
        res = measured(ctx, "fitness")
        figs = tuple(
            replace(f, value=Stats(value, value, value, (value,)))
            if (f.kind, f.initiator, f.src) == (kind, initiator, src) and (dst is None or f.dst == dst)
            else f
            for f in res.figures
        )
        set_measured(ctx, "fitness", replace(res, figures=figs))

    return change


def only_gpus(kind: str, *gpus: int) -> Callable[[Any], None]:
    """A context edit: the fitness figures of ``kind`` kept for ``gpus`` only."""

    def change(ctx: Any) -> None:
        res = measured(ctx, "fitness")
        set_measured(
            ctx, "fitness", replace(res, figures=tuple(f for f in res.figures if f.kind != kind or f.src in gpus))
        )

    return change


def both(*edits: Callable[[Any], None]) -> Callable[[Any], None]:
    def change(ctx: Any) -> None:
        for e in edits:
            e(ctx)

    return change


def _fit(code: str, fires: bool, change: str, edit: Callable[[Any], None], at: str, **kw: Any) -> Case:
    return Case(
        code, fires, "h200-x4", f"fitness result healthy, {change}", fitness="healthy", context=edit, at=at, **kw
    )


HBM_PEAK = fitness_result("healthy").limits[0].hbm_peak_gbps  # NVML's HBM traffic peak of an H200
HBM_SM = {f.src: f.value.median for f in fitness_result("healthy").figures if f.kind == "hbm" and f.initiator == "sm"}
HBM_SM_MEDIAN = median([0.0, *(v for g, v in HBM_SM.items() if g != 2)])  # GPU2 lowest: the others' middle pair
LATENCY = {f.src: f.value.median for f in fitness_result("healthy").figures if f.kind == "latency" and f.dst < 0}
LATENCY_MEDIAN = median([1e12, *(v for g, v in LATENCY.items() if g != 2)])  # GPU2 highest
EXPECTED_BF16 = 662.846  # the healthy host's bf16 GEMM figure, as `expect` writes it

FITNESS_EDGE_CASES = [
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
]
