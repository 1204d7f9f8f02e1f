"""NVML while a measurement runs (probe/during.py), through the fake NVML answering from the 2 x H100
recording (tests read its own answers for clocks, power, temperature, limits and the link counters),
with the calls a run adds scripted on top, one answer per sample: the processes on each GPU (the two
ranks, children of the sampling process, and another user's GEMM in the middle samples only), the
per-process SM shares, utilisation, clock-event reasons, and the counters read once more at the end.
/proc answers come from a fake sysfs: the sampling process is pid 4242."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from conftest import FIXTURES

from topodoctor.core.budget import Budget, await_child, command_pid, fork_work
from topodoctor.core.codec import from_jsonable, to_jsonable
from topodoctor.model.collectives import CollectivesResult, load_result
from topodoctor.model.during import RunSampling
from topodoctor.probe import during
from topodoctor.probe.during import RunWatch, watch
from topodoctor.probe.replay import FakeNvml, ReplaySysfs, resolve
from topodoctor.probe.sources import probe_host

_, H100 = resolve("h100-x2")
RUNS = FIXTURES / "diagnosis" / "h100-x2"
ME, RANK0, RANK1, GEMM = 4242, 4243, 4244, 5150
COMMAND, TIMER = 4200, 4201  # the command that forked the sampling process, and its early copy timer
STARTER, PASS_TIMER = 4202, 4203  # a check's child that starts the measurement passes, and a timer it spawned
GEMM_CMD = "python3 tests/gpu/foreign_gemm.py 1 6"


def _proc(pid: int, parent: int, uid: int, argv: list[str]) -> list[dict[str, Any]]:
    status = f"Name:\tpython3\nPid:\t{pid}\nPPid:\t{parent}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
    cmdline = ("\0".join(argv) + "\0").encode().hex()
    return [
        {"op": "read", "path": f"/proc/{pid}/status", "result": status},
        {"op": "read", "path": f"/proc/{pid}/cgroup", "result": "0::/user.slice/session-1.scope\n"},
        {"op": "read_hex", "path": f"/proc/{pid}/cmdline", "result": cmdline},
    ]


PROC = ReplaySysfs(
    [
        {"op": "realpath", "path": "/proc/self", "result": f"/proc/{ME}"},
        {"op": "read", "path": "/proc/self/cgroup", "result": "0::/user.slice/session-1.scope\n"},
        *_proc(ME, 1, 1000, ["python3", "-m", "topodoctor", "collectives"]),
        *_proc(RANK0, ME, 1000, ["python3", "-m", "topodoctor.measure.collectives.rank.main"]),
        *_proc(RANK1, ME, 1000, ["python3", "-m", "topodoctor.measure.collectives.rank.main"]),
        *_proc(GEMM, 5100, 0, GEMM_CMD.split()),
        *_proc(TIMER, COMMAND, 1000, ["python3", "-m", "topodoctor.measure.copies.runner"]),
        *_proc(STARTER, COMMAND, 1000, ["python3", "-m", "topodoctor", "check", "--level", "quick"]),
        *_proc(PASS_TIMER, STARTER, 1000, ["python3", "-m", "topodoctor.measure.timer", "bandwidth"]),
    ],
    "proc",
)


def _listed(*pids: int) -> list[dict[str, Any]]:
    return [{"pid": p, "usedGpuMemory": 1 << 30} for p in pids]


class Script:
    """The recording's calls, some replaced by one scripted answer per sample."""

    def __init__(self) -> None:
        self.calls = list(H100["nvml"])
        for i in (0, 1):
            self.each("nvmlDeviceGetUtilizationRates", [f"gpu:{i}"], [{"gpu": 100, "memory": 60}])
            self.each("nvmlDeviceGetComputeRunningProcesses", [f"gpu:{i}"], [_listed(RANK0 + i)])

    def each(self, fn: str, args: list[Any], answers: list[Any], error: int | None = None) -> Script:
        self.calls = [c for c in self.calls if (c["fn"], c["args"]) != (fn, args)]
        for a in answers:
            self.calls.append({"fn": fn, "args": args, **({"error": error} if error else {"result": a})})
        return self

    def counters(self, i: int, after: dict[str, int]) -> Script:
        """The counter batch of GPU ``i`` answered twice: as recorded, then with ``after`` changes."""
        ids = [[during.FI_PCIE_REPLAY, 0]] + [[fid, ln] for ln in range(18) for fid in during.LINK_COUNTERS]
        fields = FakeNvml(H100["nvml"], "h100-x2")._field_by_field([f"gpu:{i}", ids])
        before = [{**f, "value": f["value"] if f["value"] is not None else 0} for f in fields]

        def named(f: dict[str, Any]) -> str:
            fid, scope = f["field"], f["scope"]
            return "pcie_replay" if fid == during.FI_PCIE_REPLAY else f"nvlink{scope}_{during.LINK_COUNTERS[fid]}"

        later = [{**f, "value": f["value"] + after.get(named(f), 0)} for f in before]
        return self.each("nvmlDeviceGetFieldValues", [f"gpu:{i}", ids], [before, later])

    def watch(self, ticks: int, commands: tuple[int, ...] = ()) -> RunSampling:
        clock = iter(0.2 * n for n in range(ticks + 2))  # start, one per sample, stop: 0.2 s apart
        api = FakeNvml(self.calls, "script")
        w = RunWatch(api, [0, 1], {0: 18, 1: 18}, PROC, clock=lambda: next(clock), commands=commands)
        w.start(thread=False)
        for _ in range(ticks):
            w.sampler.tick()
        return w.stop()


def test_a_process_in_the_middle_samples_only_is_kept_with_when_it_was_seen() -> None:
    s = Script().each(
        "nvmlDeviceGetComputeRunningProcesses",
        ["gpu:1"],
        [_listed(RANK1), _listed(RANK1, GEMM), _listed(RANK1, GEMM), _listed(RANK1)],
    )
    rows = [{"pid": GEMM, "timeStamp": 1000, "smUtil": 47}, {"pid": RANK1, "timeStamp": 1000, "smUtil": 50}]
    s.each("nvmlDeviceGetProcessUtilization", ["gpu:1", 0], [rows])
    s.each("nvmlDeviceGetProcessUtilization", ["gpu:1", 1000], [None], error=6)  # NOT_FOUND: no newer samples
    got = s.watch(4)
    g0, g1 = got.gpus
    assert got.ticks == 4 and got.duration_s == pytest.approx(1.0) and g1.samples == 4
    (p,) = g1.foreign
    assert (p.pid, p.uid, p.command, p.samples, p.sm_util_pct) == (GEMM, 0, GEMM_CMD, 2, 47)
    assert p.first_s == pytest.approx(0.4) and p.last_s == pytest.approx(0.6)
    assert g0.foreign == () and g0.own == 1 and g1.own == 1  # the ranks are ours: never foreign


def test_the_sampling_process_and_its_children_are_never_foreign() -> None:
    s = Script().each("nvmlDeviceGetComputeRunningProcesses", ["gpu:0"], [_listed(ME, RANK0)])
    g0, _ = s.watch(3).gpus
    assert g0.foreign == () and g0.own == 2


@pytest.mark.parametrize(("commands", "own"), [((COMMAND,), True), ((), False)])
def test_a_sibling_started_by_the_command_is_ours_only_as_the_commands_child(
    commands: tuple[int, ...], own: bool
) -> None:
    # A check samples in the child its command forked; `bandwidth` starts its copy timer in the
    # command, before that fork: the timer is the sampling process's sibling.
    s = Script().each("nvmlDeviceGetComputeRunningProcesses", ["gpu:0"], [_listed(TIMER)])
    g0, _ = s.watch(2, commands).gpus
    assert (g0.own, len(g0.foreign)) == ((1, 0) if own else (0, 1))


def test_a_forked_child_works_for_the_command_that_forked_it() -> None:
    child = fork_work(lambda deadline: {"command": command_pid(), "me": os.getpid()}, time.monotonic() + 20)
    got = await_child(child, Budget.start(20))
    assert got["command"] == os.getpid() != got["me"] and command_pid() == os.getpid()


def test_clock_event_reasons_are_counted_per_sample() -> None:
    thermal, cap = 0x40 | 0x4, 0x4
    s = Script().each("nvmlDeviceGetCurrentClocksEventReasons", ["gpu:1"], [cap, thermal, thermal, cap])
    s.each("nvmlDeviceGetCurrentClocksEventReasons", ["gpu:0"], [cap])
    s.each("nvmlDeviceGetClockInfo", ["gpu:1", 1], [1980, 1410, 1200, 1980])
    g0, g1 = s.watch(4).gpus
    assert g1.reasons == {"sw_power_cap": 4, "hw_thermal_slowdown": 2} and g1.slowdown() == {"hw_thermal_slowdown": 2}
    assert (g1.sm_mhz_min, g1.sm_mhz_max) == (1200, 1980)
    assert g0.reasons == {"sw_power_cap": 4} and g0.slowdown() == {}  # the power cap alone is no slowdown


def test_a_counter_that_rose_and_one_that_did_not() -> None:
    got = Script().counters(0, {"nvlink3_replay": 5}).counters(1, {}).watch(2)
    g0, g1 = got.gpus
    assert g0.rose() == {"nvlink3_replay": 5} and g1.rose() == {}
    assert g1.counters_before == g1.counters_after and len(g1.counters_after) == 1 + 3 * 18


def test_the_recorded_counters_read_before_and_after() -> None:
    g0, _ = Script().watch(1).gpus  # the recording answers the counters as the probe read them
    assert g0.counters_before["pcie_replay"] == 2 and "nvlink17_crc" in g0.counters_after and g0.rose() == {}


def test_a_gpu_lost_mid_run_keeps_what_it_had() -> None:
    s = Script().each("nvmlDeviceGetUtilizationRates", ["gpu:1"], [{"gpu": 99, "memory": 1}])
    s.calls.append({"fn": "nvmlDeviceGetUtilizationRates", "args": ["gpu:1"], "error": 15})  # GPU_IS_LOST
    _, g1 = s.watch(4).gpus
    assert g1.samples == 1 and "GPU_IS_LOST" in g1.error and g1.counters_after == {}


class Slow:
    """An NVML boundary that answers every call after ``delay_s`` and counts the samples it served."""

    def __init__(self, inner: Any, delay_s: float = 0.0, fail_after: int | None = None) -> None:
        self.inner, self.delay_s, self.fail_after, self.util = inner, delay_s, fail_after, 0

    def call(self, fn: str, *args: Any) -> Any:
        if fn == "nvmlDeviceGetUtilizationRates":
            self.util += 1
            if self.fail_after is not None and self.util > self.fail_after:
                raise RuntimeError("a binding that breaks")
        time.sleep(self.delay_s)
        return self.inner.call(fn, *args)


@pytest.mark.slow  # a real thread sampling for a few tenths of a second
def test_the_thread_samples_until_stopped_and_stops_at_once() -> None:
    api = Slow(FakeNvml(Script().calls, "script"))
    w = RunWatch(api, [0, 1], {0: 18, 1: 18}, PROC, interval_s=0.01).start()
    time.sleep(0.3)
    t0 = time.monotonic()
    got = w.stop()
    assert time.monotonic() - t0 < 0.5 and not w.sampler._thread.is_alive()
    assert got.ticks >= 5 and got.ticks * 2 == api.util and got.tick_ms is not None and got.error == ""


def test_a_long_run_stretches_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(during, "MAX_TICKS", 4)
    w = RunWatch(FakeNvml(Script().calls, "script"), [0], {0: 18}, PROC, interval_s=0.01).start(thread=False)
    for _ in range(9):
        w.sampler.tick()
    assert w.sampler.interval_s == pytest.approx(0.04)  # doubled at 4 samples, again at 8


@pytest.mark.slow  # a real thread sampling for a few tenths of a second
def test_a_binding_that_breaks_ends_the_sampling_not_the_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(during, "LiveSysfs", lambda root: PROC)
    snap = probe_host("h100-x2").snapshot
    api = Slow(FakeNvml(Script().calls, "script"), fail_after=4)
    with watch(api, snap) as w:
        time.sleep(0.6)  # the work being watched
    assert w.sampling is not None and "RuntimeError" in w.sampling.error and w.sampling.ticks == 2
    assert w.run is not None and not w.run.sampler._thread.is_alive()
    assert [g.own for g in w.sampling.gpus] == [1, 1]


def test_no_binding_or_no_host_watches_nothing() -> None:
    res = load_result(RUNS / "coll-default.json")
    with watch(None, res.snapshot) as w:
        pass
    assert w.sampling is None and w.attach(res) is res


def test_the_sampling_travels_with_the_result_and_an_older_result_has_none() -> None:
    old = load_result(RUNS / "coll-foreign-gemm.json")
    assert old.during is None  # made before runs were sampled: loads, says nothing was sampled
    s = Script().each("nvmlDeviceGetComputeRunningProcesses", ["gpu:1"], [_listed(RANK1, GEMM)])
    w = during.Watch(None)
    w.sampling = s.watch(2)
    res = w.attach(old)
    assert res.during is not None and [g.index for g in res.during.gpus] == [a.index for a in old.activity]
    back = from_jsonable(CollectivesResult, json.loads(json.dumps(to_jsonable(res))), "result")
    assert back == res and back.during is not None and back.during.gpus[1].foreign[0].pid == GEMM


def test_a_binding_that_breaks_at_once_leaves_no_watch() -> None:
    class Broken:
        def call(self, fn: str, *args: Any) -> Any:
            raise RuntimeError("a binding that breaks")

    res = load_result(RUNS / "coll-default.json")
    with watch(Broken(), res.snapshot) as w:
        pass
    assert w.run is None and w.sampling is None and w.attach(res) is res


def test_what_was_seen_is_handed_over_before_the_closing_read_and_completed_by_it() -> None:
    """The closing read of the link counters once took the measuring process down: before it, the
    caller gets the run's sampling with every GPU's counters after unread and saying why."""
    s = Script().counters(0, {"nvlink3_crc": 4})
    clock = iter(0.2 * n for n in range(5))
    w = RunWatch(FakeNvml(s.calls, "script"), [0, 1], {0: 18, 1: 18}, PROC, clock=lambda: next(clock))
    w.start(thread=False)
    w.sampler.tick()
    handed: list[RunSampling] = []
    final = w.stop(handed.append)
    (early,) = handed
    assert early.ticks == final.ticks == 1 and early.duration_s == final.duration_s
    assert all(g.counters_before and not g.counters_after for g in early.gpus)
    assert {g.counters_error for g in early.gpus} == {during.CLOSING_UNREAD}
    g0 = final.gpus[0]
    assert g0.counters_error == "" and g0.rose() == {"nvlink3_crc": 4}


def test_a_sampling_without_its_closing_read_leaves_the_link_counters_unjudged() -> None:
    from topodoctor.diagnosis.during import counters_rose

    s = Script()
    clock = iter(0.2 * n for n in range(5))
    w = RunWatch(FakeNvml(s.calls, "script"), [0], {0: 18}, PROC, clock=lambda: next(clock))
    w.start(thread=False)
    handed: list[RunSampling] = []
    w.stop(handed.append)
    found, ruled = counters_rose(list(handed[0].gpus), handed[0].duration_s)
    assert found == [] and ruled == [f"link counters of GPU0: not read ({during.CLOSING_UNREAD})"]


def test_the_probe_counts_the_command_s_copy_timer_as_its_own_and_nobody_else() -> None:
    """A `bandwidth` forks its copy timer before its probe's child: by the probe the timer holds a
    context on every GPU, the child's sibling. The live probe names the command (``commands``), so
    the timer is topodoctor's own there, as in the watch; another user's process never is."""
    from topodoctor.probe.processes import describe

    me = (ME, None)
    assert describe(PROC, TIMER, 1 << 29, me, (COMMAND,)).ours is True
    assert describe(PROC, COMMAND, 1 << 29, me, (COMMAND,)).ours is True
    assert describe(PROC, TIMER, 1 << 29, me).ours is False  # a replay names no command
    assert describe(PROC, GEMM, 1 << 29, me, (COMMAND,)).ours is False


def test_the_timer_a_check_s_passes_spawn_is_its_own_and_a_stranger_s_grandchild_is_not() -> None:
    """`check --level quick` starts its passes in a child before it probes, and that child spawns the copy
    and fitness timers: by the probe, a timer holds a context on the GPU as the command's grandchild. Seen on
    a one-GPU H200 host (2026-12-02): counted as another job's, it kept the check's own fitness pass off the
    GPU ("GPU0 is busy")."""
    from topodoctor.probe.processes import describe

    me = (ME, None)
    assert describe(PROC, PASS_TIMER, 1 << 29, me, (COMMAND,)).ours is True
    assert describe(PROC, PASS_TIMER, 1 << 29, me).ours is False  # a replay names no command
    assert describe(PROC, PASS_TIMER, 1 << 29, me, (ME,)).ours is False  # another command's grandchild
    assert describe(PROC, GEMM, 1 << 29, me, (5100,)).ours is True  # a child of the command
    assert describe(PROC, GEMM, 1 << 29, me, (4999,)).ours is False  # its parent's /proc unrecorded: not ours
