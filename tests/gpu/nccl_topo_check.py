"""Does NCCL accept the topology file topodoctor writes? Run on a GPU host with 2 or more GPUs.

    OUT=/tmp/out python tests/gpu/nccl_topo_check.py     # about a minute; exit 0 = accepted

Writes the file (``topodoctor nccl-topo``), lints it (``check --select TD608``), then runs a 1 GiB
torch.distributed NCCL all_reduce on every GPU four times, alternating without and with
``NCCL_TOPO_FILE`` (NCCL_DEBUG=INFO and NCCL_TOPO_DUMP_FILE each time), and checks:
  - NCCL logged no WARN line and no silent fallback ("could not find value") with the file;
  - NCCL's dump of the topology it loaded holds the same GPUs, NVLinks and CPU placement as
    the file, and as NCCL's own detection without the file;
  - the best busbw with the file is within 2% of the best without it.
Everything lands under $OUT (or ./nccl-topo-check): the file, logs, dumps, summary.json.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SIZE_BYTES = 1 << 30
WARMUP, ITERS = 5, 20
RUN_TIMEOUT_S = 40  # a run takes about 10 s (torch start, NCCL init, 25 x 1 GiB); four runs stay near 2 min
TOLERANCE = 0.02


def _rank(rank: int, world: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    x = torch.ones(SIZE_BYTES // 4, dtype=torch.float32, device="cuda")
    for _ in range(WARMUP):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        dist.all_reduce(x)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / ITERS
    busbw = SIZE_BYTES / seconds / 1e9 * 2 * (world - 1) / world  # nccl-tests' all_reduce factor
    got = torch.tensor([busbw], device="cuda")
    gathered = [torch.zeros_like(got) for _ in range(world)]
    dist.all_gather(gathered, got)
    times = [float(t.item()) for t in gathered]
    if rank == 0:
        Path(out).write_text(json.dumps({"busbw_gbps": min(times), "per_rank": times}))
    dist.destroy_process_group()


def worker(out: str) -> None:
    import torch
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    port = 29500 + os.getpid() % 1000
    mp.spawn(_rank, args=(world, port, out), nprocs=world, join=True)


def run_variant(outdir: Path, name: str, topo_file: Path | None) -> dict[str, object]:
    d = outdir / name
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_FILE=str(d / "nccl.%h.%p.log"))
    env["NCCL_TOPO_DUMP_FILE"] = str(d / "dump.xml")
    env.pop("NCCL_TOPO_FILE", None)
    if topo_file is not None:
        env["NCCL_TOPO_FILE"] = str(topo_file)
    t0 = time.monotonic()
    # Its own process group: on a hang the ranks mp.spawn started go too, not only their parent.
    proc = subprocess.Popen(
        [sys.executable, __file__, "--worker", str(d / "result.json")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        rc, output = 124, f"killed after {RUN_TIMEOUT_S} s\n{output}"
    (d / "stderr.txt").write_text(output)
    logs = "".join(p.read_text(errors="replace") for p in sorted(d.glob("nccl.*.log")))
    warn = [ln for ln in logs.splitlines() if " WARN " in ln or "could not find value" in ln]
    loaded = [ln.split("NCCL INFO ", 1)[-1] for ln in logs.splitlines() if "topology" in ln.lower() and "INFO" in ln]
    res = json.loads((d / "result.json").read_text()) if rc == 0 else {}
    return {
        "rc": rc,
        "wall_s": round(time.monotonic() - t0, 1),
        "busbw_gbps": res.get("busbw_gbps"),
        "warnings": warn[:20],
        "topology_lines": sorted(set(loaded))[:10],
        "dump": str(d / "dump.xml"),
    }


def main() -> int:
    from topodoctor.topology.nccl_topo_lint import topology_differences

    out = Path(os.environ.get("OUT") or "nccl-topo-check").resolve()
    out.mkdir(parents=True, exist_ok=True)
    topo = out / "topo.xml"
    py = [sys.executable, "-m", "topodoctor"]
    w = subprocess.run([*py, "nccl-topo", "-o", str(topo)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    summary: dict[str, object] = {"write": w.stderr.strip(), "write_rc": w.returncode}
    if w.returncode != 0:
        print(json.dumps(summary, indent=1))
        return 1
    lint = subprocess.run(
        [*py, "check", "--select", "TD608", "-f", "json"],
        env=dict(os.environ, NCCL_TOPO_FILE=str(topo)),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    summary["lint"] = [f["message"] for f in json.loads(lint.stdout or "{}").get("findings", [])]
    summary["lint_rc"] = lint.returncode
    runs = {}
    for k, (name, f) in enumerate((("without", None), ("with", topo)) * 2):
        runs[f"{name}-{k // 2}"] = run_variant(out, f"{name}-{k // 2}", f)
    summary["runs"] = runs
    ours = topo.read_text()
    ok = not summary["lint"] and lint.returncode == 0 and all(r["rc"] == 0 for r in runs.values())
    diffs = {}
    for key, r in runs.items():
        dump = Path(str(r["dump"]))
        diffs[key] = topology_differences(ours, dump.read_text()) if dump.exists() else ["no dump written"]
    summary["dump_differences"] = diffs
    ok = ok and not any(diffs.values())
    warned = {k: r["warnings"] for k, r in runs.items() if k.startswith("with-") and r["warnings"]}
    summary["warnings_with_file"] = warned
    ok = ok and not warned

    def best(prefix: str) -> float:
        vals = [float(str(r["busbw_gbps"])) for k, r in runs.items() if k.startswith(prefix) and r["busbw_gbps"]]
        return max(vals) if vals else 0.0

    base, with_file = best("without-"), best("with-")
    summary["busbw_gbps"] = {"without": base, "with": with_file}
    summary["busbw_ratio"] = round(with_file / base, 4) if base else None
    ok = ok and base > 0 and abs(with_file - base) / base <= TOLERANCE
    summary["accepted"] = ok
    text = json.dumps(summary, indent=1)
    (out / "summary.json").write_text(text)
    print(text)
    print(f"NCCL accepts the topology file: {'yes' if ok else 'NO'}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        sys.exit(0)
    sys.exit(main())
