"""The cause engine on what NVML showed while a run went on: a process that came and went mid-run (seen
by the samples only), clocks held down by protection, a link counter that rose; their near misses
(the SW power cap alone, topodoctor's own processes, counters that stood still, a slowdown too
brief); and a result from before runs were sampled, which says so.

Real results of the 2 x H100 host (fixtures/diagnosis/h100-x2, made before runs were sampled) with
documented changes: "the GEMM run unseen" is the foreign-GEMM run (all_reduce 150 GB/s at 1 GiB, the
GEMM on GPU1 when it started) with every trace of the GEMM before the run removed (GPU1's activity 0 %
and no process, the snapshot's process list empty), so only a sampling added to it can tell."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from conftest import FIXTURES
from rule_case_kit import bandwidth_result, bw_measure, snapshot
from rule_case_kit_measured import fitness_result

from topodoctor.diagnosis import during as judged
from topodoctor.diagnosis.devices import DeviceSymptom, device_cause
from topodoctor.diagnosis.load import BUSY_SM_PCT, THROUGHOUT, loads
from topodoctor.model.collectives import CollectivesResult, load_result
from topodoctor.model.copies import Activity
from topodoctor.model.during import GpuDuring, RunSampling, SeenProcess
from topodoctor.model.findings import NOT_FOUND, Finding
from topodoctor.probe.environment import capture_environment
from topodoctor.rules import Context, evaluate
from topodoctor.service.collectives import judge

RUNS = FIXTURES / "diagnosis" / "h100-x2"
GEMM = SeenProcess(3120, 0, "python3 tests/gpu/foreign_gemm.py 1 6", 1 << 30, 2.0, 8.0, 31, 48)
RUN_S = 14.0
LINKS = {f"nvlink{n}_{k}": 0 for n in range(18) for k in ("replay", "recovery", "crc")}


def _gpu(i: int, **kw: Any) -> GpuDuring:
    base: dict[str, Any] = dict(
        samples=70,
        util_max_pct=100,
        reasons={"sw_power_cap": 12},
        power_max_w=412.0,
        power_limit_w=700.0,
        temp_max_c=51,
        sm_mhz_min=1980,
        sm_mhz_max=1980,
        own=1,
        counters_before={"pcie_replay": 2, **LINKS},
        counters_after={"pcie_replay": 2, **LINKS},
    )
    return GpuDuring(i, **{**base, **kw})


def _sampled(*gpu1: Any, **kw: Any) -> RunSampling:
    return RunSampling(0.2, RUN_S, 70, (_gpu(0), _gpu(1, **kw)), 0.4)


def _unseen() -> CollectivesResult:
    res = load_result(RUNS / "coll-foreign-gemm.json")
    assert res.snapshot is not None
    gpus = tuple(replace(g, compute_processes=()) for g in res.snapshot.gpus)
    acts = tuple(Activity(a.index, 0, 0, a.memory_used_bytes) for a in res.activity)
    return replace(res, snapshot=replace(res.snapshot, gpus=gpus), activity=acts)


def _td001(res: CollectivesResult) -> Finding:
    f = next(f for f in judge(res, None) if f.code == "TD001")
    assert f.severity == "error" and f.cause is not None  # the verdict stands whatever the cause
    return f


def test_unseen_before_the_run_the_gemm_run_has_no_cause() -> None:
    f = _td001(replace(_unseen(), during=_sampled()))
    assert f.cause is not None and f.cause.what == NOT_FOUND
    ruled = " | ".join(f.cause.ruled_out)
    assert "other processes during the run: none on GPU0, GPU1 in 70 samples over 14.0 s" in ruled
    assert "SW power cap on GPU0 in 12, GPU1 in 12 samples: a GPU at its power limit, normal at full load" in ruled
    assert "no NVLink replay, recovery or CRC error during the run on GPU0, GPU1" in ruled


def test_a_process_that_came_and_went_mid_run_is_the_cause() -> None:
    f = _td001(replace(_unseen(), during=_sampled(foreign=(GEMM,))))
    c = f.cause
    assert c is not None and c.what.startswith("another job's process on GPU1 with pid 3120 (uid 0, python3 tests")
    assert "came and went during the run (seen 2.0-8.0 s of the 14.0 s run, SMs up to 48 %)" in c.what
    assert c.confidence == "medium" and c.explains is None  # a part of the run: not quantified
    assert f.message.startswith(c.what) and "kill 3120" in f.fix
    (p,) = c.evidence["processes"]
    assert (p["pid"], p["first_s"], p["last_s"], p["run_s"], p["sm_util_pct"]) == (3120, 2.0, 8.0, RUN_S, 48)
    td007 = [x for x in judge(replace(_unseen(), during=_sampled(foreign=(GEMM,))), None) if x.code == "TD007"]
    assert [(x.severity, x.subject) for x in td007] == [("info", "GPU1")] and "came and went" in td007[0].message
    assert "when measuring started" not in td007[0].message and td007[0].evidence["seen_during_run"] == [3120]


def test_a_process_there_throughout_and_computing_is_quantified() -> None:
    whole = replace(GEMM, first_s=0.2, last_s=0.2 + THROUGHOUT * RUN_S)
    c = _td001(replace(_unseen(), during=_sampled(foreign=(whole,)))).cause
    assert c is not None and "was there during the run" in c.what
    assert c.explains is not None and c.explains > 0.8 and c.evidence["expected_under_cause"] == pytest.approx(160, 1)


@pytest.mark.parametrize(
    ("span", "sm", "contenders"),
    [
        (THROUGHOUT, BUSY_SM_PCT, 1),  # at both thresholds: there throughout, computing
        (THROUGHOUT - 0.01, BUSY_SM_PCT, 0),  # just short of the run
        (THROUGHOUT, BUSY_SM_PCT - 1, 0),  # there, but holding memory rather than computing
        (THROUGHOUT, None, 0),  # its SM share unread: not counted
    ],
)
def test_a_mid_run_process_shares_the_gpu_only_there_throughout_and_computing(
    span: float, sm: int | None, contenders: int
) -> None:
    p = replace(GEMM, first_s=0.0, last_s=span * RUN_S, sm_util_pct=sm)
    res = _unseen()
    load = loads(res.snapshot, res.activity, _sampled(foreign=(p,)))[1]
    assert load.busy and load.mid_run and load.contenders == contenders


def test_topodoctors_own_processes_are_never_foreign() -> None:
    # The samples name only processes that are not ours; ours are counted (own), never load.
    res = _unseen()
    load = loads(res.snapshot, res.activity, _sampled(own=3))[1]
    assert not load.busy and load.foreign == () and not load.mid_run


def test_clocks_held_down_while_the_run_went_on_are_the_cause() -> None:
    held = {"sw_power_cap": 20, "hw_thermal_slowdown": 40}
    c = _td001(replace(_unseen(), during=_sampled(reasons=held, sm_mhz_min=1110, temp_max_c=88))).cause
    assert c is not None and c.what.startswith("GPU1's clocks were held down while the run went on")
    assert "hw_thermal_slowdown in 40 of 70 samples, SM clock down to 1110 of 1980 MHz, up to 88 C" in c.what
    assert c.evidence["reasons_in_samples"] == {"hw_thermal_slowdown": 40} and c.confidence == "medium"


@pytest.mark.parametrize(("n", "cause"), [(7, True), (6, False)])  # a tenth of 70 samples, and just under
def test_a_slowdown_too_brief_is_ruled_out(n: int, cause: bool) -> None:
    c = _td001(replace(_unseen(), during=_sampled(reasons={"hw_slowdown": n}))).cause
    assert c is not None and (c.what != NOT_FOUND) is cause
    if not cause:
        assert f"hw_slowdown on GPU1 in {n} of 70 samples, too brief" in " | ".join(c.ruled_out)


def test_the_sw_power_cap_alone_is_never_a_cause() -> None:
    c = _td001(replace(_unseen(), during=_sampled(reasons={"sw_power_cap": 70}))).cause
    assert c is not None and c.what == NOT_FOUND


def test_an_nvlink_counter_that_rose_is_the_cause() -> None:
    after = {"pcie_replay": 2, **LINKS, "nvlink3_replay": 120, "nvlink3_crc": 40}
    c = _td001(replace(_unseen(), during=_sampled(counters_after=after))).cause
    assert (
        c is not None
        and c.what == "GPU1's link error counters rose during the run (NVLink 3 crc +40, NVLink 3 replay +120)"
    )
    assert c.evidence["rose"] == {"nvlink3_crc": 40, "nvlink3_replay": 120} and "nvlink -e -i 1" in c.fix


@pytest.mark.parametrize(("replays", "cause"), [(1400, True), (1399, False)])  # 100 a second over 14 s
def test_pcie_replays_count_from_a_rate(replays: int, cause: bool) -> None:
    after = {"pcie_replay": 2 + replays, **LINKS}
    c = _td001(replace(_unseen(), during=_sampled(counters_after=after))).cause
    assert c is not None and (c.what != NOT_FOUND) is cause
    if not cause:
        assert f"GPU1: PCIe replays +{replays} in 14.0 s, under 100/s" in c.ruled_out


def test_counters_that_could_not_be_read_say_so() -> None:
    c = _td001(replace(_unseen(), during=_sampled(counters_before={}, counters_after={}, counters_error="x"))).cause
    assert c is not None and "link counters of GPU1: not read (x)" in c.ruled_out


def test_a_result_from_before_sampling_says_nothing_was_sampled() -> None:
    res = load_result(RUNS / "coll-foreign-gemm.json")  # as measured: no sampling in it
    c = _td001(res).cause
    assert res.during is None and c is not None and "foreign_gemm.py" in c.what  # the start still saw it
    assert judged.not_sampled() in c.ruled_out
    c = _td001(_unseen()).cause
    assert c is not None and c.what == NOT_FOUND and judged.not_sampled() in c.ruled_out


def test_a_hang_blames_a_link_that_recovered_not_the_clocks() -> None:
    res = load_result(RUNS / "coll-p2p-memcpy.json")  # hung at 64 MiB with NCCL_P2P_USE_CUDA_MEMCPY=1
    after = {"pcie_replay": 2, **LINKS, "nvlink5_recovery": 1}
    sampled = _sampled(counters_after=after, reasons={"hw_slowdown": 70})
    f = next(f for f in judge(replace(res, during=sampled), None) if f.code == "TD005")
    assert f.cause is not None
    named = [f.cause.what, *f.cause.others]
    assert any("NVLink 5 recovery +1" in w for w in named) and not any("clocks were held" in w for w in named)


def test_a_slow_copy_names_a_process_that_came_and_went() -> None:
    # Transform: the measured 4 x H200 bandwidth result, GPU1->GPU2 one-way at 0.5 x, and a sampling
    # in which another user's process was on GPU2 for part of the pass.
    gpus = tuple(_gpu(i, foreign=(GEMM,) if i == 2 else ()) for i in range(4))
    bw = replace(bandwidth_result(bw_measure("oneway", 1, 2, 0.5)), during=RunSampling(0.2, RUN_S, 70, gpus))
    m = bw.find("oneway", 1, 2)
    assert m is not None and m.value is not None and bw.snapshot is not None
    sym = DeviceSymptom("copy", 1, 2, m.value.median, m.value.median * 2)
    c = device_cause(sym, bw.snapshot, bw.activity, "fix", bw.during, sampled=True)
    assert "pid 3120" in c.what and "came and went" in c.what
    old = device_cause(sym, bw.snapshot, bw.activity, "fix", None, sampled=True)
    assert judged.not_sampled() in old.ruled_out and "pid 3120" not in old.what


def test_a_process_at_the_start_and_another_mid_run_are_told_apart() -> None:
    res = load_result(RUNS / "coll-foreign-gemm.json")  # the GEMM (pid 2972) on GPU1 when the run started
    again = replace(GEMM, pid=2972, first_s=0.0, last_s=RUN_S)  # the samples saw it too: named once
    f = next(f for f in judge(replace(res, during=_sampled(foreign=(again, GEMM))), None) if f.code == "TD007")
    assert f.message.count("pid 2972") == 1 and "99 % busy with pid 2972" in f.message
    assert "when measuring started; during the run also pid 3120" in f.message and "came and went" in f.message
    c = _td001(replace(res, during=_sampled(foreign=(again, GEMM)))).cause
    assert c is not None and c.explains is not None and c.explains > 0.9  # time-sliced with the GEMM of the start


def test_low_hbm_while_protection_held_the_clocks_names_it() -> None:
    # Transform: the derived slow-HBM GPU2 of the 4 x H200 host (its snapshot idle and unthrottled),
    # with a sampling of the kernels' run in which HW slowdown held GPU2 in 50 of 70 samples.
    fit = fitness_result("hbm-slow-gpu2")
    gpus = tuple(_gpu(i, reasons={"hw_slowdown": 50} if i == 2 else {}) for i in range(4))
    held = replace(fit, during=RunSampling(0.2, RUN_S, 70, gpus))
    for res, found in ((held, True), (fit, False)):
        ctx = Context(snapshot("h200-x4"), capture_environment({}), fitness=res)
        f = next(f for f in evaluate(ctx, select=["TD711"]))
        assert f.cause is not None and f.severity == "error"
        assert ("GPU2's clocks were held down while the run went on" in f.cause.what) is found
        assert (judged.not_sampled() in f.cause.ruled_out) is not found
