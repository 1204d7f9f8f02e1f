"""`collectives --latency` as text and JSON: a row per op, size and path with its time and its
speedup over eager NCCL, where eager NCCL catches up with each faster path, why a path has no
figure, and the multicast paths left off."""

from __future__ import annotations

from typing import Any

from topodoctor.core.codec import to_jsonable
from topodoctor.core.text import human_size, plural
from topodoctor.model.collective_latency import BASELINE, PATHS, LatencyResult, overtakes, speedup
from topodoctor.report.collectives import fit

_OPS = {"p2p": "p2p", "all_reduce": "all_reduce"}


def _time(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 1000 else f"{v:.0f}"


def latency_lines(res: LatencyResult, width: int | None = None) -> list[str]:
    """The table, the crossovers, the reasons, what was skipped; lines fitted to ``width``."""
    head = f"# small messages: {plural(res.world_size, 'rank')} ({res.backend}) on {res.host or 'unknown host'}"
    if res.nccl_version:
        head += f", NCCL {res.nccl_version}"
    if res.torch_version:
        head += f", torch {res.torch_version}"
    out = [
        head,
        *(
            ["# gloo: the NCCL rows ran gloo on the CPU; this exercises the run, it measures no GPU path"]
            if res.backend == "gloo"
            else []
        ),
        "# time per operation (us), the mean over ranks of each rank's median; p2p is one way (half a "
        "ping-pong between ranks 0 and 1); speedup = eager NCCL's time / the path's",
        f"# {'op':<10} {'size':>6}  {'path':<32} {'time_us':>9} {'speedup':>8} {'#wrong':>7}",
    ]
    notes: dict[tuple[str, str, str], list[str]] = {}
    for op in ("p2p", "all_reduce"):
        cells = [c for c in res.cells if c.op == op]
        for size in sorted({c.size_bytes for c in cells}):
            for path in PATHS:
                c = next((x for x in cells if x.size_bytes == size and x.path == path), None)
                if c is None:
                    continue
                if c.status != "ok":
                    notes.setdefault((path, c.status, c.note), []).append(f"{op} {human_size(size)}")
                    if c.status == "failed":
                        out.append(f"  {op:<10} {human_size(size):>6}  {PATHS[path]:<32} {'failed':>9}")
                    continue
                up = speedup(res, c)
                ups = "-" if up is None else f"{up:.2f}x"
                wrong = "N/A" if c.wrong is None else str(c.wrong)
                out.append(
                    f"  {op:<10} {human_size(size):>6}  {PATHS[path]:<32} {_time(c.time_us):>9} {ups:>8} {wrong:>7}"
                )
    over = overtakes(res)
    if over:
        out.append("# where eager NCCL catches up with a faster path:")
    for o in over:
        name = f"{o.op}, {PATHS[o.path]}"
        if o.at is None:
            out.append(f"#   {name}: not by {human_size(o.below or 0)}, still {o.speedup:.2f}x there")
        elif o.below is None:
            out.append(f"#   {name}: at {human_size(o.at)} already ({o.speedup:.2f}x)")
        else:
            out.append(
                f"#   {name}: between {human_size(o.below)} and {human_size(o.at)} ({o.speedup:.2f}x at the latter)"
            )
    if any(c.path == "nccl_graph" and c.status == "ok" for c in res.cells):
        out.append(
            "# a Python loop of dist.* calls sees the eager figures (nccl-tests without -G); code captured in "
            "a CUDA graph (torch.compile mode=reduce-overhead, a serving engine's decode step) sees the graph's"
        )
    for (path, status, note), where in notes.items():
        every = len(where) == len([c for c in res.cells if c.path == path])
        out.append(f"# {PATHS[path]}: {status}{'' if every else f' ({chr(44).join(where)})'}: {note}")
    if res.skipped:
        off = ", ".join(f"{p} ({why})" for p, why in res.skipped)
        out.append(f"# skipped, NVLink multicast kept off: {off}")
    for f in res.failures:
        at = f" at {human_size(f.size_bytes)}" if f.size_bytes else ""
        out.append(f"# FAILED {f.kind}: {f.op or 'run'}{at}: {f.message}")
    out.append("")
    lib = ", ".join(f"{k} {v}" for k, v in res.versions.items())
    out.append(
        f"topodoctor on {res.host or 'unknown host'}: {plural(res.world_size, 'rank')}, wall {res.wall_s:.1f} s"
        + (f"; {lib}" if lib else "")
    )
    return fit(out, width)


def latency_json(res: LatencyResult) -> dict[str, Any]:
    """The result as data, each cell with its speedup over eager NCCL, and the crossovers."""
    doc: dict[str, Any] = to_jsonable(res)
    for cell, c in zip(doc["cells"], res.cells, strict=True):
        up = speedup(res, c)
        cell["speedup"] = None if up is None else round(up, 4)
    doc["baseline"] = BASELINE
    doc["overtakes"] = [to_jsonable(o) for o in overtakes(res)]
    return doc
