"""Real NCCL flight-recorder dumps of jobs that fail the ways jobs fail, captured on one GPU host,
with NCCL RAS's account and an NVML sampling of the live hang.

    OUT=/tmp/out python tests/gpu/job_capture.py     # ~4 min on a 1-GPU host
    python tests/gpu/job_capture.py --gloo           # the same flow on CPU (no RAS, no NVML): a dry run

Each scenario is a job of three ranks, one torchrun launch per rank, all on GPU 0; NCCL_HOSTID
sets them apart as nodes (node0, node1, node2: NCCL then connects them over NET/Socket on lo).
The ranks run as a job armed per docs/job.md: TORCH_FR_BUFFER_SIZE, TORCH_FR_DUMP_TEMP_FILE,
TORCH_NCCL_DUMP_ON_TIMEOUT=1, TORCH_NCCL_ENABLE_TIMING=1, a short process-group timeout, and
each rank writes its line of the rank map with the one-liner's fields. A rank whose recorder
was not dumped by torch within its timeout and a few seconds dumps it itself (the dump is the
same recorder either way). Scenarios (culprit): healthy; late (rank 2 enters each collective
30 ms late); size (rank 1 passes a quarter of the elements); op (rank 2 runs all_gather where
the others run all_reduce); sleep (rank 1 sleeps past the timeout before the 4th collective:
during the hang RAS is asked, in text and JSON, and NVML sampled); exit (rank 2 exits). Last, the
sleep scenario's culprit is joined with a derived unhealthy node's check result.

Everything lands in one archive, $OUT/job-capture.tgz (dumps, maps, RAS answers, NVML
recordings, `topodoctor job` and fr_trace outputs per scenario), with summary.txt beside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SAFE = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
WORLD = 3
SCENARIOS = ("healthy", "late", "size", "op", "sleep", "exit")
CULPRIT = {"healthy": None, "late": 2, "size": 1, "op": 2, "sleep": 1, "exit": 2}
LATE_S, LATE_OPS, WARMUP = 0.030, 30, 3
PREFIX = "nccl_trace_rank_"


# ----------------------------------------------------------------------------- one rank


def _dump(d: Path, rank: int, nccl: bool) -> None:
    """This rank's recorder, unless torch's watchdog already wrote it (never both)."""
    import torch

    final = d / f"{PREFIX}{rank}"
    if final.exists():
        return
    c10d = torch._C._distributed_c10d
    data = c10d._dump_nccl_trace(True, True, False) if nccl and hasattr(c10d, "_dump_nccl_trace") else None
    if data is None:
        data = c10d._dump_fr_trace(True, True, False)
    tmp = d / f".{PREFIX}{rank}.{os.getpid()}"
    tmp.write_bytes(data)
    with contextlib.suppress(FileExistsError):
        os.link(tmp, final)
    tmp.unlink()


def _bus_id() -> str:
    try:
        got = subprocess.run(
            ["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return got.stdout.strip() or "-"
    except (OSError, subprocess.TimeoutExpired):
        return "-"


def rank_main(scenario: str, d: Path, backend: str, timeout_s: float) -> None:
    import torch
    import torch.distributed as dist

    nccl = backend == "nccl"
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    host = os.environ.get("NCCL_HOSTID") or socket.gethostname()
    # The rank map's line, the fields of docs/job.md's one-liner.
    (d / f"map.{rank}").write_text(f"{rank} {host} {local} {_bus_id() if nccl else '-'}\n")
    # A watchdog dumps on timeout; should it not, the rank dumps itself a little later.
    threading.Timer(timeout_s + 6.0, _dump, (d, rank, nccl)).start()
    device = torch.device("cuda", 0) if nccl else torch.device("cpu")
    if nccl:
        torch.cuda.set_device(0)
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    t = torch.ones(1 << 20, device=device)

    def sync() -> None:
        if nccl:
            torch.cuda.synchronize()

    for _ in range(WARMUP):
        dist.all_reduce(t)
        sync()
    culprit = CULPRIT[scenario] == rank
    try:
        if scenario == "sleep" and culprit:
            time.sleep(timeout_s * 1.5)
            return
        if scenario == "exit" and culprit:
            os._exit(1)
        if scenario == "op" and culprit:
            dist.all_gather([torch.zeros_like(t) for _ in range(WORLD)], t)
        elif scenario == "size" and culprit:
            dist.all_reduce(torch.ones(t.numel() // 4, device=device))
        elif scenario == "late":
            for _ in range(LATE_OPS):
                if culprit:
                    time.sleep(LATE_S)
                dist.all_reduce(t)
                sync()
        else:
            dist.all_reduce(t)
        if rank == 0:
            (d / "entered").touch()
        sync()
        dist.barrier()
        sync()
    except Exception as exc:
        print(f"rank {rank}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr, flush=True)
    finally:
        _dump(d, rank, nccl)
    os._exit(0)  # no teardown: a communicator that timed out can hang in its destruction


# ----------------------------------------------------------------------------- the driver


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                children.setdefault(int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(int(p.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def run_scenario(scenario: str, work: Path, backend: str, timeout_s: float, log: list[str]) -> None:
    from topodoctor.measure.collectives.world import free_port

    d = work / scenario
    d.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs = []
    for k in range(WORLD):
        env = dict(os.environ, **SAFE, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        env.update(
            CUDA_VISIBLE_DEVICES="0",
            NCCL_HOSTID=f"node{k}",
            NCCL_SOCKET_IFNAME="lo",
            TORCH_FR_BUFFER_SIZE="2000",
            TORCH_FR_DUMP_TEMP_FILE=str(d / PREFIX),
            TORCH_NCCL_DUMP_ON_TIMEOUT="1",
            TORCH_NCCL_ENABLE_TIMING="1",
            TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC="5000",
        )
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(WORLD), "--node-rank", str(k)]
        cmd += ["--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port)]
        cmd += [__file__, "--rank", scenario, str(d), backend, str(timeout_s)]
        with open(d / f"launch{k}.log", "wb") as out:
            procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        if k == 0:
            time.sleep(1.0)  # node 0's agent hosts the store
    t0, limit = time.monotonic(), timeout_s * 1.5 + 40
    if scenario == "sleep" and backend == "nccl":
        _during_hang(d, work, log)
    # Done when every launch ended, or every rank that can has dumped (and a moment passed for
    # torch's own writer to finish): launches whose peer died may wait on one another for long.
    expected = WORLD - (1 if scenario == "exit" else 0)
    dumped_at = None
    while time.monotonic() - t0 < limit and any(p.poll() is None for p in procs):
        if dumped_at is None and len(list(d.glob(f"{PREFIX}*"))) >= expected:
            dumped_at = time.monotonic()
        if dumped_at is not None and time.monotonic() - dumped_at > 4.0:
            break
        time.sleep(0.1)
    for pid in [x for p in procs if p.poll() is None for x in (p.pid, *_descendants(p.pid))]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    codes = [p.wait() for p in procs]
    maps = sorted(d.glob("map.*"))
    (d / "ranks.map").write_text("".join(m.read_text() for m in maps))
    for m in maps:
        m.unlink()
    dumps = sorted(p.name for p in d.glob(f"{PREFIX}*"))
    log.append(f"{scenario}: launches {codes} in {time.monotonic() - t0:.1f} s, dumps {dumps}")


def _during_hang(d: Path, work: Path, log: list[str]) -> None:
    """While ranks wait in the stalled collective: RAS's verbose status (text, JSON) and NVML."""
    from topodoctor.job import ras

    deadline = time.monotonic() + 60
    while not (d / "entered").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    (work / "ras").mkdir(exist_ok=True)
    for fmt in ("text", "json"):
        t0 = time.monotonic()
        try:
            text = ras.query("localhost:28028", 12.0, fmt)  # type: ignore[arg-type]
            (work / "ras" / f"hang.{'txt' if fmt == 'text' else 'json'}").write_text(text)
            log.append(f"RAS {fmt}: {len(text)} chars in {time.monotonic() - t0:.2f} s")
        except (ras.RasUnavailable, Exception) as exc:
            log.append(f"RAS {fmt}: {type(exc).__name__}: {exc}")
    _sample(work, "hang", log)


def _sample(work: Path, name: str, log: list[str]) -> None:
    (work / "activity").mkdir(exist_ok=True)
    rec = work / "activity" / f"{name}.json"
    cmd = [sys.executable, "-m", "topodoctor", "job", "--live", "--live-seconds", "2", "--record-live", str(rec)]
    got = subprocess.run([*cmd, "--host", "gpu-host", "-f", "json"], capture_output=True, text=True, timeout=60)
    (work / "activity" / f"{name}.verdict.json").write_text(got.stdout + got.stderr)
    log.append(f"NVML sampling {name}: exit {got.returncode}, {got.stdout.splitlines()[5:6] if got.stdout else ''}")


def _judge(work: Path, log: list[str], nccl: bool) -> None:
    for s in SCENARIOS:
        d = work / s
        cmd = [sys.executable, "-m", "topodoctor", "job", str(d), "--map", str(d / "ranks.map"), "-f", "line"]
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        log.append(f"topodoctor job {s} (exit {got.returncode}): {got.stdout.strip()}{got.stderr.strip()}")
        if nccl:
            fr = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(d), "--prefix", PREFIX]
            got = subprocess.run(fr, capture_output=True, text=True, timeout=90)
            (work / s / "fr_trace.txt").write_text(f"exit {got.returncode}\n{got.stdout}\n{got.stderr}")


def _join(work: Path, log: list[str]) -> None:
    """The sleep scenario's culprit joined with a node's check result: the derived node with one
    NVLink down (fixtures/derived/x4-nvlink-down.json), its host renamed to the culprit's."""
    import json

    results = work / "results"
    results.mkdir(exist_ok=True)
    check = [
        sys.executable,
        "-m",
        "topodoctor",
        "check",
        "--replay",
        str(ROOT / "fixtures/derived/x4-nvlink-down.json"),
    ]
    got = subprocess.run([*check, "-f", "json"], capture_output=True, text=True, timeout=60)
    doc = json.loads(got.stdout)
    doc["host"] = "node1"
    (results / "node1.check.json").write_text(json.dumps(doc))
    d = work / "sleep"
    job = [sys.executable, "-m", "topodoctor", "job", str(d), "--map", str(d / "ranks.map"), "--results", str(results)]
    got = subprocess.run([*job, "-f", "line"], capture_output=True, text=True, timeout=60)
    log.append(f"topodoctor job sleep --results (exit {got.returncode}): {got.stdout.strip()}{got.stderr.strip()}")


def main() -> int:
    gloo = "--gloo" in sys.argv
    os.environ["PYTHONPATH"] = str(ROOT)  # the topodoctor of this checkout, in every process started
    out = Path(os.environ.get("OUT", "/tmp/topodoctor-job-capture"))
    work = Path("/tmp/job-capture")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log: list[str] = []
    backend, timeout_s = ("gloo", 3.0) if gloo else ("nccl", 10.0)
    for s in SCENARIOS:
        run_scenario(s, work, backend, 20.0 if s == "sleep" and not gloo else timeout_s, log)
        print(log[-1], flush=True)
    if not gloo:
        _sample(work, "idle", log)
    _judge(work, log, not gloo)
    _join(work, log)
    (work / "summary.txt").write_text("\n".join(log) + "\n")
    print("\n".join(log), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out / "job-capture.tgz", "w:gz") as tar:
        tar.add(work, arcname="job-capture")
    shutil.copy(work / "summary.txt", out / "summary.txt")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2], Path(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
    else:
        sys.exit(main())
