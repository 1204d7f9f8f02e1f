"""Helpers of the rule cases at the edge of the fitness thresholds (TD710-TD718): the helpers those
cases are written with (the cases themselves are in tests/rules/cases/, by family), written as
tests/support/rule_case_kit_edges.py says. Each starts from the healthy derived fitness result on
the h200-x4 recording and sets one figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rule_case_kit import Case, measured, set_measured
from rule_case_kit_measured import fitness_result

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
