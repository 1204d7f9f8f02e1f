"""Fitness measurements side by side with nvbandwidth, in one run on a GPU host.

    python3 tests/benchmarks/fitness_bench.py --anchors /tmp/anchors -o fitness.json

Interleaves nvbandwidth's tests (device_local_copy, host_to_device_memcpy_ce,
device_to_host_memcpy_ce, host_device_latency_sm and its one-GPU SM tests) with topodoctor's
kernel timer (HBM by copy engine and by several HBM kernels (copy_kernels names), SM host copies, host
latency), runs the compute stress with NVML readings, and times ``check`` at each level. Writes
one JSON document: every figure with its samples, the ratios, the level timings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from the checkout

NVB = (
    "device_local_copy",
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
    "host_device_latency_sm",
    "host_to_device_memcpy_sm",
    "device_to_host_memcpy_sm",
)


def nvbandwidth(path: Path, tests: tuple[str, ...] = NVB, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run nvbandwidth's ``tests`` in one process (``-j``); each test's first value (GPU 0), and the wall."""
    args = [str(path / "nvbandwidth"), "-j", *extra]
    for t in tests:
        args += ["-t", t]
    t0 = time.monotonic()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"wall_s": round(time.monotonic() - t0, 3), "error": f"{type(exc).__name__}: {exc}"}
    out = parse_nvbandwidth(p.stdout, p.stderr)
    return {"wall_s": round(time.monotonic() - t0, 3), **out}


def parse_nvbandwidth(stdout: str, stderr: str = "") -> dict[str, Any]:
    """nvbandwidth's ``-j`` document as {test name: its first value}; ``error`` when it is not one."""
    out: dict[str, Any] = {}
    try:
        for case in json.loads(stdout)["nvbandwidth"]["testcases"]:
            for key, rows in case.items():
                if key.endswith("_matrix"):
                    vals = [float(x) for row in rows for x in row if _isnum(x)]
                    out[case["name"]] = vals[0] if vals else None
            if case.get("status") not in (None, "Passed"):
                out.setdefault("error", f"{case.get('name')}: {case.get('status')} {case.get('error', '')}".strip())
    except (ValueError, KeyError, TypeError) as exc:
        out["error"] = f"{exc}: {(stderr or stdout)[-400:]}"
    return out


def _isnum(x: Any) -> bool:
    try:
        float(x)
        return True
    except (TypeError, ValueError):
        return False


class Timer:
    """The kernel timer child, driven directly (hello names the SM copies' kernel)."""

    def __init__(self, copy_kernel: str = "") -> None:
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", PYTHONUNBUFFERED="1")
        self.p = subprocess.Popen(
            [sys.executable, "-m", "topodoctor.measure.timer.kernels"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.hello = self.ask({"op": "hello", "visible": None, "peers": False, "copy_kernel": copy_kernel})

    def ask(self, task: dict[str, Any]) -> dict[str, Any]:
        assert self.p.stdin and self.p.stdout
        self.p.stdin.write(json.dumps(task) + "\n")
        self.p.stdin.flush()
        answer: dict[str, Any] = json.loads(self.p.stdout.readline())
        return answer

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


def ours(kernel: str) -> dict[str, Any]:
    """One fresh timer: HBM by engine and by the HBM kernel ``kernel``, SM host copies, latency."""
    t = Timer()
    out: dict[str, Any] = {"hello": t.hello}
    if "error" in t.hello:
        t.close()
        return out
    big = {"size": 512 << 20, "iters": 8, "samples": 7}
    out["hbm_ce"] = t.ask({"op": "hbm", "dev": 0, "engine": "ce", **big})
    out["hbm_sm"] = t.ask({"op": "hbm", "dev": 0, "engine": "sm", "kernel": kernel, **big})
    copy = {"size": 256 << 20, "iters": 4, "samples": 5}
    out["h2d_sm"] = t.ask({"op": "sm_copy", "src": -1, "dst": 0, "initiator": "pull", **copy})
    out["d2h_sm"] = t.ask({"op": "sm_copy", "src": 0, "dst": -1, "initiator": "push", **copy})
    out["bidir_sm"] = t.ask({"op": "sm_copy", "src": -1, "dst": 0, "initiator": "pull", "bidir": True, **copy})
    out["host_latency"] = t.ask({"op": "chase", "dev": 0, "target": -1, "accesses": 1_000_000, "samples": 3})
    out["local_latency"] = t.ask({"op": "chase", "dev": 0, "target": 0, "accesses": 1_000_000, "samples": 3})
    for d in ("h2d", "d2h"):
        out[f"{d}_ce"] = t.ask({"op": "host", "dev": 0, "dir": d, "size": 256 << 20, "iters": 4, "samples": 5})
    t.close()
    return out


def med(answer: dict[str, Any]) -> float | None:
    s = answer.get("samples")
    return statistics.median(s) if s else None


def results(folder: Path) -> None:
    """The fitness results of the quick and long plans, as the check's pass would measure them."""
    from dataclasses import replace

    from topodoctor.core import codec
    from topodoctor.measure.fitness.session import FitnessPlan, run
    from topodoctor.probe.sources import live_nvml, probe_host

    snap = probe_host().snapshot
    folder.mkdir(parents=True, exist_ok=True)
    for level in ("quick", "long"):
        plan = (
            replace(FitnessPlan.for_level(level), gemm_seconds=20.0)
            if level == "long"
            else FitnessPlan.for_level(level)
        )
        res = run(snap, plan, live_nvml(), time.monotonic() + 200)
        (folder / f"fitness-{level}.json").write_text(codec.dumps(res))
        print(level, res.wall_s, res.timings, flush=True)


def check_level(level: str, timeout: int) -> dict[str, Any]:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "topodoctor", "check", "--level", level, "-f", "json"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out: dict[str, Any] = {"wall_s": round(time.monotonic() - t0, 3), "rc": p.returncode, "stderr": p.stderr[-600:]}
    try:
        out["report"] = json.loads(p.stdout)
    except ValueError:
        out["stdout"] = p.stdout[-1500:]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--anchors", type=Path, default=Path("/tmp/anchors"))
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument(
        "--kernels", default="stride-u4,stride-u4-b2,stride-u12", help="copy_kernels names, comma-separated"
    )
    ap.add_argument("--results", type=Path, help="also write the fitness results of each level's plan here")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--levels", default="static,quick,long")
    a = ap.parse_args()
    doc: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rounds": []}
    for r in range(a.rounds):
        rnd: dict[str, Any] = {"nvbandwidth": nvbandwidth(a.anchors), "ours": {}}
        for k in a.kernels.split(","):
            rnd["ours"][k] = ours(k)
        ref = rnd["nvbandwidth"]
        best = max(rnd["ours"].values(), key=lambda o: med(o.get("hbm_sm", {})) or 0)
        pairs = {
            "hbm_ce/device_local_copy": ("hbm_ce", "device_local_copy"),
            "hbm_sm/device_local_copy": ("hbm_sm", "device_local_copy"),
            "h2d_ce": ("h2d_ce", "host_to_device_memcpy_ce"),
            "d2h_ce": ("d2h_ce", "device_to_host_memcpy_ce"),
            "h2d_sm": ("h2d_sm", "host_to_device_memcpy_sm"),
            "d2h_sm": ("d2h_sm", "device_to_host_memcpy_sm"),
            "host_latency": ("host_latency", "host_device_latency_sm"),
        }
        rnd["ratios"] = {
            k: (round(med(best.get(o, {})) / ref[n], 4) if med(best.get(o, {})) and ref.get(n) else None)
            for k, (o, n) in pairs.items()
        }
        doc["rounds"].append(rnd)
        rnd["latency_all_kernels"] = [med(o.get("host_latency", {})) for o in rnd["ours"].values()]
        print(json.dumps({"round": r, "ratios": rnd["ratios"], "nvbandwidth": ref}), flush=True)
        a.output.write_text(json.dumps(doc, indent=1, default=str))
    if a.results is not None:
        results(a.results)
    doc["levels"] = {}
    for level in a.levels.split(","):
        doc["levels"][level] = check_level(level, 400)
        a.output.write_text(json.dumps(doc, indent=1, default=str))
        print(level, doc["levels"][level]["wall_s"], doc["levels"][level]["rc"], flush=True)
    a.output.write_text(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
