"""Record real NCCL output for each failure class `topodoctor nccl-log` explains, on one GPU.

Run on a GPU host (or with ``--backend gloo`` on a CPU to try the plumbing):

    python3 tests/gpu/nccl_failures.py OUTDIR [--backend nccl|gloo] [--only CASE,...] [--limit S] [--port P]

Every case starts its ranks as separate processes that meet through c10d's TCP store on
127.0.0.1, as separate torchrun launches would. Two "nodes" on one GPU: each rank sets its
own ``NCCL_HOSTID``, so NCCL counts two hosts and connects them over ``NCCL_SOCKET_IFNAME=lo``.
Each case runs at ``NCCL_DEBUG`` unset, WARN and INFO; a rank's stdout and stderr together
(what a job's log holds) go to ``OUTDIR/<case>/<level>/rank<N>.txt``, and ``case.json``
beside them says what was run and how each rank ended. Cases:

- ``healthy``: INFO with INIT,GRAPH,TUNING: the cost table, the graph search, the per-call
  choices; every op at a few sizes; also ``algo-ring`` / ``algo-tree`` (NCCL_ALGO per run,
  all_reduce busbw per size over sockets).
- ``net-ib``: NCCL_NET=IB on a host without InfiniBand.
- ``ib-hca``: NCCL_IB_HCA names a device that does not exist (NCCL falls back to sockets).
- ``socket-ifname``: NCCL_SOCKET_IFNAME matches no interface.
- ``duplicate-gpu``: two ranks of one host on one GPU.
- ``shm-small``: each "node" in a mount namespace of its own whose /dev/shm is a 64 KiB tmpfs.
  With one rank per host NCCL's SHM transport is not used; what needs /dev/shm is the proxy:
  every network connection has proxy progress, so proxy.cc's proxyProgressInit creates its ops
  pool with ncclShmOpen (sizeof(struct ncclProxyOpsPool): 2048 ops x 72 local ranks, megabytes),
  and shmutils.cc's fallocate fails with ENOSPC ("Error: failed to extend ...", then "Error while
  creating shared memory segment ..."). NCCL 2.22+ connects rings lazily, so the first collective
  fails, not the init (NCCL 2.28.9; nvls.cc's ncclShmOpen needs NVLS, off here).
- ``version-mismatch``: rank 1 runs with ``LD_PRELOAD`` naming another NCCL build (``TD_OTHER_NCCL``,
  a path): init.cc compares the ranks' versions after the bootstrap ("Mismatched NCCL version").
- ``peer-died``: rank 1 exits in the middle of a loop of all_reduce.
- ``watchdog``: rank 1 never joins an all_reduce; rank 0's process group times out after 5 s.
- ``td-net-ib``, ``td-socket-ifname``, ``td-healthy``: the same two "nodes", each rank being
  ``topodoctor collectives`` itself joined to the world (RANK / WORLD_SIZE): its init failure
  explained with exit 3, and a healthy run's report with NCCL's choices (INFO with TUNING).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

LEVELS = {"unset": None, "warn": "WARN", "info": "INFO"}
CASE_LIMIT_S = 75.0  # --limit
SAFE = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _busbw(op: str, size: int, seconds: float, n: int) -> float:
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n}.get(op, 1.0)
    return size / seconds / 1e9 * factor


def rank_main() -> int:
    """One rank: what its case asks of it."""
    import datetime

    import torch
    import torch.distributed as dist

    case = os.environ["TD_CASE"]
    backend = os.environ.get("TD_BACKEND", "nccl")
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    gpu = backend == "nccl"
    dev = torch.device("cuda", 0) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(dev)
    timeout = datetime.timedelta(seconds=5 if case == "watchdog" else 60)
    kwargs = {"device_id": dev} if gpu else {}
    if case == "version-mismatch" and gpu:
        print(f"rank {rank}: NCCL {torch.cuda.nccl.version()} loaded", flush=True)
    dist.init_process_group(backend, timeout=timeout, **kwargs)
    print(f"rank {rank}: process group up ({backend}, world {world})", flush=True)

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize()

    if case == "peer-died":
        x = torch.ones(16 << 20, device=dev)
        for i in range(400):
            if rank == 1 and i == 5:
                print("rank 1: exiting in the middle of the loop", flush=True)
                os._exit(17)
            dist.all_reduce(x)
            sync()
        return 0
    if case == "watchdog":
        x = torch.ones(1024, device=dev)
        dist.all_reduce(x)
        sync()
        if rank == 1:
            print("rank 1: not joining the next all_reduce", flush=True)
            time.sleep(25)
            return 0
        dist.all_reduce(x)
        sync()
        return 0
    ops = ("all_reduce", "all_gather", "reduce_scatter", "broadcast") if case == "healthy" else ("all_reduce",)
    sizes = [1 << 12, 1 << 20, 1 << 26] if case == "healthy" else [1 << 16, 1 << 20, 1 << 24, 1 << 27]
    for op in ops:
        for size in sizes:
            n = size // 4
            x = torch.ones(n, device=dev)
            out = torch.empty(n * world, device=dev)
            part = torch.empty(n // world, device=dev)

            def call(op: str = op, x: torch.Tensor = x, out: torch.Tensor = out, part: torch.Tensor = part) -> None:
                if op == "all_reduce":
                    dist.all_reduce(x)
                elif op == "all_gather":
                    dist.all_gather_into_tensor(out, x)
                elif op == "reduce_scatter":
                    dist.reduce_scatter_tensor(part, x)
                else:
                    dist.broadcast(x, 0)

            call()
            sync()
            iters = 5
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            sync()
            dt = (time.perf_counter() - t0) / iters
            if rank == 0:
                print(f"{op:16s}{size:12d}{dt * 1e6:12.1f} us busbw {_busbw(op, size, dt, world):8.2f}", flush=True)
    dist.destroy_process_group()
    return 0


def _case_env(case: str) -> tuple[list[dict[str, str]], list[str]]:
    """Per-rank variables of a case, and the command prefix (a private /dev/shm for one)."""
    two_nodes = [{"NCCL_HOSTID": "nodeA"}, {"NCCL_HOSTID": "nodeB"}]
    common = {"NCCL_SOCKET_IFNAME": "lo"}
    prefix: list[str] = []
    if case == "net-ib":
        common["NCCL_NET"] = "IB"
    elif case == "ib-hca":
        common["NCCL_IB_HCA"] = "mlx5_0"
    elif case == "socket-ifname":
        common["NCCL_SOCKET_IFNAME"] = "nosuch0"
    elif case == "duplicate-gpu":
        two_nodes = [{}, {}]
    elif case == "shm-small":
        mount = (
            'mount -t tmpfs -o size=64k tmpfs /dev/shm && echo "/dev/shm: $(df -k /dev/shm | tail -n 1)" && exec "$@"'
        )
        prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh"]
    elif case == "version-mismatch":
        two_nodes[1]["LD_PRELOAD"] = os.environ.get("TD_OTHER_NCCL", "")
    elif case == "algo-ring":
        common["NCCL_ALGO"] = "Ring"
    elif case == "algo-tree":
        common["NCCL_ALGO"] = "Tree"
    return [dict(common, **r) for r in two_nodes], prefix


def run_case(out: Path, case: str, level: str, port: int, backend: str) -> subprocess.Popen[bytes] | None:
    """Start a case's ranks; returns the first rank's process (the others are waited for too)."""
    d = out / case / level
    d.mkdir(parents=True, exist_ok=True)
    per_rank, prefix = _case_env(case.removeprefix("td-"))
    procs = []
    for rank, extra in enumerate(per_rank):
        env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
        env.update(SAFE)
        env.update(extra)
        env.update(
            TD_ROLE="rank",
            TD_CASE=case,
            TD_BACKEND=backend,
            RANK=str(rank),
            LOCAL_RANK="0",
            WORLD_SIZE=str(len(per_rank)),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            PYTHONUNBUFFERED="1",
            TORCH_NCCL_DUMP_ON_TIMEOUT="0",
        )
        if LEVELS[level]:
            env["NCCL_DEBUG"] = LEVELS[level]
        if case in ("healthy", "algo-ring", "algo-tree", "td-healthy") and level == "info":
            env["NCCL_DEBUG_SUBSYS"] = "INIT,GRAPH,ENV,TUNING,P2P,SHM,NET"
        log = open(d / f"rank{rank}.txt", "wb")  # noqa: SIM115 - closed when the process ends
        cmd = [*prefix, sys.executable, os.path.abspath(__file__)]
        if case.startswith("td-"):
            env.pop("TD_ROLE")
            cmd = [sys.executable, "-m", "topodoctor", "collectives", "--backend", backend, "--op", "all_reduce"]
            cmd += ["--size", "1M,64M", "--iters", "5", "--log-dir", str(d / f"logs{rank}"), "--timeout", "60"]
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    return _wait(d, case, level, procs)


def _wait(d: Path, case: str, level: str, procs: list[tuple[subprocess.Popen[bytes], object]]) -> None:
    start = time.monotonic()
    codes: list[int | None] = []
    for p, log in procs:
        left = max(0.1, CASE_LIMIT_S - (time.monotonic() - start))
        try:
            codes.append(p.wait(left))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append(None)
        log.close()  # type: ignore[attr-defined]
    meta: dict[str, object] = {
        "case": case,
        "nccl_debug": LEVELS[level],
        "exit_codes": codes,
        "wall_s": round(time.monotonic() - start, 1),
    }
    if case == "version-mismatch":
        meta["rank1_ld_preload"] = os.environ.get("TD_OTHER_NCCL", "")
    (d / "case.json").write_text(json.dumps(meta) + "\n")
    print(json.dumps(meta), flush=True)
    return None


CASES = (
    "healthy",
    "algo-ring",
    "algo-tree",
    "net-ib",
    "ib-hca",
    "socket-ifname",
    "duplicate-gpu",
    "shm-small",
    "version-mismatch",
    "peer-died",
    "watchdog",
    "td-net-ib",
    "td-socket-ifname",
    "td-healthy",
)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    global CASE_LIMIT_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--backend", default="nccl", choices=("nccl", "gloo"))
    ap.add_argument("--only", default=",".join(c for c in CASES if c != "version-mismatch"))
    ap.add_argument("--limit", type=float, default=CASE_LIMIT_S, help="seconds a case may take before it is killed")
    ap.add_argument("--port", type=int, default=0, help="first rendezvous port (one per case); 0: a free one each")
    args = ap.parse_args()
    import threading

    CASE_LIMIT_S = args.limit
    port = args.port
    threads = []
    for case in args.only.split(","):
        levels = ("info",) if case in ("healthy", "algo-ring", "algo-tree") or case.startswith("td-") else tuple(LEVELS)
        for level in levels:
            port = port + 1 if args.port else _free_port()
            t = threading.Thread(target=run_case, args=(args.out, case, level, port, args.backend))
            t.start()
            threads.append(t)
        if len(threads) >= 6:  # one GPU, 16 cores: a few cases at once
            for t in threads:
                t.join()
            threads = []
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(rank_main() if os.environ.get("TD_ROLE") == "rank" else main())
