"""Every call of the h200-x1 recording (the host recorded with the fitness calls) refused in
turn: what could not be read is could-not-check on its GPU, never a fault of the hardware."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import RECORDINGS
from tests_support import judged

from topodoctor.core.errors import ProbeUnavailable
from topodoctor.probe.collect import collect
from topodoctor.probe.replay import FakeNvml, ReplaySysfs
from topodoctor.rules import Context, Environment, evaluate

X1 = json.loads(next(p for p in RECORDINGS if p.stem == "h200-x1").read_text())
QUIET = Environment({}, {}, {}, (), None)
NO_PERMISSION, GPU_IS_LOST = 4, 15
FITNESS_CALLS = {
    "nvmlDeviceGetViolationStatus",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetSupportedClocksEventReasons",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetApplicationsClock",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetMemoryBusWidth",
}


def _refused(i: int, **error: Any) -> list[dict[str, Any]]:
    calls = json.loads(json.dumps(X1["nvml"]))
    calls[i] = {k: v for k, v in calls[i].items() if k != "result"} | error
    return calls


def _run(calls: list[dict[str, Any]], reads: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    ev = evaluate(Context(collect(FakeNvml(calls, "x1"), ReplaySysfs(reads, "x1")), QUIET))
    return judged(ev.findings), judged(ev.incomplete)


def test_the_unchanged_recording_is_healthy() -> None:
    assert _run(X1["nvml"], X1["sysfs"]) == ([], [])


# nvmlDeviceGetNvLinkState is the link-by-link scan of a GPU whose NVML reports no link count
# (this host): a refused first answer ends the scan with no links and no could-not-check yet,
# which the probe-wide sweep of refused calls owns.
CASES = [
    i for i, c in enumerate(X1["nvml"]) if c["fn"] not in ("nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetNvLinkState")
]


@pytest.mark.parametrize("i", CASES, ids=lambda i: f"{i}-{X1['nvml'][i]['fn']}")
def test_a_refused_call_is_could_not_check_never_a_fault(i: int) -> None:
    findings, incomplete = _run(_refused(i, error=NO_PERMISSION), X1["sysfs"])
    faults = [f for f in findings if f.code != "TD901" and f.severity in ("error", "critical")]
    assert faults == [], "a value that could not be read was judged as bad hardware"
    assert incomplete, "a refused call passed silently"
    if X1["nvml"][i]["fn"] in FITNESS_CALLS:
        assert {f.subject for f in incomplete} == {"GPU0"}


@pytest.mark.parametrize("fn", sorted(FITNESS_CALLS))
def test_a_fitness_call_answering_lost_loses_the_gpu(fn: str) -> None:
    i = next(i for i, c in enumerate(X1["nvml"]) if c["fn"] == fn)
    findings, _ = _run(_refused(i, error=GPU_IS_LOST), X1["sysfs"])
    assert {f.code for f in findings if f.severity in ("error", "critical")} == {"TD507"}


@pytest.mark.parametrize("n", [0, 1])
def test_an_unreadable_clock_is_could_not_check_for_the_rate_rules(n: int) -> None:
    """/proc/uptime times the window; unreadable, the rate rules say they could not check it."""
    reads = json.loads(json.dumps(X1["sysfs"]))
    uptime = [r for r in reads if r["path"] == "/proc/uptime"][n]
    uptime.pop("result")
    uptime["error"] = "EACCES"
    findings, incomplete = _run(X1["nvml"], reads)
    assert not [f for f in findings if f.code != "TD901"]
    assert any("at_s" in f.evidence["field"] and "TD211" in f.evidence["rules"] for f in incomplete)


def test_without_nvml_nothing_is_checked() -> None:
    with pytest.raises(ProbeUnavailable):
        _run(_refused(0, error=NO_PERMISSION), X1["sysfs"])


ALWAYS = ("nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex")
# The fitness calls whose answers a rule reads (the others are for the metrics and the scan).
JUDGED = FITNESS_CALLS - {
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMemoryBusWidth",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetSupportedClocksEventReasons",
} | {"nvmlDeviceGetFieldValues"}
FUNCTIONS = sorted({c["fn"] for c in X1["nvml"]} - set(ALWAYS))


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_a_recording_made_before_a_call_existed_replays(fn: str) -> None:
    """Any call left out altogether, as by an older topodoctor: the recording replays, and what
    needed the call says it is not recorded; nothing is judged as a fault of the host."""
    calls = [c for c in X1["nvml"] if c["fn"] != fn]
    ev = evaluate(Context(collect(FakeNvml(calls, "older"), ReplaySysfs(X1["sysfs"], "older")), QUIET))
    faults = [f for f in ev.findings if f.code != "TD901" and f.severity in ("error", "critical")]
    assert faults == []
    unrecorded = [f for f in ev.incomplete if f.evidence.get("error") == "NOT_RECORDED"]
    if fn in JUDGED:
        assert unrecorded, "a check that needed the call did not say so"
    if unrecorded:
        (note,) = unrecorded
        assert note.severity == "info" and any(c.startswith(fn) for c in note.evidence["calls"])
