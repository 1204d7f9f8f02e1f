"""Two or more copies of topodoctor timed against each other and `nvidia-smi topo -m`, interleaved in one run:
the before-and-after figures docs/benchmarks.md quotes when a lease's speed moves between calls.

    git worktree add /tmp/base 067cd7a
    python3 tests/benchmarks/compare.py 31 /tmp/base . -- scan      # one JSON line

Each DIR holds a `topodoctor` package; `python3 -m topodoctor ARGS` runs from it (its own package is the one
imported), with bytecode as the caller compiled it. Per command: the median, the ratio to the reference's
median, the minimum."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def wall(argv: list[str], cwd: str, env: dict[str, str]) -> float:
    """Seconds from spawn to reaped (no timeout: with one, subprocess polls in 50 ms sleeps)."""
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    return time.perf_counter() - t0


def main() -> None:
    if "--" not in sys.argv or len(sys.argv) < 4:
        sys.exit("usage: compare.py ROUNDS DIR [DIR ...] -- ARGS")
    split = sys.argv.index("--")
    rounds, dirs, args = int(sys.argv[1]), sys.argv[2:split], sys.argv[split + 1 :]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # each copy imports its own package
    commands = {"nvidia-smi topo -m": (["nvidia-smi", "topo", "-m"], ".")}
    commands |= {str(Path(d).resolve()): ([sys.executable, "-m", "topodoctor", *args], d) for d in dirs}
    for argv, cwd in commands.values():  # page the files in once
        wall(argv, cwd, env)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, (argv, cwd) in commands.items():
            walls[name].append(wall(argv, cwd, env))
    ref = statistics.median(walls["nvidia-smi topo -m"])
    out = {}
    for name, v in walls.items():
        med = statistics.median(v)
        out[name] = [round(med, 4), round(med / ref, 2), round(min(v), 4)]
    print(json.dumps({"rounds": rounds, "args": args, "median_ratio_min": out}))


if __name__ == "__main__":
    main()
