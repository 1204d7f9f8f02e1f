"""Collectives beside nccl-tests, in the same run on a GPU host (not CI).

    bash .anchors/build.sh /tmp/anchors     # nccl-tests against the NCCL torch ships
    python3 tests/benchmarks/collectives_bench.py --anchors /tmp/anchors --out "$OUT"

Runs nccl-tests (one binary per op, 8 B - 1 GiB by 2) and `topodoctor collectives` over the same ops
and sizes, then the variants NCCL_P2P_DISABLE=1 and NCCL_MAX_NCHANNELS=1 with both tools, a simulated
hang, and the quick pass of `check --collectives`. Writes to --out: bench.json (every figure),
ratios.md (the tables for docs/benchmarks.md), each tool's raw output, NCCL's logs. Every step has
its own timeout; the whole run stays under 8 minutes on a 2-GPU host.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from topodoctor.core.text import human_size  # noqa: E402
from topodoctor.model.collective_ops import SPECS, shape  # noqa: E402
from topodoctor.model.collectives import CollectivesResult, load_result, merge  # noqa: E402

SMALL = [8 << i for i in range(14)]  # 8 B .. 64 KiB
LARGE = [64 << 20, 1 << 30]
BUSBW_TARGET = 0.98  # ours / nccl-tests at 64 MiB and 1 GiB
TIME_TARGET = 1.25  # ours / nccl-tests at 8 B - 64 KiB


def sh(cmd: list[str], out: Path, timeout: float, env: dict[str, str] | None = None) -> tuple[float, int]:
    t0 = time.monotonic()
    with open(out, "w") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
        except OSError as exc:  # a tool that was not built
            f.write(f"cannot run {cmd[0]}: {exc}\n")
            rc = 127
    return round(time.monotonic() - t0, 2), rc


def nccl_tests(
    anchors: Path,
    out: Path,
    tag: str,
    sizes: str,
    ops: list[str],
    env: dict[str, str],
    iters: int,
    warmup: int,
    extra: tuple[str, ...] = (),
) -> tuple[CollectivesResult | None, float]:
    """One nccl-tests binary after another, as a user runs them; their JSON read by our reader."""
    ngpus = env.get("NGPUS", "2")
    lo, _, hi = sizes.partition(":")
    results, total = [], 0.0
    for op in ops:
        binary = anchors / "nccl-tests" / "build" / SPECS[op].binary
        js = out / f"nt-{tag}-{op}.json"
        cmd = [str(binary), "-g", ngpus, "-b", lo, "-e", hi or lo, "-f", "2", "-n", str(iters), "-w", str(warmup)]
        cmd += extra
        wall, rc = sh([*cmd, "-c", "1", "-J", str(js)], out / f"nt-{tag}-{op}.txt", 60, env)
        total += wall
        if rc == 0 and js.is_file():
            results.append(load_result(js))
    return (merge(results) if results else None), round(total, 2)


def topodoctor(
    out: Path, tag: str, args: list[str], env: dict[str, str], timeout: float = 100
) -> tuple[CollectivesResult | None, float, int, str]:
    res_path = out / f"td-{tag}.json"
    cmd = [
        sys.executable,
        "-m",
        "topodoctor",
        "collectives",
        *args,
        "-o",
        str(res_path),
        "--timeout",
        str(timeout - 10),
    ]
    cmd += ["--log-dir", str(out / f"td-{tag}-logs")]
    wall, rc = sh(cmd, out / f"td-{tag}.txt", timeout, env)
    res = load_result(res_path) if res_path.is_file() else None
    return res, wall, rc, (out / f"td-{tag}.txt").read_text()


def _col(row: Any, place: str) -> Any:
    return row.out_of_place if place == "out" else row.in_place


def compare(ours: CollectivesResult, theirs: CollectivesResult, sizes: list[int]) -> list[dict[str, Any]]:
    """Ours against nccl-tests, op by op and size by size, the same form (out/in-place) on both sides."""
    rows = []
    n = ours.world_size
    for op in SPECS:
        for req in sizes:
            sh = shape(op, req, n)
            if sh.count == 0:  # nothing to move (a chunk under 16 bytes): no row on our side
                continue
            size = sh.size_bytes
            a, b = ours.row(op, size), theirs.row(op, size)
            if a is None or b is None:
                continue
            for place in SPECS[op].places:
                ta, tb = _col(a, place), _col(b, place)
                if ta is None or tb is None:
                    continue
                rows.append(
                    {
                        "op": op,
                        "size": size,
                        "place": place,
                        "ours_us": round(ta.time_us, 2),
                        "nccl_tests_us": round(tb.time_us, 2),
                        "time_ratio": round(ta.time_us / tb.time_us, 3) if tb.time_us else None,
                        "ours_busbw": round(ta.busbw_gbps, 2),
                        "nccl_tests_busbw": round(tb.busbw_gbps, 2),
                        "busbw_ratio": round(ta.busbw_gbps / tb.busbw_gbps, 3) if tb.busbw_gbps else None,
                        "ours_wrong": ta.wrong,
                        "nccl_tests_wrong": tb.wrong,
                    }
                )
    return rows


def gpu_processes() -> str:
    try:
        p = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(nvidia-smi: {exc})"
    return p.stdout.strip()


def table(rows: list[dict[str, Any]], large: bool) -> list[str]:
    if large:
        out = ["| op | size | form | busbw ours | busbw nccl-tests | ratio | target >= 0.98 |", "|" + " --- |" * 7]
        for r in rows:
            ok = "yes" if (r["busbw_ratio"] or 0) >= BUSBW_TARGET else "NO"
            out.append(
                f"| {r['op']} | {human_size(r['size'])} | {r['place']} | {r['ours_busbw']} | {r['nccl_tests_busbw']} "
                f"| {r['busbw_ratio']} | {ok} |"
            )
        return out
    worst: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["op"] not in worst or (r["time_ratio"] or 0) > (worst[r["op"]]["time_ratio"] or 0):
            worst[r["op"]] = r
    out = ["| op | worst size | form | time ours (us) | time nccl-tests (us) | ratio | target <= 1.25 |"]
    out.append("|" + " --- |" * 7)
    for r in worst.values():
        ok = "yes" if (r["time_ratio"] or 99) <= TIME_TARGET else "NO"
        out.append(
            f"| {r['op']} | {human_size(r['size'])} | {r['place']} | {r['ours_us']} | {r['nccl_tests_us']} "
            f"| {r['time_ratio']} | {ok} |"
        )
    return out


def main() -> int:
    try:
        return run()
    except Exception:  # keep what was written; say what broke
        import traceback

        traceback.print_exc()
        return 1


def run() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--anchors", type=Path, default=Path("/tmp/anchors"))
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "collectives-bench")))
    ap.add_argument("--ngpus", type=int, default=None)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    out = a.out
    out.mkdir(parents=True, exist_ok=True)
    import torch

    ngpus = a.ngpus or torch.cuda.device_count()
    base = dict(os.environ, PYTHONPATH=str(ROOT), NGPUS=str(ngpus), PYTHONUNBUFFERED="1")
    base.setdefault("NCCL_NVLS_ENABLE", "0")
    base.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    base.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    base["LD_LIBRARY_PATH"] = f"{a.anchors / 'nccl' / 'lib'}:{base.get('LD_LIBRARY_PATH', '')}"
    ops = list(SPECS)
    it = ["--iters", str(a.iters), "--warmup", str(a.warmup)]
    report: dict[str, Any] = {"ngpus": ngpus, "iters": a.iters, "warmup": a.warmup}

    # 1. the full sweep with both tools
    theirs, nt_wall = nccl_tests(a.anchors, out, "sweep", "8:1G", ops, base, a.iters, a.warmup)
    ours, td_wall, td_rc, td_text = topodoctor(out, "sweep", ["--size", "8:1G", *it], base)
    report["sweep"] = {"nccl_tests_wall_s": nt_wall, "topodoctor_wall_s": td_wall, "topodoctor_rc": td_rc}
    lines = [f"## collectives, {ngpus} GPUs: topodoctor beside nccl-tests in the same run", ""]
    if ours is None or theirs is None:
        report["error"] = "a sweep produced no result"
        print(td_text[-3000:])
    else:
        small, large = compare(ours, theirs, SMALL), compare(ours, theirs, LARGE)
        report["small"], report["large"] = small, large
        report["account"] = next((ln for ln in td_text.splitlines() if ln.startswith("NCCL ")), "-")
        lines += [f"Full sweep, 7 ops, 8 B - 1 GiB by 2: nccl-tests one binary after another {nt_wall} s, "]
        lines += [f"`topodoctor collectives` {td_wall} s (torch start-up included, exit {td_rc}).", ""]
        lines += ["Bandwidth at 64 MiB and 1 GiB:", "", *table(large, True), ""]
        lines += ["Time per op at 8 B - 64 KiB (the worst ratio of each op):", "", *table(small, False), ""]
        wrong = [r for r in small + large if r["ours_wrong"]]
        lines += [f"Data check: {len(wrong)} rows with #wrong > 0 (ours).", ""]
        lines += [f"NCCL's account (ours): {report['account']}", ""]

    save(out, report, lines)

    # 1b. small sizes against nccl-tests with CUDA graphs (-G): its default mode times launches from
    # the host, so below ~1 MiB its figure is its launch rate; ours takes launches out, as -G does.
    g, _ = nccl_tests(a.anchors, out, "graph", "8:64K", ops, base, a.iters, a.warmup, ("-G", "10"))
    if ours is not None and g is not None:
        report["small_vs_graph"] = compare(ours, g, SMALL)
        lines += ["Time per op at 8 B - 64 KiB against nccl-tests -G 10 (launches out of both):", ""]
        lines += [*table(report["small_vs_graph"], False), ""]
    save(out, report, lines)

    # 2. the variants: both tools, a few ops at the large sizes
    vops = ["all_reduce", "all_gather", "sendrecv"]
    for tag, var in (("p2p-disable", {"NCCL_P2P_DISABLE": "1"}), ("maxch1", {"NCCL_MAX_NCHANNELS": "1"})):
        env = dict(base, **var)
        t, t_wall = nccl_tests(a.anchors, out, tag, "64M:1G", vops, env, a.iters, a.warmup)
        o, o_wall, o_rc, o_text = topodoctor(out, tag, ["--op", ",".join(vops), "--size", "64M,1G", *it], env)
        codes = sorted({ln.split()[0] for ln in o_text.splitlines() if ln.startswith("TD")})
        cmp = compare(o, t, LARGE) if o and t else []
        report[tag] = {"rc": o_rc, "codes": codes, "compare": cmp, "wall_s": [t_wall, o_wall]}
        acct = next((ln for ln in o_text.splitlines() if ln.startswith("NCCL")), "-")
        lines += [f"With {', '.join(f'{k}={v}' for k, v in var.items())}: exit {o_rc}, findings {codes}.", ""]
        lines += [*table(cmp, True), "", f"NCCL's account: {acct}", ""]

        save(out, report, lines)

    # 3. a simulated hang: rank 1 never joins all_reduce at 1 MiB
    env = dict(base, TOPODOCTOR_COLL_FAULT="hang:1:all_reduce:1048576")
    h, h_wall, h_rc, _ = topodoctor(out, "hang", ["--op", "all_reduce", "--size", "1M", "--op-timeout", "5"], env)
    left = gpu_processes()
    report["hang"] = {"rc": h_rc, "wall_s": h_wall, "failures": [f.message for f in h.failures] if h else None}
    report["hang"]["gpu_processes_after"] = left
    lines += [f"Simulated hang (rank 1 never joins all_reduce at 1 MiB, --op-timeout 5): exit {h_rc} in {h_wall} s; "]
    lines += [f"{(h.failures[0].message if h and h.failures else 'no failure reported')}; "]
    lines += [f"GPU processes afterwards: {left or 'none'}.", ""]

    # 4. the quick pass of check --collectives, timed in a fresh process (torch start-up included)
    code = (
        "import time; t=time.monotonic(); from topodoctor.probe.sources import probe_host, live_nvml; "
        "from topodoctor.service.collectives import quick_pass, judge; s=probe_host().snapshot; "
        "r=quick_pass(s, time.monotonic()+60, live_nvml()); f=judge(r, s); "
        "print(round(time.monotonic()-t,2), [(x.op, x.size_bytes, round(x.best.busbw_gbps,1)) for x in r.rows], "
        "[x.code for x in f])"
    )
    q_wall, q_rc = sh([sys.executable, "-c", code], out / "quick.txt", 60, base)
    report["quick"] = {"wall_s": q_wall, "rc": q_rc, "out": (out / "quick.txt").read_text().strip()[-500:]}
    lines += [f"Quick pass (`check --collectives`): {q_wall} s wall in a fresh process: {report['quick']['out']}", ""]

    save(out, report, lines)
    print("\n".join(lines))
    return 0


def save(out: Path, report: dict[str, Any], lines: list[str]) -> None:
    """After every step: a run cut short by its time limit still leaves what it measured."""
    (out / "bench.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "ratios.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
