"""Starting the ranks and keeping them honest: local spawn under hard timeouts, or joining a
launcher's world. No torch here (the ranks import it, each in its own process).

A spawned run is one process per rank, each in its own session so that the whole group can
be killed. The parent reads every rank's events; when a rank does not join within the start
timeout, an op outlives its timeout, or a rank dies, every rank is killed and the failure is
reported with the op and size it hit. What finished before stays in the result.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topodoctor.core import codec
from topodoctor.core.text import human_size, noun
from topodoctor.measure.collectives.assemble import Collected, CollectivesUnavailable, build_result
from topodoctor.measure.collectives.loopback import nic_loopback
from topodoctor.measure.collectives.nodes import NodeSettings
from topodoctor.measure.collectives.world import World, local_worlds
from topodoctor.model.collective_ops import Plan
from topodoctor.model.collectives import (
    CollectivesResult,
    Failure,
)
from topodoctor.model.copies import Activity
from topodoctor.model.snapshot import HostSnapshot

_PR_SET_PDEATHSIG = 1
HANG_GRACE_S = 10.0  # past a rank's own watchdog, before the parent kills the group itself
STDERR_TAIL = 4096


def child_environment(base: dict[str, str], world: World, plan: Plan, log_dir: str) -> dict[str, str]:
    """A spawned rank's environment: ``base`` with the world's rendezvous variables, the plan and the
    log directory."""
    env = dict(base)
    env.update(world.env())
    env.update(
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
        PYTHONUNBUFFERED="1",
        TOPODOCTOR_COLL_PLAN=json.dumps(codec.to_jsonable(plan)),
        TOPODOCTOR_COLL_LOGDIR=log_dir,
    )
    # NVLink multicast stays off unless the user set it on: the rank sets that itself
    # (guard.nccl_environment), before NCCL starts, in a launcher's world too.
    return env


def worker_cmd() -> list[str]:
    """The command line of a spawned rank (this Python, the rank's module)."""
    return [sys.executable, "-m", "topodoctor.measure.collectives.rank.main"]


@dataclass
class _Rank:
    world: World
    proc: subprocess.Popen[bytes]
    err_path: Path
    buf: bytes = b""
    ready: bool = False
    done: bool = False
    current: tuple[str, int, float] | None = None  # op, size, when it began (parent's clock)
    last_op: tuple[str, int] | None = None
    seen: float = field(default_factory=time.monotonic)  # when it last said anything


def _stderr_tail(r: _Rank) -> str:
    try:
        with open(r.err_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - STDERR_TAIL))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    keep = [ln for ln in lines if ln.strip() and not ln.startswith(("W1", "I1", "[W", "[I"))]
    return (keep or lines or [""])[-1].strip()[:240]


def _kill_all(ranks: list[_Rank]) -> None:
    for r in ranks:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(r.proc.pid, signal.SIGKILL)
    for r in ranks:
        # One stuck in the kernel (a wedged driver call) is left behind: nothing more we can do.
        with contextlib.suppress(subprocess.TimeoutExpired):
            r.proc.wait(timeout=10)


@dataclass
class Running:
    """Local ranks started and not yet watched: they import torch and start CUDA while the caller
    does other work (the probe). ``finish`` watches them to the end; ``stop`` kills them."""

    plan: Plan
    log_dir: str
    ranks: list[_Rank] = field(default_factory=list)
    got: Collected = field(default_factory=Collected)
    t0: float = field(default_factory=time.monotonic)

    def finish(
        self,
        start_timeout_s: float = 120.0,
        deadline: float | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> Collected:
        """Wait for every rank's rows and failures, within the start timeout and the deadline, then kill
        what is left; SIGTERM meanwhile kills the ranks with us."""
        # A prolog killed by its scheduler gets SIGTERM first: the ranks go with us, not after us.
        # (Killed outright, the ranks end by themselves: at their next event the pipe is gone,
        # and a rank stuck in an op has its watchdog.)
        # A handler already in place (the CLI's: "terminated by SIGTERM", exit 143) is kept.
        main = threading.current_thread() is threading.main_thread()
        main = main and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)
        old = signal.signal(signal.SIGTERM, _terminated) if main else None
        try:
            _watch(self.ranks, self.plan, self.got, self.t0, start_timeout_s, deadline, progress)
        finally:
            self.stop()
            if main:
                signal.signal(signal.SIGTERM, old)
        return self.got

    def stop(self) -> None:
        """Kill every rank's process group."""
        _kill_all(self.ranks)


def _terminated(signum: int, frame: object) -> None:
    raise CollectivesUnavailable("terminated (SIGTERM): all ranks killed")


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """The kernel sends ``sig`` to this process when the one that started it dies: in a spawned
    rank, before exec (a check's budgeted child killed at its deadline); in a rank of a
    launcher's world, the launcher's agent killed (SIGTERM: this rank still says why). No rank
    outlives its caller on a GPU."""
    import ctypes

    parent = os.getppid()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:  # it died before the request took: nobody will send the signal
        os.kill(os.getpid(), sig)


def start(
    plan: Plan, nprocs: int, log_dir: str, cmd: list[str] | None = None, extra_env: dict[str, str] | None = None
) -> Running:
    """Start ``nprocs`` local ranks of ``plan``, each a process session of its own."""
    run = Running(plan, log_dir)
    base = dict(os.environ, **(extra_env or {}))
    try:
        for w in local_worlds(nprocs):
            err_path = Path(log_dir) / f"rank{w.rank}.stderr"
            with open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    cmd or worker_cmd(),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    env=child_environment(base, w, plan, log_dir),
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
            run.ranks.append(_Rank(w, proc, err_path))
            run.got.pids.append(proc.pid)
    except BaseException:
        run.stop()
        raise
    return run


def spawn(
    plan: Plan,
    nprocs: int,
    log_dir: str,
    start_timeout_s: float = 120.0,
    deadline: float | None = None,
    cmd: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Collected:
    """Run ``plan`` on ``nprocs`` local ranks; never outlives its timeouts."""
    return start(plan, nprocs, log_dir, cmd, extra_env).finish(start_timeout_s, deadline, progress)


def _fail(got: Collected, kind: str, op: str | None, size: int | None, msg: str, rank: int | None) -> None:
    got.failures.append(Failure(kind, op, size, msg, rank))  # type: ignore[arg-type]


def _watch(
    ranks: list[_Rank],
    plan: Plan,
    got: Collected,
    t0: float,
    start_timeout_s: float,
    deadline: float | None,
    progress: Callable[[str], None] | None,
) -> None:
    by_fd = {r.proc.stdout.fileno(): r for r in ranks if r.proc.stdout is not None}
    op_limit = plan.op_timeout_s + HANG_GRACE_S
    while True:
        now = time.monotonic()
        if all(r.done for r in ranks):
            return
        if not all(r.ready for r in ranks) and now - t0 > start_timeout_s:
            late = [r.world.rank for r in ranks if not r.ready]
            why = f"{noun(len(late), 'rank')} {_ranks(late)} did not join within {start_timeout_s:g} s"
            _fail(got, "join", None, None, why, late[0])
            return
        stuck = [r for r in ranks if r.current and now - r.current[2] > op_limit]
        if stuck:
            r = min(stuck, key=lambda x: x.current[2] if x.current else 0.0)
            assert r.current is not None
            _hang(got, ranks, r.current[0], r.current[1], plan.op_timeout_s)
            return
        if all(r.ready for r in ranks) and now - max(r.seen for r in ranks) > op_limit:
            # between ops, or tearing down: nobody has said anything for longer than an op may take
            _fail(got, "hang", None, None, f"no rank reported for {op_limit:g} s (between ops); all ranks killed", None)
            return
        if deadline is not None and now > deadline:
            _fail(got, "hang", None, None, "the time budget ran out; all ranks killed", None)
            return
        ready, _, _ = select.select(list(by_fd), [], [], 0.2)
        for fd in ready:
            r = by_fd[fd]
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                del by_fd[fd]
                continue
            r.buf += chunk
            r.seen = time.monotonic()
            *lines, r.buf = r.buf.split(b"\n")
            for line in lines:
                got.timeline.append((round(r.seen - t0, 4), r.world.rank, line[:40].decode("utf-8", "replace")))
                stop = _event(r, line, got, progress)
                if stop is not None:
                    if stop.get("ev") == "hang" or "timed out" in str(stop.get("message", "")).lower():
                        op, size = (stop.get("op"), stop.get("size")) if stop.get("ev") == "hang" else (None, None)
                        if op is None and r.current:
                            op, size = r.current[:2]
                        _hang(got, ranks, op, size, plan.op_timeout_s)
                    else:
                        op, size = (stop["op"], stop.get("size_bytes")) if stop.get("op") else _at(r)
                        rank = stop["rank"] if isinstance(stop.get("rank"), int) else r.world.rank
                        _fail(got, stop.get("kind", "error"), op, size, str(stop.get("message", "")), rank)
                    return
        for r in ranks:
            rc = r.proc.poll()
            if rc is not None and not r.done and r.proc.stdout is not None and r.proc.stdout.fileno() not in by_fd:
                tail = _stderr_tail(r)
                if "No module named 'torch'" in tail:
                    raise CollectivesUnavailable("torch is not installed: pip install 'topodoctor[bandwidth]'")
                _fail(got, "died", *_at(r), f"rank {r.world.rank} exited with code {rc}: {tail}", r.world.rank)
                return


def _at(r: _Rank) -> tuple[str | None, int | None]:
    return (r.current[0], r.current[1]) if r.current else (None, None)


def _hang(got: Collected, ranks: list[_Rank], op: str | None, size: int | None, timeout_s: float) -> None:
    """One failure for a hung op, naming the ranks that never reached it."""
    absent = [r.world.rank for r in ranks if op is not None and r.last_op != (op, size)]
    what = "setting up the buffers" if op == "setup" else f"{op} at {human_size(size or 0)}"
    msg = f"{what} did not finish within {timeout_s:g} s"
    if absent:
        msg += f"; {noun(len(absent), 'rank')} {_ranks(absent)} never reached it"
    _fail(got, "hang", op, size, msg + "; all ranks killed", absent[0] if len(absent) == 1 else None)


def _event(r: _Rank, line: bytes, got: Collected, progress: Callable[[str], None] | None) -> dict[str, Any] | None:
    """Take one event; the event itself when the run cannot go on."""
    try:
        ev = json.loads(line)
    except ValueError:
        return None  # a stray print from a library: not ours
    if not isinstance(ev, dict):
        return None
    kind = ev.get("ev")
    if kind == "ready":
        r.ready = True
    elif kind == "meta":
        got.meta = {**ev, **{k: v for k, v in got.meta.items() if k not in ev}}
    elif kind == "note":  # what a rank learnt after its meta went out (a library's version)
        got.meta.update({k: v for k, v in ev.items() if k != "ev"})
    elif kind == "begin":
        r.current = (str(ev["op"]), int(ev["size"]), time.monotonic())
        r.last_op = (str(ev["op"]), int(ev["size"]))
        if progress and r.world.rank == 0:
            progress(f"{ev['op']} {human_size(int(ev['size']))}")
    elif kind == "end":
        r.current = None
    elif kind == "row":
        got.rows.append(ev["row"])
    elif kind == "failure":
        _fail(got, ev["kind"], ev.get("op"), ev.get("size_bytes"), str(ev.get("message", "")), r.world.rank)
    elif kind in ("done", "finished"):
        # "finished": the rank has measured and said everything; its teardown (NCCL's, torch's,
        # the interpreter's) is seconds nobody needs, so the parent kills it instead of waiting.
        r.done = True
    elif kind in ("hang", "fail"):
        return ev
    return None


def measure(
    plan: Plan,
    nprocs: int,
    snapshot: HostSnapshot | None = None,
    activity: tuple[Activity, ...] = (),
    deadline: float | None = None,
    start_timeout_s: float = 120.0,
    cmd: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    log_dir: str | None = None,
) -> CollectivesResult:
    """Spawn ``nprocs`` local ranks, run ``plan``, and return the result (failures included).
    NCCL's per-rank logs (and each rank's stderr) stay in ``log_dir`` when one is given."""
    if nprocs < 2:
        raise CollectivesUnavailable(f"collectives need at least 2 ranks; {nprocs} to run (GPUs visible, --nprocs)")
    t0 = time.monotonic()
    if log_dir is not None:
        got = spawn(plan, nprocs, log_dir, start_timeout_s, deadline, cmd, extra_env, progress)
        return build_result(got, plan, time.monotonic() - t0, log_dir, activity, snapshot)
    with tempfile.TemporaryDirectory(prefix="topodoctor-coll-") as tmp:
        got = spawn(plan, nprocs, tmp, start_timeout_s, deadline, cmd, extra_env, progress)
        return build_result(got, plan, time.monotonic() - t0, tmp, activity, snapshot)


def join(
    plan: Plan,
    world: World,
    log_dir: str | None = None,
    nodes: NodeSettings | None = None,
    deadline: float | None = None,
) -> CollectivesResult | None:
    """Run as one rank of a launcher's world (torchrun, srun), in this process; rank 0 gets
    the result, the others None. The launcher kills the world when a rank exits on a hang.
    The group stays up: the ranks agree on one exit code and tear it down (worker_exit)."""
    from topodoctor.measure.collectives.rank.main import run_rank  # torch: this process becomes a rank

    die_with_parent(signal.SIGTERM)
    t0 = time.monotonic()
    own = log_dir or tempfile.mkdtemp(prefix=f"topodoctor-coll-{world.rank}-")
    got = Collected()

    def emit(ev: dict[str, Any]) -> None:
        if ev.get("ev") in ("failure", "fail", "hang") and world.rank == 0 and "kind" in ev:
            _fail(got, ev["kind"], ev.get("op"), ev.get("size_bytes"), str(ev.get("message", "")), ev.get("rank", 0))

    if nodes is not None and nodes.nic_loopback and world.local_rank == 0:
        from dataclasses import replace

        # Before joining: the world's ranks wait for this one up to their init timeout.
        nodes = replace(nodes, loopback=nic_loopback(plan, world, plan.op_timeout_s, measure))
    raw = run_rank(plan, world, emit, own, nodes, keep=True, deadline=deadline)
    if raw is None:
        return None
    got.meta, got.rows = raw, list(raw["rows"])
    return build_result(got, plan, time.monotonic() - t0, own)


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))
