"""The pairwise bad-node finder's schedule at scale: model/pairwise.py's PairwiseFinder, the same
object `collectives --pairwise` drives, run against a simulated pair oracle.

    python tests/benchmarks/pairwise_schedule.py [--nodes 1024] [--bad 1,2,8] [--trials 200] [--round-s S]

The oracle: a pair of healthy nodes reaches 40 GB/s busbw within +-1 % (a spread like that of the
real pair tests, docs/benchmarks.md); a pair with a bad node in it reaches half that (a node on a
degraded NIC), or hangs (``--hang``: cut at its timeout). Bad nodes are placed at random (seeded).
For each count of bad nodes: the rounds the finder needed, the pairs it tested, whether every
verdict came out right, and the time at ``--round-s`` seconds per round of pairs (all pairs of a
round run at once; tests/gpu/pair_rounds_host.sh measures a round on a GPU host).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from topodoctor.model.pairwise import PairOutcome, PairwiseFinder  # noqa: E402

HEALTHY_GBPS = 40.0


def run(nodes: int, bad: set[str], rng: random.Random, hang: bool, max_rounds: int) -> dict[str, object]:
    """One search: rounds, pairs tested, and whether the verdicts name exactly the bad nodes."""
    names = [f"node{i:04d}" for i in range(nodes)]
    finder = PairwiseFinder(names, names, tolerance=0.1, max_rounds=max_rounds)
    pairs = 0
    while (rnd := finder.next_round()) is not None:
        outcomes = []
        for a, b in rnd.pairs:
            pairs += 1
            if a in bad or b in bad:
                outcomes.append(
                    PairOutcome(a, b, "hung", None, "cut at 20 s") if hang else PairOutcome(a, b, "ok", 20.0)
                )
            else:
                outcomes.append(PairOutcome(a, b, "ok", HEALTHY_GBPS * rng.uniform(0.99, 1.01)))
        finder.record(outcomes)
    verdicts = {v.node: v.verdict for v in finder.verdicts()}
    named = {n for n, v in verdicts.items() if v != "healthy"}
    return {
        "rounds": len(finder.rounds),
        "pairs": pairs,
        "right": named == bad,
        "undetermined": sum(1 for v in verdicts.values() if v == "undetermined"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--bad", default="1,2,8")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--round-s", type=float, default=3.3, help="seconds per round of pairs (measured; see docstring)")
    ap.add_argument("--hang", action="store_true", help="bad nodes hang their pairs instead of slowing them")
    ap.add_argument("--max-rounds", type=int, default=6, help="collectives --pairwise's own limit (NodeSettings)")
    a = ap.parse_args()
    rng = random.Random(20261126)
    for k in (int(x) for x in a.bad.split(",")):
        got = [
            run(a.nodes, set(rng.sample([f"node{i:04d}" for i in range(a.nodes)], k)), rng, a.hang, a.max_rounds)
            for _ in range(a.trials)
        ]
        rounds = sorted(int(str(g["rounds"])) for g in got)
        pairs = sorted(int(str(g["pairs"])) for g in got)
        print(
            json.dumps(
                {
                    "nodes": a.nodes,
                    "bad": k,
                    "hang": a.hang,
                    "trials": a.trials,
                    "rounds": [rounds[0], rounds[-1]],
                    "pairs": [pairs[0], pairs[len(pairs) // 2], pairs[-1]],
                    "all_right": all(g["right"] for g in got),
                    "undetermined": sum(int(str(g["undetermined"])) for g in got),
                    "seconds": [round(rounds[0] * a.round_s, 1), round(rounds[-1] * a.round_s, 1)],
                }
            )
        )


if __name__ == "__main__":
    main()
