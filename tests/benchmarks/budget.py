"""Budget accuracy on a GPU host (not CI): does `check --timeout T` return within T + 0.3 s?

    python tests/benchmarks/budget.py                      # check --bandwidth, T = 0.5 1 2 4, 3 runs each
    python tests/benchmarks/budget.py --budgets 0.5 1 2 --runs 5 --no-bandwidth

For each T it runs the real command as a prolog would (a fresh interpreter, timed from
before exec to its exit), and afterwards looks for anything it left behind: the probe child
and the torch copy worker must be gone. A replayed hang (fixtures/derived/x4-nvml-hang.json,
a driver call that never returns) gives the same measurement on any machine, GPU or not.
Writes a Markdown table to stdout and, with $OUT set, JSON to $OUT/budget.json.
Bounded: at most runs x budgets x (T + 10 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SLACK_S = 0.3


def _left_behind(mark: str) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        try:
            if mark.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                pids.append(int(pid))
        except (OSError, ValueError):
            continue
    return pids


def measure(argv: list[str], budget: float) -> dict[str, Any]:
    mark = f"TOPODOCTOR_BUDGET_{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), mark: "1"}
    cmd = [sys.executable, "-m", "topodoctor", *argv, "--timeout", f"{budget:g}", "-f", "line"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=budget + 60)
    wall = time.monotonic() - t0
    time.sleep(0.3)  # a worker that outlived us would still be here
    leftovers = _left_behind(mark)
    for pid in leftovers:  # leave the host as we found it
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    return {
        "budget_s": budget,
        "wall_s": round(wall, 3),
        "over_s": round(wall - budget, 3),
        "rc": p.returncode,
        "line": (p.stdout + p.stderr).strip()[:160],
        "lines": len((p.stdout + p.stderr).splitlines()),
        "left_behind": leftovers,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budgets", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-bandwidth", action="store_true", help="check without --bandwidth")
    ap.add_argument("--replay-hang", action="store_true", help="the replayed driver hang instead of the live host")
    args = ap.parse_args()
    if args.replay_hang:
        argv = ["check", "--replay", str(ROOT / "fixtures/derived/x4-nvml-hang.json")]
    else:
        argv = ["check"] + ([] if args.no_bandwidth else ["--bandwidth"])
    rows = [measure(argv, t) for t in args.budgets for _ in range(args.runs)]
    print(f"`topodoctor {' '.join(argv)} --timeout T -f line`, {args.runs} runs per T, wall from exec to exit\n")
    print("| T (s) | wall median (s) | worst over T (s) | within T + 0.3 s | one line | left behind | exit codes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ok = True
    for t in args.budgets:
        mine = [r for r in rows if r["budget_s"] == t]
        worst = max(r["over_s"] for r in mine)
        within = all(r["over_s"] <= SLACK_S for r in mine)
        clean = all(not r["left_behind"] for r in mine)
        single = all(r["lines"] == 1 for r in mine)
        ok &= within and clean and single
        codes = ",".join(sorted({str(r["rc"]) for r in mine}))
        wall = statistics.median(r["wall_s"] for r in mine)
        left = "none" if clean else "YES"
        print(f"| {t:g} | {wall:.2f} | {worst:+.2f} | {within} | {single} | {left} | {codes} |")
    print("\nlast lines:", *sorted({r["line"] for r in rows}), sep="\n  ")
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "budget.json").write_text(json.dumps({"argv": argv, "runs": rows}, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
