"""The copy timer forked from the entry point (measure/copies/forked.py), on the stand-in libcuda of
test_pair_timer.py, which the fork inherits from this process: it answers the hello it was given at
the fork without reading it, makes the pass's buffers ahead (``prepare``), measures, keeps only its
own pipes, takes Ctrl-C as a fresh interpreter does, and is gone when let go. Then `bandwidth` end to
end: the entry point's fork adopted by the probe's child, and the timeline of the result."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.measure.test_pair_timer import SIZE, PairDriver, _start, lib
from topodoctor.cli.commands import main
from topodoctor.core import budget
from topodoctor.measure.copies import forked
from topodoctor.measure.copies.hello import hello_extra, hello_task
from topodoctor.measure.copies.worker import START_TIMEOUT_S, Worker, default_worker_cmd
from topodoctor.measure.timer import engine as copy_engine
from topodoctor.service import early_copies
from topodoctor.topology.scope import SOURCES

EVERY_GPU = hello_task(None, True, hello_extra())
MIB = 1 << 20


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_engine, "Driver", PairDriver)  # inherited by the fork
    monkeypatch.setattr(copy_engine, "CHUNK", 1 << 16)
    for name in SOURCES:
        monkeypatch.delenv(name, raising=False)


def _worker(first: dict[str, object] | None) -> Worker:
    proc = forked.fork_timer(first)
    w = Worker(default_worker_cmd(), 20.0, extra=hello_extra())
    w.took(proc, first, proc.forked_at)
    return w


@pytest.mark.slow  # a forked timer on the stand-in driver, 0.3 s or more on 2 cores
def test_the_forked_timer_answers_its_first_hello_prepares_and_measures(stand_in: None) -> None:
    w = _worker(EVERY_GPU)
    w.prepare_now({"modes": ["oneway", "bidir", "h2d", "d2h"], "size": MIB, "host_size": MIB // 2})
    w.start()
    assert [d["bus_id"] for d in w.hello["devices"]] == ["0000:00:06.0", "0000:00:07.0"]
    assert w.prepared["timings"]["allocation"] >= 0 and w.prepared["clock"]["prepared"] >= w.hello["clock"]["ready"]
    answer = w.ask({"op": "p2p", "src": 0, "dst": 1, "size": MIB, "iters": 2, "samples": 2, "mode": "bidir"}, 20.0)
    assert answer is not None and answer["verified"] is True and len(answer["reverse"]) == 2
    proc = w.proc
    assert proc is not None
    w.release()
    assert proc.wait(5.0) == -signal.SIGKILL


def test_prepared_buffers_are_the_ones_the_tasks_use(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch)
    modes = ["oneway", "bidir", "h2d", "d2h", "sm_oneway", "sm_bidir"]
    answer = t.checks.prepare({"modes": modes, "size": SIZE, "host_size": SIZE // 2})
    assert answer["timings"]["allocation"] >= 0 and answer["clock"]["prepared"] > 0
    made = len(lib(t).keep)
    pair = {"src": 0, "dst": 1, "iters": 1, "samples": 1}
    done = [
        t.p2p({"op": "p2p", "size": SIZE, "mode": "oneway", **pair}),
        t.p2p({"op": "p2p", "size": SIZE, "mode": "bidir", **pair}),
        t.host({"op": "host", "dev": 1, "dir": "h2d", "size": SIZE // 2, "iters": 1, "samples": 1}),
        t.host({"op": "host", "dev": 0, "dir": "d2h", "size": SIZE // 2, "iters": 1, "samples": 1}),
        t.sm_copy({"op": "sm_copy", "initiator": "pull", "bidir": True, "size": SIZE, **pair}),
    ]
    assert all(d["verified"] is True for d in done)
    assert len(lib(t).keep) == made  # every buffer the tasks used was made ahead: none allocated since


def test_nothing_is_made_for_modes_that_use_no_buffer_of_the_pass_s_size(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _start(monkeypatch)
    made = len(lib(t).keep)
    t.checks.prepare({"modes": ["latency", "sm_latency"], "size": SIZE, "host_size": SIZE})
    assert len(lib(t).keep) == made


def test_prepare_waits_for_a_hello_on_its_way() -> None:
    w = Worker(default_worker_cmd(), 20.0)
    w.prepare_now({"modes": ["oneway"], "size": MIB, "host_size": MIB})
    assert not w.preparing  # no timer, no hello: the tasks make their buffers


@pytest.mark.parametrize(
    ("first", "warms"),
    [
        (EVERY_GPU, True),
        (hello_task("GPU-1", True, hello_extra()), False),  # GPUs named: CUDA_VISIBLE_DEVICES first
        (None, False),  # no hello yet: the job's GPUs come with it
        ({"op": "p2p"}, False),
    ],
)
def test_only_a_hello_for_every_gpu_starts_the_driver_before_the_imports(
    first: dict[str, object] | None, warms: bool
) -> None:
    assert forked.warms_driver(first) is warms


@pytest.mark.slow  # forks and waits for children, 0.3 s or more on 2 cores
def test_the_child_holds_only_its_own_pipes_and_takes_ctrl_c(stand_in: None) -> None:
    read_end, write_end = os.pipe()  # another child's answer pipe, say
    try:
        w = _worker(None)
        assert w.proc is not None
        os.close(write_end)
        write_end = -1
        answer = w.ask({"op": "measure"}, 20.0)  # answered from its loop: its set-up is done
        assert answer is not None and "hello first" in answer["error"]
        # the timer does not hold the other pipe's write end: its reader sees the end at once
        assert os.read(read_end, 1) == b""
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{w.proc.pid}/fd")) == [0, 1, 2]
        os.kill(w.proc.pid, signal.SIGINT)
        assert w.proc.wait(5.0) == 1  # KeyboardInterrupt ends it, as in a fresh interpreter
        w.proc = None
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


@pytest.mark.slow  # forks and waits for children, 0.3 s or more on 2 cores
def test_a_signal_the_caller_ignores_stays_ignored_in_the_child(stand_in: None) -> None:
    """SIGINT in a shell's background job, nohup's SIGHUP: ignored by the timer as by the command."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        w = _worker(None)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert w.proc is not None
    assert w.ask({"op": "measure"}, 20.0) is not None  # its set-up is done
    with open(f"/proc/{w.proc.pid}/status", encoding="ascii") as status:
        ignored = int(next(line for line in status if line.startswith("SigIgn:")).split()[1], 16)
    assert ignored & (1 << (signal.SIGINT - 1)) and not ignored & (1 << (signal.SIGTERM - 1))
    w.stop()


@pytest.mark.slow  # forks and waits for children, 0.3 s or more on 2 cores
def test_a_hello_it_cannot_answer_ends_the_forked_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_driver(self: object) -> None:
        raise OSError("no libcuda")

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(copy_engine.Driver, "__init__", no_driver)
    w = _worker(EVERY_GPU)
    w.fallback = None
    with pytest.raises(Exception, match="CUDA unavailable: OSError: no libcuda"):
        w.start()
    assert w.proc is None


@pytest.mark.slow  # the whole command, a fork and the probe's child: 0.3 s or more on 2 cores
def test_bandwidth_forks_its_timer_first_and_the_timeline_says_where_the_time_went(
    stand_in: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The entry point's fork, told every GPU, is adopted by the probe's child, asked to prepare the
    pass's buffers and measures it: one hello (no restart), and every step on the timeline in order."""
    monkeypatch.setattr(budget, "_command_start", time.monotonic())
    early_copies.start_early_timer(())  # `bandwidth --size 1 -f json`: the default modes
    early = early_copies._early
    assert early is not None and early.sent == EVERY_GPU and isinstance(early.proc, forked.TimerProcess)
    out = tmp_path / "r.json"
    code = main(["bandwidth", "--replay", "h100-x2", "--size", "1", "-f", "json", "-o", str(out), "--timeout", "60"])
    doc = json.loads(capsys.readouterr().out)
    # the stand-in copies at memcpy's speed, far below NVLink's: the verdict is the rules' (TD306), not ours here
    assert code in (0, 1) and all(f["code"].startswith(("TD7", "TD30")) for f in doc["findings"])
    assert early_copies._early is None
    assert doc["matrices"]["oneway"][0][1] > 0 and all(m["verified"] is not False for m in doc["measurements"])
    saved = json.loads(out.read_text())
    assert "restarts" not in saved["timings"] and saved["timings"]["python_start"] < START_TIMEOUT_S
    line = saved["timeline"]
    order = ["timer_spawned", "timer_imports_done", "timer_cuda_ready", "timer_prepared", "copies_done", "result_back"]
    assert [k for k in order if k in line] == order and sorted(line[k] for k in order) == [line[k] for k in order]
    assert line["probe_forked"] < line["probe_done"] <= line["copies_done"]
    assert "timer_driver_started" not in line  # no libcuda here: the stand-in's start is not timed
