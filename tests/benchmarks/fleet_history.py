"""Scale of `fleet --history`: a fake fleet of N nodes made from a real check result
(fixtures/fleet/history.py: each node's own spread and each day's), ingested one day at a time
as a collector would, then judged as of the last day.

    python tests/benchmarks/fleet_history.py [--nodes 10000] [--days 30] [--work DIR]

Each day's ingest (reading, parsing and adding that day's files) and the report run in a child
process of their own, so each one's peak memory (ru_maxrss) is its own. Prints one JSON line per
step and a summary; the figures go in docs/benchmarks.md. Not a test: it takes minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fixtures" / "fleet"))

INGEST = """
import json, resource, sys, time
from pathlib import Path
from topodoctor.core import fileio
from topodoctor.fleet.inputs import result_files
from topodoctor.fleet.store import Retention, open_store
from topodoctor.service.fleet import parsed
t0, c0 = time.perf_counter(), time.process_time()
store = open_store(Path(sys.argv[1]), create=True)
files, bad = result_files([Path(sys.argv[2])], fileio.DEFAULT_TIMEOUT_S)
done = store.ingest(parsed(files, "host", time.monotonic() + 600, bad), Retention(None, None))
store.close()
print(json.dumps({"files": len(files), "added": done.added, "unreadable": len(bad),
    "wall_s": round(time.perf_counter() - t0, 3), "cpu_s": round(time.process_time() - c0, 3),
    "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""

REPORT = """
import json, resource, sys, time
from pathlib import Path
from topodoctor.model.stamp import utc_iso
from topodoctor.service.fleet import FleetRequest, HistoryRequest, history
t0, c0 = time.perf_counter(), time.process_time()
kept = HistoryRequest(history_db=Path(sys.argv[1]), as_of=utc_iso(float(sys.argv[2])), keep_days=0, max_mb=0)
report, _ = history(FleetRequest(history=kept), 600.0)
print(json.dumps({"results": report.results, "nodes": len(report.fleet.nodes), "findings": len(report.findings),
    "drain": len(report.fleet.drain), "wall_s": round(time.perf_counter() - t0, 3),
    "cpu_s": round(time.process_time() - c0, 3),
    "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def child(code: str, *args: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=900)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    got: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def main() -> None:
    import history as gen

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--work", type=Path, default=Path("/tmp/topodoctor-fleet-bench"))
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    a.work.mkdir(parents=True)
    db = a.work / "fleet.db"
    fleet = gen.healthy_fleet(a.nodes)
    days = []
    for d in range(a.days):
        t = time.perf_counter()
        gen.build(a.work, fleet, range(d, d + 1))
        made = round(time.perf_counter() - t, 1)
        step = child(INGEST, str(db), str(a.work / f"day{d:02d}"))
        step.update(day=d, generated_s=made, db_mb=round(db.stat().st_size / 1e6, 1))
        print(json.dumps(step), flush=True)
        days.append(step)
        shutil.rmtree(a.work / f"day{d:02d}")
    as_of = (gen.DAY0.timestamp() + (a.days - 1) * 86400 + 6 * 3600) if a.days else time.time()
    reports = [child(REPORT, str(db), str(as_of)) for _ in range(2)]
    for r in reports:
        print(json.dumps({"report": r}), flush=True)
    walls = sorted(float(str(s["wall_s"])) for s in days)
    summary = {
        "nodes": a.nodes,
        "days": a.days,
        "ingest_wall_s_median": walls[len(walls) // 2],
        "ingest_wall_s_max": walls[-1],
        "ingest_cpu_s_median": sorted(float(str(s["cpu_s"])) for s in days)[len(days) // 2],
        "ingest_maxrss_mb_max": max(float(str(s["maxrss_mb"])) for s in days),
        "report_wall_s": [r["wall_s"] for r in reports],
        "report_cpu_s": [r["cpu_s"] for r in reports],
        "report_maxrss_mb": [r["maxrss_mb"] for r in reports],
        "db_mb": round(db.stat().st_size / 1e6, 1),
        "bytes_per_result": round(db.stat().st_size / max(1, a.nodes * a.days)),
    }
    print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
