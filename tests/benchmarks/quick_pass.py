"""Where the time of `check --collectives` goes, on a GPU host (not CI).

    python tests/benchmarks/quick_pass.py --runs 3          # writes $OUT/quick_pass.json when $OUT is set

1. `check` and `check --collectives` in fresh processes, as a prolog runs them: the wall time
   the pass adds (target: at most 4 s).
2. The quick pass alone, with each rank's events stamped as the parent received them: spawn to
   "imported" (the interpreter and torch), to "ready" (CUDA context and NCCL's communicator),
   the two rows (all_reduce, sendrecv at 256 MiB), "finished", and the kill that replaces the
   ranks' teardown.
Bounded: every command has a timeout; about a minute on a 2-GPU host.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def wall(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    return round(time.monotonic() - t0, 3), p.returncode, (p.stdout + p.stderr).strip().splitlines()[-1:][0][:200]


def phases(nprocs: int, backend: str = "nccl", size: int = 256 << 20) -> dict[str, Any]:
    from topodoctor.service.collectives import QuickPass

    t0 = time.monotonic()
    qp = QuickPass.start(nprocs, t0 + 60, size, backend)  # type: ignore[arg-type]
    got = qp.running.finish(start_timeout_s=60, deadline=t0 + 60)
    total = time.monotonic() - t0
    qp.tmp.cleanup()
    first: dict[str, float] = {}
    for t, _rank, line in got.timeline:
        kind = line.split('"ev": "', 1)[-1].split('"', 1)[0]
        key = f"{kind}" if kind in ("row", "meta") else f"{kind} (last rank)"
        first[key] = max(first.get(key, 0.0), t) if "last rank" in key else min(first.get(key, t), t)
    return {
        "total_s": round(total, 3),
        "events_s": dict(sorted(first.items(), key=lambda kv: kv[1])),
        "rows": [(r["op"], r["size_bytes"]) for r in got.rows],
        "failures": [f.message for f in got.failures],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--nprocs", type=int, default=None)
    ap.add_argument("--phases-only", action="store_true", help="step 2 only (with --backend gloo: any machine)")
    ap.add_argument("--backend", default="nccl")
    a = ap.parse_args()
    if a.phases_only:
        ph = phases(a.nprocs or 2, a.backend, 1 << 20 if a.backend == "gloo" else 256 << 20)
        print(json.dumps(ph, indent=1))
        return 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "topodoctor", "check", "-f", "line", "--timeout", "30"]
    runs: dict[str, list[Any]] = {"check": [], "check --collectives": []}
    for _ in range(a.runs):
        runs["check"].append(wall(cmd, env))
        runs["check --collectives"].append(wall([*cmd, "--collectives"], env))
    med = {k: statistics.median(r[0] for r in v) for k, v in runs.items()}
    added = round(med["check --collectives"] - med["check"], 3)
    import torch

    n = a.nprocs or torch.cuda.device_count()
    with tempfile.TemporaryDirectory():
        ph = phases(n)
    report = {"runs": runs, "median_s": med, "added_s": added, "target_added_s": 4.0, "quick_pass": ph}
    print(f"check median {med['check']:.2f} s; check --collectives {med['check --collectives']:.2f} s; adds {added} s")
    print("last lines:", *sorted({r[2] for v in runs.values() for r in v}), sep="\n  ")
    print(f"quick pass alone, {n} ranks: {ph['total_s']} s; events (s from spawn):")
    for k, v in ph["events_s"].items():
        print(f"  {v:7.3f}  {k}")
    if ph["failures"]:
        print("failures:", ph["failures"])
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "quick_pass.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0 if added <= 4.0 and not ph["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
