"""`collectives --algo` and `--scaling` as text: busbw per algorithm (NCCL's default marked, the
crossovers named) and per group of GPUs (efficiency against two GPUs, a slow group named)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from topodoctor.core.text import human_size

if TYPE_CHECKING:  # the sweeps' results, as measure/collectives/sweeps.py makes them
    from topodoctor.measure.collectives.sweeps import AlgoSweep, ScalingSweep


def algo_lines(s: AlgoSweep) -> list[str]:
    """One table per op: a row per size, a column per algorithm; '*' marks NCCL's own choice."""
    out: list[str] = []
    algos = ["default", *s.algorithms]
    for op in dict.fromkeys(c.op for c in s.cells):
        cells = [c for c in s.cells if c.op == op]
        here = [a for a in algos if any(c.algorithm == a for c in cells)]
        out.append(f"# {op}: busbw (GB/s) per algorithm (NCCL_ALGO); * = what NCCL chose left alone")
        out.append("# " + f"{'size':>8}" + "".join(f" {a:>12}" for a in here) + "  NCCL's choice")
        for size in dict.fromkeys(c.size_bytes for c in cells):
            row = {c.algorithm: c for c in cells if c.size_bytes == size}
            choice = row["default"].nccl_choice if "default" in row else ""
            chosen = choice.split("/")[0].lower()
            cols = []
            for a in here:
                c = row.get(a)
                v = "-" if c is None or c.busbw_gbps is None else f"{c.busbw_gbps:.2f}"
                cols.append(f" {v + ('*' if a.lower() == chosen else ''):>12}")
            out.append(f"  {human_size(size):>8}" + "".join(cols) + f"  {choice or '(not logged)'}")
    out += spread_lines(s)
    for w in s.winners:
        gains = ", ".join(f"{human_size(z)} +{g * 100:.1f}%" for z, g in zip(w.sizes, w.gains, strict=True))
        line = (
            f"# winner: {w.op}: {w.algorithm} beats NCCL's {w.default} by more than the {w.threshold * 100:.1f}% "
            f"spread at {gains}; {w.variable} selects it (NCCL 2.24+; NCCL_ALGO={w.algorithm} for every op)"
        )
        if w.lost_at:
            line += f", at every size: at {_sizes(w.lost_at)} it did not beat NCCL's choice"
        out.append(line)
    if s.cells and not s.winners and not s.failures:
        bar = "the run-to-run spread" if s.spread is not None else f"{s.fallback_gain * 100:.0f}%"
        out.append(f"# no algorithm beat NCCL's choice by more than {bar}: leave NCCL_ALGO unset")
    out += [f"# FAILED {f}" for f in s.failures]
    return out


def spread_lines(s: AlgoSweep) -> list[str]:
    """The run-to-run spread a winner must beat, and which two runs measured it."""
    if s.spread is None:
        return [f"# run-to-run spread not measured (no two runs of one configuration): {s.fallback_gain:.0%} stands in"]
    out = []
    for op in dict.fromkeys(o for o, _, _ in s.spread.pairs):
        mine = [(z, d) for o, z, d in s.spread.pairs if o == op]
        top = max(mine, key=lambda p: p[1])
        med = sorted(d for _, d in mine)[len(mine) // 2]
        out.append(
            f"# run-to-run spread, {op}: {med * 100:.1f}% (median of {len(mine)} sizes; largest {top[1] * 100:.1f}% at "
            f"{human_size(top[0])}), {s.spread.source}"
        )
    return out


def _sizes(sizes: tuple[int, ...]) -> str:
    return (
        ", ".join(human_size(z) for z in sizes)
        if len(sizes) <= 3
        else f"{human_size(sizes[0])}-{human_size(sizes[-1])}"
    )


def scaling_lines(s: ScalingSweep) -> list[str]:
    """busbw per group and size, the efficiency of each group size against two GPUs (or ranks of a
    launcher's world), slow groups."""
    u = s.unit
    out = [f"# busbw (GB/s) per group of {u}"]
    for r in s.runs:
        figs = ", ".join(f"{op} {human_size(size)} {'-' if bw is None else f'{bw:.2f}'}" for op, size, bw in r.busbw)
        out.append(f"  {u} {','.join(map(str, r.gpus)):<16} {figs}")
        out += [f"# FAILED {u} {','.join(map(str, r.gpus))}: {f}" for f in r.failures]
    out.append(f"# scaling efficiency: median busbw of each group size / that of 2 {u}")
    for k, op, size, eff in s.efficiency:
        out.append(f"  {k:>3} {u:<5} {op:<16} {human_size(size):>8}  {eff:.3f}")
    out += [f"# SLOW {line}" for line in s.slow]
    return out
