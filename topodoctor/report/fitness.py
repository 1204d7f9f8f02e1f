"""The fitness figures of a check, for people: one row per figure, median with its samples'
range, so a reader can tell a slow GPU from a noisy sample."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from topodoctor.report.terminal import literal

_NAMES = {-1: "host"}


def _where(f: Any) -> str:
    if f.kind in ("hbm", "compute"):
        return f"GPU{f.src}"
    a, b = (_NAMES.get(x, f"GPU{x}") for x in (f.src, f.dst))
    return f"{a} -> {b}"


def print_fitness(result: Any, console: Console) -> None:
    """A table of the measured figures; refused and failed ones say why."""
    t = Table(title=f"fitness ({result.level}, {result.wall_s:.1f} s)", title_justify="left")
    for col in ("test", "where", "median", "range (spread)", "data"):
        t.add_column(col, no_wrap=col != "range (spread)")
    for f in result.figures:
        if f.value is None:
            t.add_row(f.label, _where(f), "-", literal(f.error or "not measured"), "")
            continue
        v = f.value
        spread = f"{v.min:.1f}-{v.max:.1f} ({v.spread_pct:.1f} %)"
        data = {True: "ok", False: "WRONG", None: ""}[f.verified]
        t.add_row(f.label, _where(f), f"{v.median:.1f} {f.unit}", spread, data)
    for s in result.stress:
        reasons = ", ".join(f"{k} {n}/{s.samples}" for k, n in s.reason_samples.items()) or "none"
        t.add_row(
            "under load",
            f"GPU{s.index}",
            f"{s.sm_mhz_median or 0:.0f} MHz",
            f"{s.power_w_max or 0:.0f} W max, {s.temp_c_max} C max",
            literal(reasons),
        )
    for e in result.errors:
        t.add_row("-", "-", "-", literal(e), "")
    console.print(t)
    matrix = latency_matrix(result)
    if matrix is not None:
        console.print(matrix)


def latency_matrix(result: Any) -> Table | None:
    """SM pointer-chase latency as a matrix, as nvbandwidth prints device_to_device_latency_sm and
    host_device_latency_sm: rows read, columns hold the memory (host last); None without pairs."""
    cells = {(f.src, f.dst): f for f in result.figures if f.kind == "latency"}
    gpus = sorted({s for s, _ in cells} | {d for _, d in cells if d >= 0})
    if not any(d >= 0 for _, d in cells):
        return None
    t = Table(title="SM latency (ns): GPU(row) reads the memory of GPU(column) or the host", title_justify="left")
    t.add_column("")
    for g in [*gpus, -1]:
        t.add_column(_NAMES.get(g, f"GPU{g}"), justify="right")
    for a in gpus:
        row = []
        for b in [*gpus, -1]:
            f = cells.get((a, b))
            row.append("" if f is None else f"{f.value.median:.0f}" if f.value is not None else "-")
        t.add_row(f"GPU{a}", *row)
    return t


def fitness_metrics(m: Any, host: str, labels: dict[int, Any], result: Any) -> None:
    """The measured fitness figures (medians) as Prometheus gauges, in base units (the families
    are in report/prometheus.py's table; ``m`` is its collector)."""
    for f in result.figures:
        if f.value is None:
            continue
        v = f.value.median
        if f.kind == "hbm":
            m.add("topodoctor_hbm_bytes_per_second", v * 1e9, Hostname=host, **m.gpu(labels, f.src), engine=f.initiator)
        elif f.kind == "compute":
            m.add("topodoctor_compute_flops_per_second", v * 1e12, Hostname=host, **m.gpu(labels, f.src), dtype="bf16")
        elif f.kind == "sm_copy":
            gpu, peer = (f.dst, f.src) if f.src < 0 else (f.src, f.dst)
            m.add("topodoctor_sm_copy_bytes_per_second", v * 1e9, Hostname=host, **m.gpu(labels, gpu),
                  peer_gpu=str(peer), initiator=f.initiator, bidir=str(f.bidir).lower())  # fmt: skip
        elif f.kind == "latency":
            m.add("topodoctor_sm_latency_seconds", v * 1e-9, Hostname=host, **m.gpu(labels, f.src), peer_gpu=str(f.dst))
