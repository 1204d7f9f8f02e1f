"""`collectives --algo` and `--scaling` as text: busbw per algorithm (NCCL's default marked, the
crossovers named) and per group of GPUs (efficiency against two GPUs, a slow group named)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from topodoctor.model.collective_ops import human_size

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
    for x in s.crossovers:
        out.append(
            f"# crossover: {x.op} at {human_size(x.size_bytes)}: {x.faster} is {x.gain * 100:.0f}% faster than "
            f"NCCL's {x.default}"
        )
    out += [f"# FAILED {f}" for f in s.failures]
    return out


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
