"""Seconds per round of the pairwise finder, measured: four simulated nodes (two torchrun launches
per GPU, NCCL_HOSTID apart, NET/Socket over lo, as tests/gpu/multinode_host.py does) run the same
all_reduce with and without --pairwise, three times each; a round of pairs (here two pairs at once)
costs the difference of the medians of rank 0's own run time (the result's wall_s).

    OUT=/tmp/out python tests/gpu/pair_rounds_host.py      # ~2 min on a 2-GPU host

Writes $OUT/multinode/pair_rounds.json: each run's wall_s and rounds, and the per-round figure
tests/benchmarks/pairwise_schedule.py --round-s takes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multinode_host import OUT, launch, report

FOUR = [("nodeA", "0"), ("nodeB", "1"), ("nodeC", "1"), ("nodeD", "0")]


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    cli = ["-m", "topodoctor", "collectives"]
    base = ["--op", "all_reduce", "--size", "64M", "--iters", "10", "--format", "json"]
    runs: dict[str, list[dict[str, object]]] = {"plain": [], "pairwise": []}
    for i in range(3):
        for name, extra in (("plain", []), ("pairwise", ["--pairwise", "--expect-nodes", "nodeA,nodeB,nodeC,nodeD"])):
            stage = f"rounds-{name}-{i}"
            codes = launch(stage, [(n, g, {}) for n, g in FOUR], [*base, *extra], cli)
            doc = report(stage) or {}
            rounds = len((doc.get("pairwise") or {}).get("rounds") or [])
            runs[name].append({"codes": codes, "wall_s": doc.get("wall_s"), "rounds": rounds})
            print(json.dumps({"stage": stage, **runs[name][-1]}), flush=True)

    def med(name: str) -> float | None:
        got = sorted(float(str(r["wall_s"])) for r in runs[name] if r["wall_s"] is not None)
        return got[len(got) // 2] if got else None

    a, b = med("plain"), med("pairwise")
    result = {"runs": runs, "plain_median_s": a, "pairwise_median_s": b}
    result["round_s"] = round(b - a, 3) if a is not None and b is not None else None
    (OUT / "pair_rounds.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    return 0 if result["round_s"] is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
