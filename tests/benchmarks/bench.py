"""Start-up, accuracy and job-scope benchmark for a GPU host (not CI), in one bounded run
beside the public tools:

    bash .anchors/build.sh /tmp/anchors   # the lead's copy of /work/shared/anchors
    OUT=/tmp/out python tests/benchmarks/bench.py --label nvidia-h200-x2 --anchors /tmp/anchors

Writes $OUT/LABEL.bench.json (every number) and $OUT/LABEL.bench.md (the tables for
docs/benchmarks.md). Python bytecode is compiled first into a private prefix, as a pip install
leaves it. Measured in the same run: p2pBandwidthLatencyTest and nvbandwidth (wall time and
figures), `bandwidth --quick`, `bandwidth` (the full matrix), `check --bandwidth` with the
per-phase `timings` each reports, the torch copy timer for comparison, the job scope
(`CUDA_VISIBLE_DEVICES=1 check --bandwidth` while NVML's process list is polled; two checks on
disjoint GPUs at once against each alone), and the kernel-log reader.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PYC = "/tmp/topodoctor-pyc"
ENV = dict(
    os.environ,
    PYTHONPATH=str(ROOT),
    PYTHONPYCACHEPREFIX=PYC,
    NCCL_NVLS_ENABLE="0",
    TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
    NVSHMEM_DISABLE_NVLS="1",
)
ENV.pop("CUDA_VISIBLE_DEVICES", None)
NVB_TESTS = [
    "device_to_device_memcpy_write_ce",
    "device_to_device_memcpy_read_ce",
    "device_to_device_bidirectional_memcpy_write_ce",
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
]
DEADLINE = [0.0]


def left() -> float:
    return DEADLINE[0] - time.monotonic()


def sh(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> tuple[float, int, str, str]:
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env or ENV, timeout=max(1.0, min(timeout, left())))
        return time.monotonic() - t0, p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return time.monotonic() - t0, 124, "", "timeout"


def td(*args: str, env: dict[str, str] | None = None) -> tuple[float, int, str, str]:
    return sh([sys.executable, "-m", "topodoctor", *args], env)


def compile_bytecode(modules: tuple[str, ...]) -> float:
    """As pip leaves an install: every module compiled (into a private prefix, so the image's
    PYTHONDONTWRITEBYTECODE and read-only site-packages do not matter)."""
    import importlib.util

    dirs = [str(ROOT / "topodoctor")] if "topodoctor" in modules else []
    for mod in modules:
        spec = importlib.util.find_spec(mod) if mod != "topodoctor" else None
        if spec is not None and spec.origin:
            locs = spec.submodule_search_locations
            dirs.append(next(iter(locs)) if locs else spec.origin)
    t0 = time.monotonic()
    sh([sys.executable, "-m", "compileall", "-q", "-j", "0", *dirs], timeout=150)
    return time.monotonic() - t0


LIGHT = ("topodoctor", "typer", "click", "rich", "networkx", "pynvml", "shellingham", "typing_extensions")


def anchors(path: Path, n_gpus: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    walls = []
    text = ""
    for _ in range(2):
        wall, rc, text, _ = sh([str(path / "p2pBandwidthLatencyTest")], timeout=60)
        if rc == 0:
            walls.append(wall)
    out["p2p_wall_s"] = walls
    out["p2p_text"] = text[-3000:]
    args = [str(path / "nvbandwidth"), "-j"]
    for t in NVB_TESTS if n_gpus > 1 else NVB_TESTS[3:]:
        args += ["-t", t]
    wall, rc, text, err = sh(args, timeout=120)
    out["nvbandwidth_wall_s"] = wall
    tests: dict[str, list[list[float | None]]] = {}
    try:
        for case in json.loads(text)["nvbandwidth"]["testcases"]:
            rows = [[_num(x) for x in row] for row in case.get("bandwidth_matrix", [])]
            tests[case["name"]] = rows
    except (ValueError, KeyError):
        out["nvbandwidth_error"] = (err or text)[-500:]
    out["nvbandwidth"] = tests
    return out


def _num(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def result_of(path: Path) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        return doc
    except (OSError, ValueError):
        return {}


def runs(name: str, n: int, args: list[str], out: Path, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    got = []
    for i in range(n):
        if left() < 20:
            break
        target = out / f"{name}.{i}.json"
        extra = ["-o", str(target)] if args[0] == "bandwidth" else []
        wall, rc, stdout, stderr = td(*args, *extra, env=env)
        doc = result_of(target) if extra else _json(stdout)
        timings = doc.get("timings") if extra else (doc.get("bandwidth_timings") or {})
        got.append({"wall_s": round(wall, 3), "rc": rc, "timings": timings, "err": stderr[-300:], "doc": doc})
    return got


def _json(text: str) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(text)
        return doc
    except ValueError:
        return {}


def torch_timer_quick() -> dict[str, Any]:
    """The same quick pass on the torch timer (the fallback), for the start-up comparison."""
    code = (
        "import json,time; t0=time.monotonic()\n"
        "from topodoctor.measure.copies.session import CopySettings, Worker, run, torch_worker_cmd\n"
        "from topodoctor.probe.sources import probe_host\n"
        "w = Worker(torch_worker_cmd(), 90.0); w.spawn(); snap = probe_host().snapshot\n"
        "r = run(snap, CopySettings.quick(), worker=w)\n"
        "print(json.dumps({'wall_s': time.monotonic()-t0, 'timings': r.timings, 'method': r.method}))\n"
    )
    _, rc, stdout, stderr = sh([sys.executable, "-c", code], timeout=120)
    return dict(_json(stdout.strip().splitlines()[-1] if stdout.strip() else "{}"), rc=rc, err=stderr[-300:])


def accuracy(full: dict[str, Any], nvb: dict[str, list[list[float | None]]]) -> list[dict[str, Any]]:
    """Our figure over nvbandwidth's, per pair and mode (GPU rows/columns in CUDA's PCI order)."""
    order = {g["index"]: g["cuda_ordinal"] for g in full.get("gpus", [])}
    n = len(order)
    rows = []
    for m in full.get("measurements", []):
        if m["value"] is None:
            continue
        ours = m["value"]["median"] + (m["reverse"]["median"] if m["mode"] == "bidir" and m.get("reverse") else 0.0)
        ref: float | None = None
        if m["mode"] == "oneway":
            ref = _cell(nvb, "device_to_device_memcpy_write_ce", order[m["src"]], order[m["dst"]])
        elif m["mode"] == "bidir":
            total = nvb.get("device_to_device_bidirectional_memcpy_write_ce", [])[2 * n :]
            ref = total[order[m["src"]]][order[m["dst"]]] if total else None
        elif m["mode"] == "h2d":
            ref = _cell(nvb, "host_to_device_memcpy_ce", 0, order[m["dst"]])
        elif m["mode"] == "d2h":
            ref = _cell(nvb, "device_to_host_memcpy_ce", 0, order[m["src"]])
        rows.append(
            {
                "mode": m["mode"],
                "pair": f"{m['src']}->{m['dst']}",
                "ours": round(ours, 2),
                "nvbandwidth": ref,
                "ratio": round(ours / ref, 4) if ref else None,
                "spread_pct": round(100 * (m["value"]["max"] - m["value"]["min"]) / m["value"]["median"], 2),
            }
        )
    return rows


def _cell(nvb: dict[str, list[list[float | None]]], name: str, r: int, c: int) -> float | None:
    try:
        return nvb[name][r][c]
    except (KeyError, IndexError):
        return None


def poll_compute_apps(stop: threading.Event, seen: set[str]) -> None:
    while not stop.is_set():
        p = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,gpu_bus_id", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        seen.update(line.strip() for line in p.stdout.splitlines() if line.strip())
        time.sleep(0.05)


def scope_checks(out: Path) -> dict[str, Any]:
    res: dict[str, Any] = {}
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout
    res["gpus"] = [line.strip() for line in smi.splitlines() if line.strip()]
    stop, seen = threading.Event(), set()  # type: ignore[var-annotated]
    poller = threading.Thread(target=poll_compute_apps, args=(stop, seen), daemon=True)
    poller.start()
    wall, rc, stdout, _ = td("check", "--bandwidth", "-f", "json", env=dict(ENV, CUDA_VISIBLE_DEVICES="1"))
    stop.set()
    poller.join()
    doc = _json(stdout)
    res["cvd1_check"] = {"wall_s": round(wall, 3), "rc": rc, "scope": doc.get("scope"), "compute_apps": sorted(seen)}

    def quick(gpu: str, tag: str) -> subprocess.Popen[str]:
        target = out / f"scope-{tag}-gpu{gpu}.json"
        cmd = [sys.executable, "-m", "topodoctor", "bandwidth", "--quick", "-o", str(target), "-f", "json"]
        return subprocess.Popen(cmd, env=dict(ENV, CUDA_VISIBLE_DEVICES=gpu), stdout=subprocess.DEVNULL, text=True)

    for tag in ("alone",):
        for gpu in ("0", "1"):
            quick(gpu, tag).wait(timeout=60)
    procs = [quick("0", "together"), quick("1", "together")]
    for p in procs:
        p.wait(timeout=60)
    ratios = {}
    for gpu in ("0", "1"):
        a = result_of(out / f"scope-alone-gpu{gpu}.json")
        b = result_of(out / f"scope-together-gpu{gpu}.json")
        va = {(m["mode"], m["src"], m["dst"]): m["value"]["median"] for m in a.get("measurements", []) if m["value"]}
        vb = {(m["mode"], m["src"], m["dst"]): m["value"]["median"] for m in b.get("measurements", []) if m["value"]}
        ratios[gpu] = {f"{k[0]} {k[1]}->{k[2]}": round(vb[k] / va[k], 4) for k in va if k in vb}
    res["together_over_alone"] = ratios
    checks = [
        subprocess.Popen(
            [sys.executable, "-m", "topodoctor", "check", "--bandwidth", "-f", "line"],
            env=dict(ENV, CUDA_VISIBLE_DEVICES=g),
            stdout=subprocess.PIPE,
            text=True,
        )
        for g in ("0", "1")
    ]
    res["two_checks_at_once"] = [
        {"rc": p.wait(timeout=60), "line": (p.stdout.read() if p.stdout else "").strip()} for p in checks
    ]
    return res


def kernel_log() -> dict[str, Any]:
    code = (
        "import json,time; t=time.monotonic()\n"
        "from topodoctor.probe.kernel_log import read_kernel_events\n"
        "from topodoctor.probe.sysfs import LiveSysfs\n"
        "from topodoctor.core.codec import to_jsonable\n"
        "got = read_kernel_events(LiveSysfs())\n"
        "print(json.dumps({'s': time.monotonic()-t, 'result': to_jsonable(got)}))\n"
    )
    _, rc, stdout, stderr = sh([sys.executable, "-c", code], timeout=30)
    return dict(_json(stdout), rc=rc, err=stderr[-300:])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--anchors", type=Path, default=Path("/tmp/anchors"))
    ap.add_argument("--budget", type=float, default=270.0, help="seconds for the whole run")
    args = ap.parse_args()
    DEADLINE[0] = time.monotonic() + args.budget
    out = Path(os.environ.get("OUT", "bench-out"))
    out.mkdir(parents=True, exist_ok=True)
    n_gpus = len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines())
    report: dict[str, Any] = {"label": args.label, "gpus": n_gpus, "compile_s": round(compile_bytecode(LIGHT), 1)}
    report["anchors"] = anchors(args.anchors, n_gpus)
    report["check_s"] = [r["wall_s"] for r in runs("check", 2, ["check", "-f", "json"], out)]
    report["quick"] = runs("quick", 3, ["bandwidth", "--quick", "-f", "json"], out)
    report["matrix"] = runs("matrix", 2, ["bandwidth", "-f", "json"], out)
    report["check_bandwidth"] = runs("checkbw", 3, ["check", "--bandwidth", "-f", "json"], out)
    full = report["matrix"][-1]["doc"] if report["matrix"] else {}
    report["accuracy"] = accuracy(full, report["anchors"].get("nvbandwidth", {}))
    if left() > 150:  # torch is compiled only now: its compile would load the CPUs during the runs above
        report["torch_compile_s"] = round(compile_bytecode(("torch",)), 1)
        report["torch_timer_quick"] = torch_timer_quick()
    if n_gpus > 1 and left() > 60:
        report["scope"] = scope_checks(out)
    report["kernel_log"] = kernel_log()
    for key in ("quick", "matrix", "check_bandwidth"):
        for r in report.get(key, []):
            r.pop("doc", None)
    (out / f"{args.label}.bench.json").write_text(json.dumps(report, indent=1))
    md = summary(report)
    (out / f"{args.label}.bench.md").write_text(md)
    print(md)
    return 0


def summary(r: dict[str, Any]) -> str:
    p2p = r["anchors"].get("p2p_wall_s") or [float("nan")]
    ref = statistics.median(p2p)
    lines = [f"## {r['label']}: {r['gpus']} GPUs", ""]
    lines += ["| command | wall (median) | x p2pBandwidthLatencyTest |", "| --- | --- | --- |"]
    lines.append(f"| p2pBandwidthLatencyTest | {ref:.2f} s | 1.00 |")
    lines.append(f"| nvbandwidth ({len(NVB_TESTS)} CE tests) | {r['anchors'].get('nvbandwidth_wall_s', 0):.2f} s | |")
    for key, name in (
        ("quick", "bandwidth --quick"),
        ("matrix", "bandwidth"),
        ("check_bandwidth", "check --bandwidth"),
    ):
        walls = [x["wall_s"] for x in r.get(key, []) if x["rc"] in (0, 1)]
        if walls:
            w = statistics.median(walls)
            lines.append(f"| `topodoctor {name}` | {w:.2f} s | {w / ref:.2f} |")
    if r.get("check_s"):
        lines.append(f"| `topodoctor check` (no copies) | {statistics.median(r['check_s']):.2f} s | |")
    phases: list[str] = []
    for key in ("quick", "matrix", "check_bandwidth"):
        for x in r.get(key, []):
            phases += [p for p in (x.get("timings") or {}) if p not in phases]
    lines += ["", "Where the time went (seconds, last run of each):", ""]
    lines += ["| phase | --quick | matrix | check --bandwidth |", "| --- | --- | --- | --- |"]
    for ph in phases:
        cells = [
            f"{(r[k][-1].get('timings') or {}).get(ph, 0.0):.3f}" if r.get(k) else "-"
            for k in ("quick", "matrix", "check_bandwidth")
        ]
        lines.append(f"| {ph} | " + " | ".join(cells) + " |")
    acc = [a for a in r.get("accuracy", []) if a["ratio"] is not None]
    if acc:
        lines += [
            "",
            "| mode | pair | topodoctor | nvbandwidth | ratio | spread |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {a['mode']} | {a['pair']} | {a['ours']} | {a['nvbandwidth']} | {a['ratio']:.3f} | {a['spread_pct']}% |"
            for a in acc
        ]
    t = r.get("torch_timer_quick") or {}
    if t.get("timings"):
        lines += ["", f"torch timer, same quick pass: {t.get('wall_s', 0):.2f} s in-process; {t['timings']}"]
    if r.get("scope"):
        lines += ["", "Job scope: " + json.dumps(r["scope"])]
    lines += ["", "Kernel log: " + json.dumps(r.get("kernel_log"))[:600]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
