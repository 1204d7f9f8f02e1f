"""The real runner on the gloo backend: local ranks spawned by topodoctor, ranks joining a world
made by a launcher (the environment torchrun sets), hangs cut by their timeout, faults from the
worker's documented test hook (TOPODOCTOR_COLL_FAULT). Small sizes: each run is a few seconds,
most of it torch's import in the ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from collectives_support import time_limit
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.core.errors import EXIT_CANNOT_CHECK
from topodoctor.measure.collectives.assemble import CollectivesUnavailable, build_result
from topodoctor.measure.collectives.launch import measure, spawn
from topodoctor.measure.collectives.world import free_port
from topodoctor.model.collective_ops import SPECS, Plan
from topodoctor.model.collectives import load_result
from topodoctor.probe.sources import probe_host
from topodoctor.service.collectives import judge

pytest.importorskip("torch")
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int, grace_s: float = 2.0) -> bool:
    """The process no longer runs (a zombie is gone too). A SIGKILLed process on a loaded
    machine can take a moment to leave the kernel: allow it ``grace_s``."""
    end = time.monotonic() + grace_s
    while True:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.02)


@pytest.mark.slow
def test_three_ranks_every_op_through_the_command(tmp_path: Path) -> None:
    out = tmp_path / "coll.json"
    args = ["collectives", "--backend", "gloo", "--nprocs", "3", "--size", "1K,64K", "--iters", "2"]
    with time_limit(60):
        r = runner.invoke(app, [*args, "--replay", "h200-x2", "--format", "json", "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "collectives" and doc["schema_version"] == 1 and doc["world_size"] == 3
    rows = doc["rows"]
    assert {row["op"] for row in rows} == set(SPECS)
    for row in rows:
        for place, key in (("out", "out_of_place"), ("in", "in_place")):
            col = row[key]
            assert (col is not None) == (place in SPECS[row["op"]].places)
            if col is None:
                continue
            assert col["wrong"] == 0 and col["rank_wrong"] == [0, 0, 0]
            assert len(col["rank_time_us"]) == 3 and col["time_us"] > 0
            assert col["busbw_gbps"] == pytest.approx(col["algbw_gbps"] * SPECS[row["op"]].bus_factor(3), rel=1e-3)
    gathered = next(row for row in rows if row["op"] == "all_gather" and row["count"] == 5460)
    assert gathered["size_bytes"] == 65520  # 3 ranks: the chunk rounds down to 16 bytes
    assert doc["findings"] == [] and doc["account"].startswith("Backend gloo")
    # the saved result reads back, and renders as nccl-tests' table
    assert load_result(out).rows[0].op == "all_reduce"
    shown = runner.invoke(app, ["collectives", "--from", str(out)])
    assert shown.exit_code == 0 and "#wrong" in shown.stdout and "(elements)" in shown.stdout


@pytest.mark.slow
def test_faults_wrong_data_slow_rank_and_a_hang_in_one_run() -> None:
    """Rank 1 corrupts all_reduce and lags; then it never joins all_gather: the hang is cut by
    the op timeout, named, every rank is killed, and what finished before is kept."""
    env = {"TOPODOCTOR_COLL_FAULT": "corrupt:1:all_reduce,slow:1:40,hang:1:all_gather:2097152"}
    plan = Plan(ops=("all_reduce", "all_gather"), sizes=(2 << 20,), iters=2, backend="gloo", op_timeout_s=5)
    with time_limit(60):
        got = spawn(plan, 2, _tmp(), extra_env=env)
    assert all(_gone(pid) for pid in got.pids)
    (f,) = got.failures
    assert (f.kind, f.op, f.size_bytes, f.rank) == ("hang", "all_gather", 2 << 20, 1)
    assert "rank 1 never reached it" in f.message
    res = build_result(got, plan, 1.0, None)
    assert [r.op for r in res.rows] == ["all_reduce"]
    ar = res.rows[0].in_place
    assert ar is not None and ar.wrong == 1 and ar.rank_wrong == (0, 1)
    times = ar.rank_time_us  # rank 1 finished its loop 40 ms late: 20 ms per op over 2 iterations
    assert times[1] - times[0] > 15_000
    codes = {(f.code, f.subject) for f in judge(res, probe_host("h200-x2").snapshot)}
    assert codes == {("TD004", "rank1"), ("TD005", "rank1")}  # rank speed is judged on NCCL only


def test_missing_torch_is_one_line_exit_3() -> None:
    fake = [sys.executable, "-c", "raise ModuleNotFoundError(\"No module named 'torch'\")"]
    with time_limit(30), pytest.raises(CollectivesUnavailable, match="torch is not installed") as err:
        measure(Plan(backend="gloo", sizes=(8,)), 2, cmd=fake)
    assert err.value.exit_code == EXIT_CANNOT_CHECK


@pytest.mark.slow
def test_nccl_without_gpus_cannot_check() -> None:
    args = ["collectives", "--nprocs", "2", "--size", "8", "--op", "all_reduce", "--replay", "h200-x2"]
    with time_limit(60):
        r = runner.invoke(app, args)
    assert r.exit_code == EXIT_CANNOT_CHECK
    assert r.stderr.startswith("topodoctor: error: collectives could not start:") and r.stderr.count("\n") == 1


@pytest.mark.slow
def test_ranks_join_a_world_made_by_a_launcher(tmp_path: Path) -> None:
    """Two processes with the variables torchrun sets: each joins as one rank; rank 0 reports."""
    port = free_port()
    cmd = [sys.executable, "-m", "topodoctor", "collectives", "--backend", "gloo", "--op", "all_reduce,sendrecv"]
    cmd += ["--size", "4K", "--iters", "2", "--format", "json", "--replay", "h200-x2"]
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2")
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONPATH=str(ROOT))
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    doc = json.loads(outs[0][0])
    assert doc["world_size"] == 2 and [r["op"] for r in doc["rows"]] == ["all_reduce", "sendrecv"]
    assert outs[1][0] == ""  # the other ranks stay quiet


def _tmp() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="td-coll-test-")


@pytest.mark.slow
def test_quick_pass_for_check_within_its_deadline() -> None:
    """The pass `check --collectives` runs (on gloo here): started before the probe, finished
    within the check's deadline, handed to the rules through the context as plain data."""
    import time

    from topodoctor.probe.environment import capture_environment
    from topodoctor.rules import Context, evaluate
    from topodoctor.service.collectives import QuickPass, attach, visible_gpus

    deadline = time.monotonic() + 50
    with time_limit(60):
        qp = QuickPass.start(2, deadline, size_bytes=1 << 20, backend="gloo")
        snap = probe_host("h200-x2").snapshot  # the probe runs while the ranks start
        assert visible_gpus(snap) == 2
        answer = json.loads(json.dumps(qp.answer(snap, deadline)))  # through the child's pipe
    ctx = Context(snap, capture_environment({}))
    attach(ctx, answer)
    res = ctx.collectives
    assert res is not None
    assert [r.op for r in res.rows] == ["all_reduce", "sendrecv"] and res.world_size == 2
    assert res.snapshot is None and not res.failures
    assert [f.code for f in _findings(evaluate(ctx, select=["TD0", "TD901"]))] == []
    # a pass that could not run is a could-not-check finding, never a silent pass
    ctx = Context(snap, capture_environment({}))
    attach(ctx, {"error": "torch is not installed"})
    (f,) = _findings(evaluate(ctx, select=["TD0", "TD901"]))
    assert f.code == "TD901" and "torch is not installed" in f.message


def _findings(out: Any) -> list[Any]:
    return list(getattr(out, "findings", out))


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_sigterm_takes_the_ranks_along(tmp_path: Path, sig: str) -> None:
    """A scheduler ending a prolog sends SIGTERM (a user Ctrl-C): the ranks (sessions of their
    own) die with it, and the command ends as every command does on that signal."""
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=str(ROOT), TOPODOCTOR_COLL_FAULT="hang:1:all_reduce:1024")
    cmd = [sys.executable, "-m", "topodoctor", "collectives", "--backend", "gloo", "--op", "all_reduce"]
    cmd += ["--size", "1K", "--op-timeout", "60", "--log-dir", str(tmp_path)]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        children: list[int] = []
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and len(children) < 2:
            time.sleep(0.2)
            children = _children(p.pid)
        assert len(children) == 2
        time.sleep(1.0)
        p.send_signal(signal.Signals[sig])
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 128 + signal.Signals[sig] and err == f"topodoctor: error: terminated by {sig}\n", err
    assert all(_gone(pid) for pid in children)


def _children(pid: int) -> list[int]:
    """The live children of ``pid``: an answered probe child that has exited is reaped only at
    the command's end (core/budget.py ``end_children``), and a zombie is not a rank."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == pid and state != "Z":
                out.append(int(d.name))
    return out


@pytest.mark.slow
def test_check_with_the_collectives_pass() -> None:
    """`check --collectives` end to end on gloo: the ranks start before the probe, in the check's
    budgeted child; their result reaches the TD0xx rules; a pass that cannot run is not checked."""
    from topodoctor.core.budget import Budget
    from topodoctor.service import check as doctor
    from topodoctor.service.collectives import check_pass

    def run(nprocs: int) -> doctor.CheckOutcome:
        passes = (check_pass("gloo", nprocs, size_bytes=1 << 20),)
        opts = doctor.CheckRequest(replay="h200-x2", timeout=50, select=("TD0", "TD901"))
        with time_limit(60):
            return doctor.check(opts, passes=passes)

    out = run(2)
    assert out.meta.measured == ("collectives",) and out.exit_code == 0
    assert [f.code for f in out.findings] == [] and out.incomplete == ()
    with time_limit(60):  # what the rules were given: the measured rows, through the child's pipe
        host = doctor.probe(doctor.Source("h200-x2"), Budget.start(50), (check_pass("gloo", 2, 1 << 20),))
    got = host.measured["collectives"].result
    assert [r.op for r in got.rows] == ["all_reduce", "sendrecv"] and got.rows[0].best.wrong == 0
    out = run(1)
    assert out.exit_code == 3 and [f.code for f in out.incomplete] == ["TD901"]  # asked for, not measured
    assert "at least 2" in out.incomplete[0].message
