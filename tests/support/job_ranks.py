"""Real gloo process groups that fail the ways jobs fail, each rank dumping its own flight recorder.

    python tests/support/job_ranks.py OUTDIR [SCENARIO...]

writes, per scenario, OUTDIR/SCENARIO/nccl_trace_rank_<rank> (torch's pickle, as
TORCH_FR_DUMP_TEMP_FILE names it), OUTDIR/SCENARIO/json/rank<rank>.json (the JSON form of the
same recorder) and OUTDIR/SCENARIO/ranks.map (each rank's line, as docs/job.md's one-liner writes it)
for a world of WORLD ranks. torch is imported once; the ranks of a scenario are forked from this
process, so a scenario costs its own run time, not three interpreter start-ups. Each rank is
bounded (the group's timeout, then a hard alarm); the parent kills what outlives its deadline.

Scenarios (the culprit is named in CULPRIT):
- sleep: rank 1 sleeps past the group's timeout before the 4th collective (CPU side stalled);
- exit: rank 2 exits before the 4th collective (no dump, like a dead process);
- op: rank 2 runs all_gather where ranks 0 and 1 run all_reduce;
- size: rank 1 passes a quarter of the elements to all_reduce;
- late: rank 2 enters every collective 30 ms late (no hang);
- late-once: rank 2 enters one collective after its peers' timeout (they time out and dump), the
  others on time;
- healthy: nothing wrong (the missing-dump case deletes one of its dumps).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

WORLD = 3
TIMEOUT_S = 3.0  # the group's timeout where a rank stalls: peers give up and dump after it
# Where nothing stalls, and for the rendezvous and the warm-up of every scenario: a loaded machine
# may take seconds to bring three ranks together, which must not time the group out before the
# part a scenario stages (the short timeout is set only once every rank has been in the group).
RUN_TIMEOUT_S = 60.0
WARMUP = 3
LATE_S = 0.030
LATE_OPS = 20
SCENARIOS = ("sleep", "exit", "op", "size", "late", "late-once", "healthy")
CULPRIT = {"sleep": 1, "exit": 2, "op": 2, "size": 1, "late": 2, "late-once": 2, "healthy": None}


def _dump(out: Path, rank: int) -> None:
    import torch

    data = torch._C._distributed_c10d._dump_fr_trace(True, True, False)
    tmp = out / f".nccl_trace_rank_{rank}.tmp"
    tmp.write_bytes(data)
    tmp.replace(out / f"nccl_trace_rank_{rank}")
    # The JSON form of the same recorder (what _dump_fr_trace_json hands a caller), beside it.
    (out / "json").mkdir(exist_ok=True)
    text = torch._C._distributed_c10d._dump_fr_trace_json(True, True)
    (out / "json" / f"rank{rank}.json").write_bytes(text if isinstance(text, bytes) else text.encode())


def _timeout(scenario: str) -> float:
    return RUN_TIMEOUT_S if scenario in ("late", "healthy") else TIMEOUT_S


def _rank(scenario: str, out: Path, rank: int) -> None:
    import torch
    import torch.distributed as dist

    timeout = _timeout(scenario)
    signal.alarm(int(RUN_TIMEOUT_S + timeout * 4) + 5)  # nothing here may outlive the scenario
    # The map line a job writes (docs/job.md): rank, host, local rank, GPU; hosts are made up,
    # one per rank, as on a real multi-node job.
    (out / f"map.{rank}").write_text(f"{rank} node{rank:02d} 0 -\n")
    dist.init_process_group(
        "gloo",
        init_method=f"file://{out}/store",
        rank=rank,
        world_size=WORLD,
        timeout=timedelta(seconds=RUN_TIMEOUT_S),
    )
    t = torch.ones(4)
    for _ in range(WARMUP):
        dist.all_reduce(t)
    # Every rank has reached the warm-up's last collective: from here the scenario's own timeout.
    dist.distributed_c10d._set_pg_timeout(timedelta(seconds=timeout))
    culprit = CULPRIT[scenario] == rank
    try:
        if scenario == "sleep" and culprit:
            time.sleep(timeout * 1.25)  # its peers time out meanwhile; a watchdog would dump now
            return
        if scenario == "exit" and culprit:
            os._exit(1)
        if scenario in ("op", "size"):
            if scenario == "op" and culprit:
                work = dist.all_gather([torch.zeros(4) for _ in range(WORLD)], t, async_op=True)
            elif scenario == "size" and culprit:
                work = dist.all_reduce(torch.ones(1), async_op=True)
            else:
                work = dist.all_reduce(t, async_op=True)
            # gloo may abort a process whose peer sent more bytes than it expects (it cannot be
            # caught): the recorder is dumped once the op is enqueued, and again at the end.
            _dump(out, rank)
            work.wait()
        elif scenario == "late":
            for _ in range(LATE_OPS):
                if culprit:
                    time.sleep(LATE_S)
                dist.all_reduce(t)
        elif scenario == "late-once":
            for i in range(LATE_OPS):
                if culprit and i == LATE_OPS // 2:
                    time.sleep(timeout * 1.25)  # once, past the peers' timeout
                dist.all_reduce(t)
        else:
            dist.all_reduce(t)
        dist.barrier()
    except Exception as exc:  # a peer's timeout or error: what a job's dump-on-timeout records
        print(f"rank {rank}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
    finally:
        _dump(out, rank)


def run(outdir: Path, scenarios: tuple[str, ...] = SCENARIOS) -> None:
    """Every scenario's dumps and map under ``outdir``."""
    import torch  # noqa: F401  (imported once here, before the ranks are forked)

    for scenario in scenarios:
        out = outdir / scenario
        out.mkdir(parents=True, exist_ok=True)
        pids = []
        for rank in range(WORLD):
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    _rank(scenario, out, rank)
                except BaseException as exc:
                    print(f"rank {rank} of {scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    code = 1
                finally:
                    os._exit(code)
            pids.append(pid)
        deadline = time.monotonic() + RUN_TIMEOUT_S + _timeout(scenario) * 5 + 10
        for pid in pids:
            while time.monotonic() < deadline:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        maps = sorted(out.glob("map.*"))
        (out / "ranks.map").write_text("".join(m.read_text() for m in maps))
        for m in maps:
            m.unlink()
        (out / "store").unlink(missing_ok=True)


if __name__ == "__main__":
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    run(Path(sys.argv[1]), tuple(sys.argv[2:]) or SCENARIOS)
