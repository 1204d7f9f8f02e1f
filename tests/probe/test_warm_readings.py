"""The live readings' binding made while the probe runs (probe/counters.py ``WarmReadings``), on the
2 x H100 NVSwitch host's recording through the fake NVML: every GPU's readings, and the watch's
around the copies, asked once in the thread, the binding handed over, and a binding that cannot be
made leaving the readings to say so."""

from __future__ import annotations

from typing import Any

from topodoctor.probe.api import NvmlCallError
from topodoctor.probe.counters import FI_NVLINK_THROUGHPUT_DATA_TX, MAX_LINKS, WarmReadings, activity
from topodoctor.probe.during import FI_PCIE_REPLAY
from topodoctor.probe.replay import FakeNvml, recording_from_data, resolve


class Logged:
    """The recording's NVML, every call it is asked logged."""

    def __init__(self) -> None:
        name, data = resolve("h100-x2")
        self.fake: FakeNvml = recording_from_data(data, name).fakes()[0]
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def call(self, fn: str, *args: Any) -> Any:
        self.calls.append((fn, args))
        return self.fake.call(fn, *args)


def test_every_gpu_s_readings_are_asked_once_before_the_copies() -> None:
    api = Logged()
    warm = WarmReadings(lambda: api)
    assert warm.api() is api and warm.ready_at > 0
    asked = [fn for fn, _ in api.calls]
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetMemoryInfo"):
        assert asked.count(fn) == 2, fn  # both GPUs of the host
    assert asked.count("nvmlDeviceGetUtilizationRates") == 4  # the activity's, and the watch's sample
    fields = [args for fn, args in api.calls if fn == "nvmlDeviceGetFieldValues"]
    assert [f[1] for f in fields[:2]] == [[[FI_NVLINK_THROUGHPUT_DATA_TX, 0]]] * 2
    # the watch around the copies (probe/during.py): its link error counters on every link a GPU may
    # have, and its limits, asked once per GPU
    counters = [f for f in fields[2:] if [FI_PCIE_REPLAY, 0] in f[1]]
    assert [f[0] for f in counters] == ["gpu:0", "gpu:1"] and len(counters[0][1]) == 1 + 3 * MAX_LINKS
    assert asked.count("nvmlDeviceGetEnforcedPowerLimit") == 2
    # the readings taken later through it are the pass's own
    before = len(api.calls)
    activity(api, 1)
    assert len(api.calls) > before


def test_a_binding_that_cannot_be_made_leaves_the_readings_to_the_pass() -> None:
    def broken() -> Any:
        raise NvmlCallError(9, "driver not loaded")

    assert WarmReadings(broken).api() is None
    assert WarmReadings(lambda: None).api() is None
