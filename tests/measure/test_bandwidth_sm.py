"""The `bandwidth` pass with the SM modes and the early start, on a stand-in copy timer that logs
what it is asked: the hello sent before the probe and kept (or the timer started again when the
GPUs differ), the SM answers mapped to measurements (the chase's nanoseconds as microseconds), SM
modes a timer cannot run reported as not measured, and the command line read for an early start
(the entry point's forked timer end to end: test_forked_timer.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from topodoctor.cli.commands import app, main
from topodoctor.cli.early import early_timer_modes
from topodoctor.measure.copies import worker as worker_module
from topodoctor.measure.copies.session import CopySettings, run
from topodoctor.measure.copies.worker import Worker, hello_extra
from topodoctor.probe.sources import probe_host
from topodoctor.service import early_copies
from topodoctor.topology.scope import SOURCES

runner = CliRunner()

TIMER = r"""
import json, os, sys, time
t_module = time.monotonic()
log = open(os.environ["TIMER_LOG"], "a")
BUS = {"GPU-00000000-0000-4000-8000-000000000000": "0000:00:06.0",
       "GPU-00000000-0000-4000-8000-000000000001": "0000:00:07.0"}
for line in sys.stdin:
    task = json.loads(line)
    log.write(line)
    log.flush()
    op = task["op"]
    if op == "hello":
        ids = list(BUS) if task["visible"] is None else [v for v in task["visible"].split(",") if v]
        devs = [{"ordinal": i, "bus_id": BUS[u], "name": "x"} for i, u in enumerate(ids)]
        missing = os.environ.get("TIMER_NO_KERNELS") or None
        answer = {"cuda": "13.0", "method": "fake", "devices": devs, "kernels_missing": missing,
                  "clock": {"module": t_module, "imports": t_module + 0.001, "ready": time.monotonic()},
                  "timings": {"cuda_init": 0.01}}
        if os.environ.get("TIMER_TORCH"):
            answer.pop("kernels_missing")
        print(json.dumps(answer), flush=True)
    elif op == "chase":
        print(json.dumps({"samples": [830.0, 828.0, 829.0], "verified": True, "timings": {"measurement": 0.01}}),
              flush=True)
    elif op == "sm_copy":
        rev = [338.0, 339.0] if task["bidir"] else None
        print(json.dumps({"samples": [376.0, 376.2], "reverse": rev, "verified": True, "runs_on": [task["dst"]],
                          "timings": {"measurement": 0.01}}), flush=True)
    elif op == "latency":
        res = [{"dst": d, "samples": [2.2, 2.3], "path": "p2p", "verified": None} for d in task["dsts"]]
        print(json.dumps({"results": res, "timings": {"measurement": 0.001}}), flush=True)
    else:
        print(json.dumps({"samples": [390.0, 391.0], "reverse": [389.0, 390.0] if task.get("mode") == "bidir" else None,
                          "path": "host" if op == "host" else "p2p", "verified": True,
                          "timings": {"measurement": 0.002}}), flush=True)
"""


@pytest.fixture
def timer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    script = tmp_path / "timer.py"
    script.write_text(TIMER)
    log = tmp_path / "tasks.jsonl"
    monkeypatch.setenv("TIMER_LOG", str(log))
    for name in SOURCES:
        monkeypatch.delenv(name, raising=False)
    return [sys.executable, str(script)], log


def _tasks(log: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(x) for x in log.read_text().splitlines()]


SM = CopySettings(modes=("sm_oneway", "sm_bidir", "sm_latency"))


def test_the_sm_modes_measure_every_pair(timer: tuple[list[str], Path]) -> None:
    cmd, log = timer
    result = run(probe_host("h100-x2").snapshot, SM, worker_cmd=cmd)
    got = {(m.mode, m.src, m.dst): m for m in result.measurements}
    assert set(got) == {("sm_oneway", 0, 1), ("sm_oneway", 1, 0), ("sm_bidir", 0, 1), ("sm_latency", 0, 1),
                        ("sm_latency", 1, 0)}  # fmt: skip
    lat = got[("sm_latency", 0, 1)]
    assert lat.value is not None and lat.value.median == pytest.approx(0.829) and lat.path == "p2p"
    both = got[("sm_bidir", 0, 1)]
    assert both.reverse is not None and both.reverse.median == pytest.approx(338.5) and both.verified
    hello = _tasks(log)[0]
    assert hello["kernels"] is True and hello["peers"] is True and "copy_kernel" not in hello


@pytest.mark.slow  # subprocesses (or the PTX simulator) for 0.3 s or more
def test_a_timer_without_kernels_leaves_the_sm_modes_not_measured(
    timer: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cmd, log = timer
    monkeypatch.setenv("TIMER_NO_KERNELS", "SM kernels unavailable: the driver's PTX JIT is missing")
    settings = CopySettings(modes=("oneway", "sm_oneway", "sm_latency"))
    result = run(probe_host("h100-x2").snapshot, settings, worker_cmd=cmd)
    sm = [m for m in result.measurements if m.mode.startswith("sm_")]
    assert len(sm) == 4 and all(m.skipped and "PTX JIT" in m.skipped and m.error is None for m in sm)
    assert [t["op"] for t in _tasks(log)] == ["hello", "p2p", "p2p"]  # never asked
    doc = json.loads(runner.invoke(app, ["bandwidth", "--from", _save(result, log.parent), "-f", "json"]).stdout)
    assert doc["findings"] == [] and doc["not_measured"] == [f"sm-{m}: {sm[0].skipped}" for m in ("oneway", "latency")]
    monkeypatch.delenv("TIMER_NO_KERNELS")
    monkeypatch.setenv("TIMER_TORCH", "1")  # the torch timer runs no kernels either
    result = run(probe_host("h100-x2").snapshot, settings, worker_cmd=cmd)
    assert all("torch timer" in str(m.skipped) for m in result.measurements if m.mode.startswith("sm_"))


def _save(result: object, where: Path) -> str:
    from topodoctor.model.copies import result_to_json

    path = where / "result.json"
    path.write_text(result_to_json(result))  # type: ignore[arg-type]
    return str(path)


def test_an_early_hello_for_every_gpu_is_kept(timer: tuple[list[str], Path]) -> None:
    cmd, log = timer
    w = Worker(cmd, 20.0, peers=True, extra=hello_extra())
    w.hello_now()
    result = run(probe_host("h100-x2").snapshot, CopySettings(modes=("oneway",)), worker=w)
    tasks = _tasks(log)
    assert [t["op"] for t in tasks] == ["hello", "p2p", "p2p"] and tasks[0]["visible"] is None
    assert w.restarts == 0 and [g.index for g in result.gpus] == [0, 1]


def test_an_early_hello_for_other_gpus_starts_the_timer_again(
    timer: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cmd, log = timer
    w = Worker(cmd, 20.0, peers=True, extra=hello_extra())
    w.hello_now()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the job's GPU, known only once probed
    result = run(probe_host("h100-x2").snapshot, CopySettings(modes=("h2d",)), worker=w)
    # the first child may be killed before it logs its hello: the one that measured was told GPU1 alone
    hellos = [t for t in _tasks(log) if t["op"] == "hello"]
    assert hellos[-1]["visible"] == "GPU-00000000-0000-4000-8000-000000000001" and len(hellos) <= 2
    assert [g.index for g in result.gpus] == [1] and w.sent is None


def test_the_pass_lets_the_timer_go_without_waiting(timer: tuple[list[str], Path]) -> None:
    cmd, _ = timer
    w = Worker(cmd, 20.0)
    run(probe_host("h100-x2").snapshot, CopySettings(modes=("h2d",)), worker=w)
    assert w.proc is None
    # a child that would take its time to end: released at once, killed all the same
    slow = Worker(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"],
        5.0,
    )
    slow.spawn()
    proc = slow.proc
    assert proc is not None
    t0 = time.monotonic()
    slow.release()
    assert time.monotonic() - t0 < 1.0 and slow.proc is None
    assert proc.wait(timeout=10) == -9  # SIGKILL
    worker_module._released.clear()


@pytest.mark.parametrize(
    ("args", "modes"),
    [
        ([], ()),
        (["-m", "sm", "--mode=host", "-f", "json"], ("sm", "host")),
        (["--quick", "--timeout", "30", "--no-matrix", "-o", "r.json"], ()),
        (["--devices", "0"], None),  # narrows the GPUs: the hello waits for the probe
        (["--from", "r.json"], None),
        (["--replay", "h100-x2"], None),
        (["--timeout", "0"], None),
        (["--timeout", "0.00"], None),
        (["-h"], None),
        (["--mode"], None),
        (["--mode", "bogus"], None),
        (["--sm-kernel", "stride-u4"], None),
    ],
)
def test_which_command_lines_start_the_timer_early(args: list[str], modes: tuple[str, ...] | None) -> None:
    """Read by bandwidth's options spec before anything else loads (cli/early.py)."""
    assert early_timer_modes(["bandwidth", *args]) == modes


def test_the_scope_variables_are_the_scope_s() -> None:
    assert early_copies.SCOPE_VARIABLES == SOURCES


def test_a_pass_whose_every_copy_could_not_run_is_could_not_check(
    timer: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cmd, log = timer
    monkeypatch.setenv("TIMER_NO_KERNELS", "SM kernels unavailable: the driver cannot compile PTX for this GPU")
    result = run(probe_host("h100-x2").snapshot, SM, worker_cmd=cmd)
    assert main(["bandwidth", "--from", _save(result, log.parent)]) == 3
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("COULD NOT CHECK: no findings; 0 measurements on 2 GPUs") and "SM modes not measured" in last
