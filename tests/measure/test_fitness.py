"""Fitness around the timers: the plan of each level, refusing busy GPUs, what a missing driver or
a CUDA-less torch turns into (could not check, never a pass), the NVML sampler, the check's
pass on a recorded host, the real H200 result through the rules, the reports and the CLI."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest
from conftest import FIXTURES
from rule_case_kit_measured import fitness_result
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.core import codec
from topodoctor.measure.fitness import session
from topodoctor.model.fitness_results import FitnessResult, load_result
from topodoctor.probe.api import NOT_SUPPORTED, NvmlCallError
from topodoctor.probe.environment import capture_environment
from topodoctor.probe.sampler import Sampler, limits
from topodoctor.probe.sources import probe_host
from topodoctor.rules import Context, evaluate
from topodoctor.service import check as doctor
from topodoctor.service.fitness import fitness_pass
from topodoctor.topology.scope import resolve

REAL = FIXTURES / "fitness" / "h200-x1.long.json"


class Nvml:
    """NVML as the session and the sampler ask it, for GPUs some of which run other jobs."""

    def __init__(self, busy: set[int] = frozenset(), reasons: int = 0x4) -> None:  # type: ignore[assignment]
        self.busy, self.reasons, self.calls = busy, reasons, 0

    def call(self, fn: str, *args: Any) -> Any:
        self.calls += 1
        i = int(str(args[0]).removeprefix("gpu:")) if args else -1
        answers = {
            "nvmlDeviceGetHandleByIndex": f"gpu:{i}",
            "nvmlDeviceGetComputeRunningProcesses": [{"pid": 4242}] if i in self.busy else [],
            "nvmlDeviceGetUtilizationRates": {"gpu": 97 if i in self.busy else 0},
            "nvmlDeviceGetMemoryInfo": {"used": 1 << 30},
            "nvmlDeviceGetMaxClockInfo": {1: 1980, 2: 3201}.get(args[1] if len(args) > 1 else 0),
            "nvmlDeviceGetClockInfo": {1: 1470, 2: 3201}.get(args[1] if len(args) > 1 else 0),
            "nvmlDeviceGetMemoryBusWidth": 6016,
            "nvmlDeviceGetEnforcedPowerLimit": 700_000,
            "nvmlDeviceGetPowerUsage": 698_000,
            "nvmlDeviceGetTemperature": 55,
            "nvmlDeviceGetCurrentClocksEventReasons": self.reasons,
        }
        if fn not in answers:
            raise NvmlCallError(NOT_SUPPORTED)
        return answers[fn]


def x2() -> Any:
    return probe_host("h200-x2").snapshot


def test_levels_plan_what_they_promise() -> None:
    quick, long = session.FitnessPlan.for_level("quick"), session.FitnessPlan.for_level("long")
    assert quick.gemm_seconds == 0 and not quick.sm_copies and long.gemm_seconds > 0 and long.sm_copies
    ops = [
        (t["op"], t.get("initiator"), t.get("bidir"), t.get("src"), t.get("dst")) for t in session._tasks(long, [0, 1])
    ]
    assert len(ops) == 20
    pairs = {(op, i, b) for op, i, b, s, d in ops if op == "sm_copy" and s is not None and s >= 0 and d >= 0}
    assert pairs == {("sm_copy", i, b) for i in ("pull", "push") for b in (False, True)}
    assert ("sm_copy", "pull", False, -1, 0) in ops and ("sm_copy", "push", False, 0, -1) in ops
    assert sum(1 for t in session._tasks(long, [0, 1]) if t["op"] == "chase") == 4  # host and peer, each GPU
    assert {t["op"] for t in session._tasks(quick, [0, 1])} == {"hbm", "chase"}


def test_a_busy_gpu_is_refused_and_nothing_starts() -> None:
    snap = x2()
    plan = session.FitnessPlan.for_level("long")
    res = session.run(snap, plan, Nvml(busy={0, 1}), time.monotonic() + 30, scope=resolve(snap, {}, "node"))
    assert res.figures and all(f.refused and f.value is None for f in res.figures)
    assert {f.src for f in res.figures if f.kind == "hbm"} == {0, 1}
    assert "busy" in (res.figures[0].error or "") and res.gpus == ()


def test_without_a_driver_the_result_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real kernel timer child, on a machine with no libcuda: the idle GPU's figures are
    refused with the driver's absence as the reason; the busy one's with its business."""
    snap = x2()
    plan = replace(session.FitnessPlan.for_level("quick"), start_timeout_s=20.0)
    res = session.run(snap, plan, Nvml(busy={1}), time.monotonic() + 60, scope=resolve(snap, {}, "node"))
    why = {f.src: f.error for f in res.figures if f.kind == "hbm"}
    assert "busy" in str(why[1]) and "libcuda" in str(why[0])
    assert all(f.refused for f in res.figures)
    assert res.limits[0].hbm_peak_gbps == pytest.approx(6016 / 8 * 3201e6 * 2 / 1e9)


@pytest.mark.slow
def test_a_torch_without_cuda_is_could_not_check() -> None:
    """The real GEMM child with the CPU torch the tests install: refused, naming why."""
    snap = x2()
    plan = replace(session.FitnessPlan.for_level("long"), gemm_seconds=2.0, start_timeout_s=1.0)
    stress, figures = session._gemm(snap, plan, Nvml(), [0, 1], time.monotonic() + 120)
    assert stress == [] and [f.src for f in figures] == [0, 1]
    assert all(f.refused and f.value is None and "CUDA" in (f.error or "") for f in figures)


def test_sampler_reads_until_stopped() -> None:
    api = Nvml(reasons=0x4 | 0x40)
    s = Sampler(api, [0, 1], interval_s=0.01).start()
    time.sleep(0.1)
    readings = s.stop()
    calls = api.calls
    time.sleep(0.05)
    assert api.calls == calls  # stopped means stopped
    assert {r.index for r in readings} == {0, 1} and len(readings) >= 4
    r = readings[0]
    assert (r.sm_mhz, r.mem_mhz, r.power_w, r.temp_c, r.reasons) == (1470, 3201, 698.0, 55, 0x44)
    lim = limits(api, 1)
    assert (lim.bus_width_bits, lim.mem_mhz_max, lim.power_limit_w) == (6016, 3201, 700.0)


def test_stress_counts_reasons_per_sample() -> None:
    from topodoctor.probe.sampler import GpuSample

    rs = [GpuSample(0, float(t), 1400 + t, 3201, 690.0, 50 + t, 0x4 | (0x40 if t > 7 else 0)) for t in range(10)]
    s = session._stress(0, rs)
    assert s.reason_samples == {"sw_power_cap": 10, "hw_thermal_slowdown": 2} and s.temp_c_max == 59
    assert s.sm_mhz_median == 1404.5 and s.samples == 10


def test_the_real_h200_result_round_trips_and_is_healthy() -> None:
    res = load_result(REAL)
    assert codec.from_jsonable(FitnessResult, json.loads(codec.dumps(res)), "again") == res
    assert {f.label for f in res.figures} >= {"hbm ce", "hbm sm", "compute bf16", "latency sm"}
    assert all(f.verified for f in res.figures)
    assert res.stress[0].reason_samples == {"sw_power_cap": res.stress[0].samples}  # capped all along: normal
    ctx = Context(probe_host("h200-x4").snapshot, capture_environment({}, system_conf="/nonexistent"))
    ctx.fitness = res
    codes = {f.code for f in evaluate(ctx)}
    assert not {c for c in codes if c.startswith("TD71")}


def test_check_on_a_recording_reports_what_it_could_not_measure() -> None:
    outcome = doctor.check(doctor.CheckRequest(replay="h200-x4", timeout=60.0), passes=(fitness_pass("quick"),))
    assert outcome.fitness is not None and outcome.fitness.errors and outcome.fitness.figures == ()
    incomplete = [f for f in outcome.incomplete if f.evidence.get("call") == "fitness"]
    assert incomplete and "live host only" in incomplete[0].message
    from topodoctor.report.check import check_json

    doc = check_json(outcome)
    assert doc["fitness"]["errors"] == list(outcome.fitness.errors)


def test_reports_show_every_figure_with_its_spread() -> None:
    from rich.console import Console

    from topodoctor.report.check import fitness_json
    from topodoctor.report.fitness import print_fitness

    res = fitness_result("timeout-gpu3")
    doc = fitness_json(res)
    hbm = next(f for f in doc["figures"] if f["kind"] == "hbm")
    assert hbm["median"] > 1000 and 0 <= hbm["spread_pct"] < 5
    console = Console(record=True, width=160)
    print_fitness(res, console)
    text = console.export_text()
    assert "hbm ce" in text and "GB/s" in text and "timeout" in text and "sw_power_cap" in text
    matrix = text[text.index("SM latency (ns)") :].splitlines()
    gpu0 = next(line for line in matrix if line.lstrip("│ ").startswith("GPU0"))
    cells = [c.strip() for c in gpu0.split("│")[1:-1]]
    assert cells[0] == "GPU0" and cells[1] == "" and 700 < float(cells[2]) < 1000 and 1000 < float(cells[-1]) < 1500
    gpu3 = next(line for line in matrix if line.lstrip("│ ").startswith("GPU3"))
    assert gpu3.split("│")[-2].strip() == "-"  # its host latency hung


def test_cli_levels() -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["check", "--level", "burn-in", "--replay", "h200-x4"])
    assert bad.exit_code == 2
    ok = runner.invoke(app, ["check", "--level", "static", "--replay", "h200-x4", "-f", "json"])
    assert ok.exit_code == 0 and "fitness" not in json.loads(ok.stdout)
    refused = runner.invoke(app, ["expect", "-o", "/nonexistent/e.json", "--replay", "h200-x4", "--level", "quick"])
    assert refused.exit_code == 3 and "no fitness figure measured" in refused.output


def test_the_fleet_names_a_node_whose_hbm_is_slow() -> None:
    """Four nodes' check JSON with their fitness sections: three as measured, one whose HBM runs at
    0.75 (the derived hbm-all-slow); the roll-up names that node's HBM figures, and only those."""
    from pathlib import Path

    from topodoctor.fleet.inputs import parse_result
    from topodoctor.fleet.rollup import roll_up
    from topodoctor.report.check import fitness_json

    snap = probe_host("h200-x4").snapshot
    docs = {
        node: {"kind": "check", "schema_version": 1, "verdict": "healthy", "host": node, "reason": "", "findings": [],
               "fitness": fitness_json(fitness_result(name), snap)}
        for node, name in (("n1", "healthy"), ("n2", "healthy"), ("n3", "healthy"), ("n4", "hbm-all-slow"))
    }  # fmt: skip
    docs["n2"]["fitness"]["figures"][0]["value"]["median"] *= 1.01  # nodes never agree to the last digit
    report = roll_up(parse_result(json.loads(json.dumps(d)), Path(f"{n}.check.json")) for n, d in docs.items())
    named = {(o.node, o.figure) for o in report.outliers}
    assert named and {node for node, _ in named} == {"n4"}
    assert all(fig.startswith("hbm ") for _, fig in named)


def test_prometheus_carries_the_measured_figures_in_base_units() -> None:
    from tests.report.test_prometheus import lint, parse, samples
    from topodoctor.report.prometheus import check_metrics

    snap = probe_host("h200-x4").snapshot
    res = fitness_result("timeout-gpu3")
    text = check_metrics([], [], 0, snap, 1.0, fitness=res)
    lint(text)
    fams = parse(text)
    (ce,) = samples(fams, "topodoctor_hbm_bytes_per_second", gpu="2", engine="ce")
    hbm = next(f for f in res.figures if (f.kind, f.src, f.initiator) == ("hbm", 2, "ce"))
    assert ce.value == pytest.approx(hbm.value.median * 1e9) and ce.labels["UUID"]
    assert samples(fams, "topodoctor_compute_flops_per_second", gpu="0")[0].value > 5e14
    host = samples(fams, "topodoctor_sm_latency_seconds", gpu="0", peer_gpu="-1")[0].value
    assert 5e-7 < host < 5e-6
    assert not samples(fams, "topodoctor_sm_latency_seconds", gpu="3", peer_gpu="-1")  # it timed out: no value
    assert len(samples(fams, "topodoctor_sm_copy_bytes_per_second", initiator="pull", bidir="true")) == 6 + 4


@pytest.mark.slow
def test_a_gemm_past_the_deadline_is_killed_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import sys
    from pathlib import Path

    hang = "import time; time.sleep(60)  # worker_gemm stand-in: a GPU that never answers"
    monkeypatch.setattr(session, "gemm_cmd", lambda: [sys.executable, "-c", hang])
    snap = x2()
    plan = replace(session.FitnessPlan.for_level("long"), gemm_seconds=30.0, start_timeout_s=0.1)
    t0 = time.monotonic()
    _, figures = session._gemm(snap, plan, Nvml(), [0], t0 + 1.2)
    assert time.monotonic() - t0 < 5
    assert [f.error for f in figures] == ["the GEMM worker timed out"] and not figures[0].refused

    def ours(pid: str) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            return (
                int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid()
                and "worker_gemm" in Path(f"/proc/{pid}/cmdline").read_text()
            )
        except (OSError, ValueError, IndexError):
            return False

    assert not [p for p in os.listdir("/proc") if p.isdigit() and ours(p)]


def test_the_command_s_own_timer_on_a_gpu_does_not_make_it_busy() -> None:
    """`check --level quick` starts the copy timer beside the fitness timer; by the fitness pass the copy
    timer holds a context on the GPU (seen on a one-GPU H200, 2026-12-02: every quick check refused its own
    fitness pass as "GPU0 is busy"). A process of the command's tree is its own; anyone else's is not."""
    import os

    from topodoctor.probe.processes import foreign_processes
    from topodoctor.probe.replay import ReplaySysfs

    me, starter, timer, stranger = os.getpid(), 70001, 70002, 70003

    def status(pid: int, parent: int) -> dict[str, Any]:
        text = f"Name:\tpython3\nPid:\t{pid}\nPPid:\t{parent}\nUid:\t1000\t1000\t1000\t1000\n"
        return {"op": "read", "path": f"/proc/{pid}/status", "result": text}

    procfs = ReplaySysfs(
        [
            {"op": "realpath", "path": "/proc/self", "result": f"/proc/{me}"},
            status(starter, me),
            status(timer, starter),
            status(stranger, 1),
        ],
        "proc",
    )

    class Listing(Nvml):
        def __init__(self, pids: dict[int, list[int]]) -> None:
            super().__init__()
            self.pids = pids

        def call(self, fn: str, *args: Any) -> Any:
            if fn == "nvmlDeviceGetComputeRunningProcesses":
                return [{"pid": p, "usedGpuMemory": 1 << 29} for p in self.pids[int(str(args[0])[4:])]]
            return super().call(fn, *args)

    assert foreign_processes(Listing({0: [timer], 1: [timer, stranger]}), [0, 1], procfs) == {1: 1}
