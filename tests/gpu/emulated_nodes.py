"""Runs across emulated nodes on one 2-GPU host: torchrun launches on 127.0.0.1 whose NCCL_HOSTIDs
differ stand in for nodes (NCCL joins them through NET/Socket over lo), each checked against what
was staged. Every process under a time limit, killed at the end of its stage; every process runs
with NVLink multicast off.

    OUT=/tmp/out python tests/gpu/emulated_nodes.py job pairwise two-nodes --budget 90

Stages (results under $OUT/emulated/, summary.json holds every check, its evidence and time):

- job: a real hang across two nodes (nodeA on GPU0, nodeB on GPU1, one rank each): rank 1 sleeps
  past the process group's timeout before its 4th all_reduce, as a stuck data loader does; the
  flight recorders dump (TORCH_NCCL_DUMP_ON_TIMEOUT), and `topodoctor job` must name
  "not-enqueued", rank 1 on nodeB;
- pairwise: four nodes (nodeA and nodeD on GPU0, nodeB and nodeC on GPU1) with nodeC slowed by a
  foreign process: its launch is pinned to two CPUs that busy loops also hold, so its NCCL proxy
  threads (which carry NET/Socket traffic) get a fraction of a core; `collectives --pairwise` must
  name nodeC slow and the others healthy; the time it took is kept;
- two-nodes: collectives across nodeA (GPU0) and nodeB (GPU1) beside `collectives --predict
  --nodes 2` on the same host (and the one-node prediction beside the one-node figures).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import multinode_host as mn  # noqa: E402  (tests/gpu: the launcher of emulated nodes)

OUT = Path(os.environ.get("OUT", "/tmp/topodoctor-emulated")) / "emulated"
SAFE = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
PREFIX = "nccl_trace_rank_"
HANG_TIMEOUT_S = 8.0  # the process group's timeout in the staged hang
HOG_CPUS = ",".join(map(str, sorted(os.sched_getaffinity(0))[-2:]))  # nodeC's launch and the busy loops share these
HOGS = 4  # busy loops on those two CPUs: the proxy threads get about a third of a core
results: dict[str, Any] = {"checks": [], "stages": {}}


def check(stage: str, what: str, ok: bool, evidence: Any) -> None:
    results["checks"].append({"stage": stage, "check": what, "ok": bool(ok), "evidence": evidence})
    print(f"[{'ok' if ok else 'FAIL'}] {stage}: {what}: {json.dumps(evidence, default=str)[:400]}", flush=True)


def td(*args: str, limit: float = 60.0) -> subprocess.CompletedProcess[str]:
    """topodoctor, bounded; a timeout is a result (code 124), never an exception."""
    cmd = [sys.executable, "-m", "topodoctor", *args]
    env = dict(os.environ, **SAFE, PYTHONPATH=str(ROOT))
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(cmd, 124, out, f"timed out after {limit:g} s")


# ----------------------------------------------------------------------------- the staged hang


def rank_main(d: Path) -> None:
    """One rank of the staged job: three all_reduces, then rank 1 stalls before the fourth."""
    import torch
    import torch.distributed as dist
    from job_capture import _dump  # the same recorder dump as the job capture's ranks

    rank = int(os.environ["RANK"])
    p = torch.cuda.get_device_properties(0)
    bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    (d / f"map.{rank}").write_text(f"{rank} {os.environ['NCCL_HOSTID']} 0 {bus}\n")
    threading.Timer(HANG_TIMEOUT_S + 6.0, _dump, (d, rank, True)).start()
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=timedelta(seconds=HANG_TIMEOUT_S), device_id=torch.device("cuda", 0))
    t = torch.ones(1 << 20, device="cuda")
    try:
        for _ in range(3):
            dist.all_reduce(t)
            torch.cuda.synchronize()
        if rank == 1:
            time.sleep(HANG_TIMEOUT_S * 1.5)  # the stuck data loader
        else:
            dist.all_reduce(t)
            torch.cuda.synchronize()
    except Exception as exc:
        print(f"rank {rank}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr, flush=True)
    finally:
        _dump(d, rank, True)
    os._exit(0)  # a communicator that timed out can hang in its teardown


def stage_job(limit: float) -> None:
    stage, t0 = "job", time.monotonic()
    d = OUT / "job"
    d.mkdir(parents=True, exist_ok=True)
    from topodoctor.measure.collectives.world import free_port

    port, procs = free_port(), []
    for k, (node, gpu) in enumerate((("nodeA", "0"), ("nodeB", "1"))):
        env = dict(os.environ, **SAFE, PYTHONPATH=f"{ROOT}:{HERE}", PYTHONUNBUFFERED="1")
        env.update(
            CUDA_VISIBLE_DEVICES=gpu,
            NCCL_HOSTID=node,
            NCCL_SOCKET_IFNAME="lo",
            TORCH_FR_BUFFER_SIZE="2000",
            TORCH_FR_DUMP_TEMP_FILE=str(d / PREFIX),
            TORCH_NCCL_DUMP_ON_TIMEOUT="1",
            TORCH_NCCL_ENABLE_TIMING="1",
        )
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(k)]
        cmd += ["--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port)]
        cmd += [__file__, "--rank", str(d)]
        with open(d / f"launch.{node}.log", "wb") as out:
            procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        if k == 0:
            time.sleep(1.0)  # nodeA's agent hosts the store
    dumped = None
    while time.monotonic() - t0 < limit - 8 and any(p.poll() is None for p in procs):
        if dumped is None and len(list(d.glob(f"{PREFIX}*"))) >= 2:
            dumped = time.monotonic()
        if dumped is not None and time.monotonic() - dumped > 3.0:
            break
        time.sleep(0.1)
    _kill(procs)
    maps = sorted(d.glob("map.*"))
    (d / "ranks.map").write_text("".join(m.read_text() for m in maps))
    dumps = sorted(p.name for p in d.glob(f"{PREFIX}*"))
    check(stage, "both ranks' flight recorders dumped", len(dumps) == 2, dumps)
    line = td("job", str(d), "--map", str(d / "ranks.map"), "-f", "line", limit=30)
    doc = td("job", str(d), "--map", str(d / "ranks.map"), "-f", "json", limit=30)
    (d / "verdict.txt").write_text(f"exit {line.returncode}\n{line.stdout}{line.stderr}")
    (d / "verdict.json").write_text(doc.stdout or doc.stderr)
    try:
        first = json.loads(doc.stdout)["findings"][0]
    except (ValueError, KeyError, IndexError):
        first = {}
    staged = {"kind": "not-enqueued", "ranks": [1], "hosts": ["nodeB"]}
    got = {k: first.get(k) for k in staged}
    check(stage, "the job doctor names what was staged (rank 1 on nodeB never enqueued #4)", got == staged, got)
    check(stage, "its exit code names a culprit (1)", line.returncode == 1, line.stdout.strip()[:300])
    results["stages"][stage] = {"wall_s": round(time.monotonic() - t0, 1), "verdict": line.stdout.strip()}


# ----------------------------------------------------------------------------- the slowed node


def stage_pairwise(limit: float) -> None:
    stage, t0 = "pairwise", time.monotonic()
    mn.OUT, mn.STAGE_LIMIT_S = OUT, max(limit - 5, 20.0)
    hogs = [
        subprocess.Popen(
            ["taskset", "-c", HOG_CPUS, sys.executable, "-c", "while True: pass"],
            start_new_session=True,
        )
        for _ in range(HOGS)
    ]
    four = [("nodeA", "0", {}), ("nodeB", "1", {}), ("nodeC", "1", {}), ("nodeD", "0", {})]
    args = ["--op", "all_reduce", "--size", "64M", "--iters", "10", "--pairwise", "--pair-size", "64M"]
    args += ["--pair-tolerance", "0.35", "--format", "json", "-o", str(OUT / "pairwise.result.json")]
    try:
        pinned = {"nodeC": ["taskset", "-c", HOG_CPUS]}
        codes = mn.launch("pairwise", four, args, ["-m", "topodoctor", "collectives"], wrap=pinned)
    finally:
        _kill(hogs)
    took = round(time.monotonic() - t0, 1)
    check(stage, "every launch ended with one code", len(set(codes)) == 1 and codes[0] in (0, 1), codes)
    doc = mn.report("pairwise") or {}
    p = doc.get("pairwise") or {}
    got = mn.verdicts(doc)
    want = {"nodeA": "healthy", "nodeB": "healthy", "nodeC": "slow", "nodeD": "healthy"}
    ev = {"verdicts": got, "reference_gbps": p.get("reference_gbps"), "outcomes": p.get("outcomes"), "s": took}
    check(stage, f"the finder names nodeC slow, the others healthy, in {took} s", got == want, ev)
    results["stages"][stage] = {"wall_s": took, "run_wall_s": doc.get("wall_s"), "verdicts": got}


# ----------------------------------------------------------------------------- two nodes against the model


def stage_two_nodes(limit: float) -> None:
    stage, t0 = "two-nodes", time.monotonic()
    mn.OUT, mn.STAGE_LIMIT_S = OUT, max(limit - 12, 20.0)
    args = ["--op", "all_reduce,all_gather,sendrecv", "--size", "64M", "--iters", "10", "--format", "json"]
    args += ["--log-dir", str(OUT / "logs-two-nodes"), "-o", str(OUT / "two-nodes.result.json")]
    codes = mn.launch("two-nodes", [("nodeA", "0", {}), ("nodeB", "1", {})], args, ["-m", "topodoctor", "collectives"])
    check(stage, "both launches ended with one code", len(set(codes)) == 1 and codes[0] in (0, 1), codes)
    doc = mn.report("two-nodes") or {}
    inter = {
        r["op"]: max(c["busbw_gbps"] for c in (r["out_of_place"], r["in_place"]) if c)
        for s in doc.get("spans", [])
        if s["scope"] == "inter"
        for r in s["rows"]
    }
    kinds = sorted({c["kind"] for c in ((doc.get("nccl") or {}).get("connections") or [])})
    check(stage, "NCCL joined the nodes over NET, figures per op", "net" in kinds and len(inter) == 3, [kinds, inter])
    two = td("collectives", "--predict", "--nodes", "2", "--format", "json", limit=30)
    one = td("collectives", "--predict", "--format", "json", limit=30)
    (OUT / "predict-nodes2.txt").write_text(f"exit {two.returncode}\n{two.stdout}{two.stderr}")
    (OUT / "predict-node1.json").write_text(one.stdout or one.stderr)
    if two.returncode == 0:
        model = {p["op"]: p["busbw_gbps"] for p in json.loads(two.stdout)["predictions"]}
        ratio = {op: round(inter[op] / model[op], 3) for op in inter if model.get(op)}
        check(stage, "measured across nodes against --predict --nodes 2", bool(ratio), {"ratio": ratio, "model": model})
    else:
        # no RDMA NIC here: the model says so (exit 3, one cause) and the nodes ran over sockets
        said = two.stderr.strip()
        ok = two.returncode == 3 and "no RDMA NIC" in said
        check(stage, "--predict --nodes 2 says why it has no figure (exit 3)", ok, {"said": said, "measured": inter})
    results["stages"][stage] = {"wall_s": round(time.monotonic() - t0, 1), "inter_gbps": inter}


def _kill(procs: list[subprocess.Popen[Any]]) -> None:
    tree = [pid for p in procs if p.poll() is None for pid in (p.pid, *mn.descendants(p.pid))]
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)


STAGES = {"job": (stage_job, 40.0), "pairwise": (stage_pairwise, 60.0), "two-nodes": (stage_two_nodes, 50.0)}


def main(argv: list[str]) -> int:
    budget = float(argv[argv.index("--budget") + 1]) if "--budget" in argv else 150.0
    names = [a for a in argv if a in STAGES] or list(STAGES)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    for name in names:
        fn, most = STAGES[name]
        left = budget - (time.monotonic() - t0)
        if left < 20:
            check(name, "skipped: the script's time ran out", False, {"left_s": round(left, 1)})
            continue
        try:
            fn(min(most, left))
        except Exception as exc:  # a broken stage is a result; the next one still runs
            check(name, "the stage ran", False, f"{type(exc).__name__}: {exc}")
    results["launcher_checks"] = mn.checks  # the launches ended together (multinode_host's own check)
    results["wall_s"] = round(time.monotonic() - t0, 1)
    results["ok"] = all(c["ok"] for c in results["checks"])
    (OUT / "summary.json").write_text(json.dumps(results, indent=1, default=str))
    passed = sum(c["ok"] for c in results["checks"])
    print(f"emulated nodes: {passed}/{len(results['checks'])} checks, {results['wall_s']} s")
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--rank":
        rank_main(Path(sys.argv[2]))
    else:
        sys.exit(main(sys.argv[1:]))
