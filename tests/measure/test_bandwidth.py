"""The bandwidth tester without a GPU: saved results from the x4 host through the rules,
the JSON and text output, and the session's timeout handling with a stand-in copy timer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import BW_DERIVED, FIXTURES
from typer.testing import CliRunner

from topodoctor.cli.commands import app, main
from topodoctor.core.errors import BandwidthUnavailable, BudgetExceeded
from topodoctor.measure.copies.session import CopySettings, plan_tasks, run
from topodoctor.model.copies import load_result
from topodoctor.probe.sources import probe_host

runner = CliRunner()
FULL = FIXTURES / "bandwidth" / "h200-x4.full.json"


def test_measured_result_meets_the_reference() -> None:
    r = load_result(FULL)
    one = [m.value.median for m in r.measurements if m.mode == "oneway" and m.value]
    both = [m.value.median + m.reverse.median for m in r.measurements if m.mode == "bidir" and m.value and m.reverse]
    lat = [m.value.median for m in r.measurements if m.mode == "latency" and m.value]
    host = [m.value.median for m in r.measurements if m.mode in ("h2d", "d2h") and m.value]
    assert len(one) == 12 and min(one) >= 0.98 * 394
    assert len(both) == 6 and min(both) >= 0.98 * 779
    assert len(lat) == 12 and max(lat) <= 1.25 * 2.2
    assert len(host) == 8 and min(host) >= 0.95 * 55.5
    assert all(m.verified for m in r.measurements)
    assert max(m.value.spread_pct for m in r.measurements if m.value and m.mode != "latency") < 2.0


def test_real_result_raises_no_finding() -> None:
    r = runner.invoke(app, ["bandwidth", "--from", str(FULL), "-f", "json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["findings"] == []


@pytest.mark.parametrize("case", BW_DERIVED, ids=lambda c: c["name"])
def test_derived_result_triggers_its_rules(case: dict) -> None:  # type: ignore[type-arg]
    path = FIXTURES / "bandwidth" / "derived" / case["file"]
    r = runner.invoke(app, ["bandwidth", "--from", str(path), "-f", "json"])
    codes = {f["code"] for f in json.loads(r.stdout)["findings"]}
    assert codes == set(case["codes"])
    severe = any(f["severity"] in ("error", "critical") for f in json.loads(r.stdout)["findings"])
    assert r.exit_code == (1 if severe else 0)


def test_json_matrices_are_numbers_with_null_where_not_measured() -> None:
    path = FIXTURES / "bandwidth" / "derived" / "hung-copy.json"
    doc = json.loads(runner.invoke(app, ["bandwidth", "--from", str(path), "-f", "json"]).stdout)
    m = doc["matrices"]
    assert m["gpus"] == [0, 1, 2, 3]
    assert m["oneway"][0][0] is None and isinstance(m["oneway"][0][1], float)
    assert m["bidir_total"][1][2] is None and m["bidir_total"][0][1] > 700


def test_text_matrix_header() -> None:
    r = runner.invoke(app, ["bandwidth", "--from", str(FULL)])
    assert "rows: source GPU, columns: destination GPU; GB/s = 1e9 bytes/s" in " ".join(r.stdout.split())


def test_plan_covers_every_ordered_pair() -> None:
    tasks = plan_tasks(CopySettings(), {0: 0, 1: 1, 2: 2})
    pairs = [(t.mode, t.src, d) for t in tasks for d in t.dsts]
    modes = [m for m, _, _ in pairs]
    assert modes.count("oneway") == 6 and modes.count("latency") == 6 and modes.count("bidir") == 3
    assert modes.count("h2d") == 3 and modes.count("d2h") == 3
    assert len({p for p in pairs if p[0] == "latency"}) == 6
    # latency: one batch (one spin-kernel hold) per source GPU
    assert sorted(t.src for t in tasks if t.mode == "latency") == [0, 1, 2]


FAKE_TIMER = r"""
import json, sys, time
print(json.dumps({"torch": "fake", "cuda": "0", "method": "fake", "devices": [
    {"ordinal": 0, "bus_id": "0000:00:06.0", "name": "x"}, {"ordinal": 1, "bus_id": "0000:00:07.0", "name": "y"}]}),
    flush=True) if json.loads(sys.stdin.readline())["op"] == "hello" else None
for line in sys.stdin:
    task = json.loads(line)
    if task.get("src") == 1:
        time.sleep(600)  # a copy that never finishes
    print(json.dumps({"samples": [100.0, 101.0, 99.0], "reverse": None, "path": "p2p", "verified": True}), flush=True)
"""


@pytest.mark.slow
def test_a_stuck_copy_is_cut_and_reported(tmp_path: Path) -> None:
    timer = tmp_path / "timer.py"
    timer.write_text(FAKE_TIMER)
    snap = probe_host("h200-x2").snapshot
    settings = CopySettings(modes=("oneway",), pair_timeout_s=0.5, devices=(0, 1))
    result = run(snap, settings, worker_cmd=[sys.executable, str(timer)])
    by = {(m.src, m.dst): m for m in result.measurements}
    assert by[(0, 1)].value is not None and by[(0, 1)].value.median == 100.0
    assert by[(1, 0)].value is None and by[(1, 0)].error.startswith("timeout")
    assert result.gpus[1].bus_id == "0000:00:07.0"


def test_missing_torch_is_a_clear_error(tmp_path: Path) -> None:
    timer = tmp_path / "t.py"
    timer.write_text("import torch_that_is_not_there\n")
    with pytest.raises(BandwidthUnavailable, match=r"did not start|died|torch"):
        run(probe_host("h200-x2").snapshot, CopySettings(start_timeout_s=10), worker_cmd=[sys.executable, str(timer)])


def test_no_cuda_is_a_clear_error(tmp_path: Path) -> None:
    timer = tmp_path / "t.py"
    timer.write_text('import json; print(json.dumps({"error": "CUDA unavailable: no driver"}), flush=True)\n')
    with pytest.raises(BandwidthUnavailable, match="CUDA unavailable"):
        run(probe_host("h200-x2").snapshot, CopySettings(), worker_cmd=[sys.executable, str(timer)])


def test_bad_result_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"kind": "bandwidth", "schema_version": 1, "measurements": "x"}))
    assert main(["bandwidth", "--from", str(bad)]) == 2
    assert "does not match its schema" in capsys.readouterr().err


RECORDING_TIMER = r"""
import json, os, sys, time
t_module = time.monotonic()
log = open(os.environ["TIMER_LOG"], "a")
for line in sys.stdin:
    task = json.loads(line)
    log.write(line)
    log.flush()
    if task["op"] == "hello":
        ids = [v for v in (task["visible"] or "").split(",") if v]
        bus = {"GPU-00000000-0000-4000-8000-000000000000": "0000:00:06.0",
               "GPU-00000000-0000-4000-8000-000000000001": "0000:00:07.0"}
        devs = [{"ordinal": i, "bus_id": bus[u], "name": "x"} for i, u in enumerate(ids)]
        print(json.dumps({"torch": "fake", "cuda": "0", "method": "fake", "devices": devs,
                          "clock": {"module": t_module, "imports": t_module + 0.001},
                          "timings": {"cuda_init": 0.01, "contexts_and_peers": 0.02}}), flush=True)
    elif task["op"] == "latency":
        res = [{"dst": d, "samples": [2.0 + d, 2.1 + d], "path": "p2p", "verified": None} for d in task["dsts"]]
        print(json.dumps({"results": res, "timings": {"measurement": 0.001}}), flush=True)
    else:
        print(json.dumps({"samples": [50.0, 51.0], "path": "host" if task["op"] == "host" else "p2p",
                          "verified": True, "timings": {"allocation": 0.001, "measurement": 0.002}}), flush=True)
"""


def _recording_timer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    timer = tmp_path / "timer.py"
    timer.write_text(RECORDING_TIMER)
    log = tmp_path / "tasks.jsonl"
    monkeypatch.setenv("TIMER_LOG", str(log))
    return [sys.executable, str(timer)], log


def test_the_child_is_shown_only_the_job_s_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd, log = _recording_timer(tmp_path, monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    result = run(probe_host("h200-x2").snapshot, CopySettings.quick(), worker_cmd=cmd)
    hello = json.loads(log.read_text().splitlines()[0])
    assert hello["visible"] == "GPU-00000000-0000-4000-8000-000000000001" and hello["peers"] is False
    assert [g.index for g in result.gpus] == [1]
    assert {(m.mode, m.src, m.dst) for m in result.measurements} == {("h2d", -1, 1), ("d2h", 1, -1)}
    assert "job (GPUs 1" in result.settings["scope"]


def test_latency_batches_map_back_to_pairs_and_timings_add_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd, log = _recording_timer(tmp_path, monkeypatch)
    result = run(probe_host("h200-x2").snapshot, CopySettings(modes=("latency", "oneway")), worker_cmd=cmd)
    lat = result.matrix("latency")
    assert set(lat) == {(0, 1), (1, 0)}
    # the fake answers 2.0 + destination ordinal: each pair got its own destination's samples
    assert lat[(0, 1)].value is not None and lat[(0, 1)].value.median == pytest.approx(3.05)
    assert lat[(1, 0)].value is not None and lat[(1, 0)].value.median == pytest.approx(2.05)
    t = result.timings
    for phase in ("python_start", "worker_imports", "cuda_init", "contexts_and_peers", "measurement", "teardown"):
        assert phase in t, phase
    assert t["allocation"] == pytest.approx(0.002) and t["total_since_spawn"] >= t["measurement"]
    doc = json.loads(runner.invoke(app, ["bandwidth", "--from", str(FULL), "-f", "json"]).stdout)
    assert doc["timings"] == {}  # a result saved before timings were kept still loads
    tasks = [json.loads(x) for x in log.read_text().splitlines()]
    assert [t["op"] for t in tasks].count("latency") == 2 and tasks[0]["visible"].count("GPU-") == 2


@pytest.mark.slow
def test_the_real_copy_timer_without_cuda_says_so() -> None:
    """The torch child itself (CPU-only torch here): it starts, takes hello, answers one line."""
    pytest.importorskip("torch")
    from topodoctor.measure.copies.session import default_worker_cmd

    with pytest.raises(BandwidthUnavailable, match="CUDA unavailable"):
        run(probe_host("h200-x2").snapshot, CopySettings.quick(), worker_cmd=default_worker_cmd())


def test_a_timer_that_cannot_start_hands_over_to_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from topodoctor.measure.copies.session import Worker

    broken = tmp_path / "broken.py"
    broken.write_text(
        'import json; print(json.dumps({"error": "CUDA unavailable: no stream memory ops"}), flush=True)\n'
    )
    good, _ = _recording_timer(tmp_path, monkeypatch)
    worker = Worker([sys.executable, str(broken)], 10.0, fallback=good)
    result = run(probe_host("h200-x2").snapshot, CopySettings.quick(), worker=worker)
    assert result.method == "fake" and len(result.measurements) == 6
    worker = Worker([sys.executable, str(broken)], 10.0, fallback=[sys.executable, str(broken)])
    with pytest.raises(BandwidthUnavailable, match=r"no stream memory ops \(torch timer: CUDA unavailable"):
        run(probe_host("h200-x2").snapshot, CopySettings.quick(), worker=worker)


def test_the_copies_are_handed_over_before_the_watch_s_closing_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once every copy is done the pass hands its result over (``interim``) before the link
    counters' closing read, which once took the measuring process down; a pass cut short hands
    nothing over."""
    from topodoctor.probe.during import CLOSING_UNREAD
    from topodoctor.probe.replay import recording_from_data, resolve

    name, data = resolve("h100-x2")
    nvml, _ = recording_from_data(data, name).fakes()
    snap = probe_host("h100-x2").snapshot
    cmd, _ = _recording_timer(tmp_path, monkeypatch)
    handed: list[Any] = []
    result = run(snap, CopySettings(modes=("oneway",)), nvml=nvml, worker_cmd=cmd, interim=handed.append)
    (early,) = handed
    assert early.measurements == result.measurements and early.during is not None and result.during is not None
    assert {g.counters_error for g in early.during.gpus} == {CLOSING_UNREAD}
    assert all(g.counters_error != CLOSING_UNREAD for g in result.during.gpus)  # the closing read was made
    handed.clear()
    with pytest.raises(BudgetExceeded):
        run(snap, CopySettings(modes=("oneway",)), nvml=nvml, worker_cmd=cmd, interim=handed.append, deadline=0.0)
    assert handed == []


@pytest.mark.parametrize(("ours", "shown"), [(True, False), (False, True)])
def test_a_gpu_is_said_not_idle_for_another_s_process_never_for_the_copy_timer(ours: bool, shown: bool) -> None:
    """By the time the load is read the copy timer holds a context on every GPU: NVML counts it,
    the snapshot names it topodoctor's own."""
    from dataclasses import replace

    from rich.console import Console

    from topodoctor.model.copies import Activity
    from topodoctor.model.snapshot import ComputeProcess
    from topodoctor.report.bandwidth import print_bandwidth

    saved = load_result(FIXTURES / "bandwidth" / "h200-x4.quick.json")
    assert saved.snapshot is not None
    timer = ComputeProcess(4201, 1 << 29, 1000, 4200, "python3 -m topodoctor.measure.timer.on_gpu", ours)
    gpus = tuple(replace(g, compute_processes=(timer,) if g.index == 0 else ()) for g in saved.snapshot.gpus)
    r = replace(
        saved,
        snapshot=replace(saved.snapshot, gpus=gpus),
        # GPU0 12 % busy with the timer's buffers being made; GPU1 with nobody on it
        activity=(Activity(0, 12, 1, 1 << 29), Activity(1, 49, 0, 0)),
    )
    console = Console(record=True, width=200)
    print_bandwidth(r, console)
    text = console.export_text()
    assert ("GPU0 was not idle: 12 % busy, 1 other process" in text) is shown and "GPU1 was not idle" not in text
    busy = replace(r, activity=(Activity(0, 0, 1, 0), Activity(1, 50, 0, 0)))  # half busy, no process seen
    console = Console(record=True, width=200)
    print_bandwidth(busy, console)
    assert "GPU1 was not idle: 50 % busy, 0 other processes" in console.export_text()
