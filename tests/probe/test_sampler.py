"""The one NVML sampler in both of its uses: a job's activity in the foreground (replayed from the
recordings of real hosts, asking exactly the calls they hold) and a load's clocks on a thread; a
GPU that stops answering stops being asked."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from conftest import FIXTURES

from topodoctor.probe import sampler
from topodoctor.probe.api import GPU_IS_LOST, NOT_SUPPORTED, NvmlCallError
from topodoctor.probe.replay import FakeNvml

ACTIVITY = FIXTURES / "job" / "activity"


class Counting:
    """An NVML boundary that counts the calls it passes on."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, Counter[str]()

    def call(self, fn: str, *args: Any) -> Any:
        self.calls[json.dumps([fn, list(args)])] += 1
        return self.inner.call(fn, *args)


@pytest.mark.parametrize("name", ["hang", "idle"])
def test_a_replayed_sampling_asks_what_was_recorded_and_no_more(name: str) -> None:
    doc = json.loads((ACTIVITY / f"{name}.json").read_text())
    api = Counting(FakeNvml(doc["nvml"], name))
    got = sampler.activity(api, doc["samples"], doc["interval_s"], sleep=lambda s: None)
    assert api.calls == Counter(json.dumps([c["fn"], c["args"]]) for c in doc["nvml"])
    (gpu,) = got.gpus
    utils = [c["result"]["gpu"] for c in doc["nvml"] if c["fn"] == "nvmlDeviceGetUtilizationRates"]
    assert list(gpu.util) == utils and len(gpu.power_w) == doc["samples"] and gpu.error == ""
    assert sampler.replay_activity(doc, name).gpus == got.gpus


class Flaky:
    """Two GPUs: GPU1 is lost at its third utilisation reading; power is unsupported on GPU0."""

    def __init__(self) -> None:
        self.util_asks = Counter[str]()
        self.calls: list[str] = []

    def call(self, fn: str, *args: Any) -> Any:
        self.calls.append(f"{fn}{args}")
        answers: dict[str, Any] = {
            "nvmlInit": None,
            "nvmlDeviceGetCount": 2,
            "nvmlDeviceGetHandleByIndex": f"gpu:{args[0]}" if args else None,
            "nvmlDeviceGetUUID": f"GPU-{args[0]}" if args else "",
            "nvmlDeviceGetPciInfo": {"busId": "00000000:0A:00.0"},
            "nvmlDeviceGetEnforcedPowerLimit": 700_000,
            "nvmlDeviceGetComputeRunningProcesses": [{"pid": 7, "usedGpuMemory": 1 << 20}],
        }
        if fn == "nvmlDeviceGetUtilizationRates":
            self.util_asks[args[0]] += 1
            if args[0] == "gpu:1" and self.util_asks[args[0]] >= 3:
                raise NvmlCallError(GPU_IS_LOST)
            return {"gpu": 40 + self.util_asks[args[0]]}
        if fn == "nvmlDeviceGetPowerUsage":
            if args[0] == "gpu:0":
                raise NvmlCallError(NOT_SUPPORTED)
            return 250_000
        return answers[fn]


def test_a_lost_gpu_keeps_what_it_had_and_is_asked_nothing_more() -> None:
    api = Flaky()
    got = sampler.activity(api, samples=5, interval_s=0.0, sleep=lambda s: None)
    g0, g1 = got.gpus
    assert g0.util == (41, 42, 43, 44, 45) and g0.power_w == () and g0.error == "" and g0.processes == ((7, 1 << 20),)
    assert g1.util == (41, 42) and g1.power_w == (250.0, 250.0) and "GPU_IS_LOST" in g1.error and g1.processes == ()
    assert api.util_asks["gpu:1"] == 3 and not any("gpu:1" in c and "Processes" in c for c in api.calls)


def test_metrics_are_read_as_asked() -> None:
    api = Flaky()
    s = sampler.Sampler(api, [1], metrics=("power_w",))
    readings = s.take(2, sleep=lambda t: None)
    assert [(r.power_w, r.util, r.sm_mhz) for r in readings] == [(250.0, None, None)] * 2
    assert not api.util_asks  # a metric not asked is not read
    with pytest.raises(KeyError):
        sampler.Sampler(api, [0], metrics=("fan",)).tick()


def test_no_driver_is_said_as_every_command_says_it() -> None:
    """`job --live` without a driver: the words a probe of any other command gives."""
    from topodoctor.core.errors import ProbeUnavailable
    from topodoctor.model.nvml_codes import init_failure
    from topodoctor.probe.api import LIBRARY_NOT_FOUND

    class NoDriver:
        def call(self, fn: str, *args: Any) -> Any:
            raise NvmlCallError(LIBRARY_NOT_FOUND)

    with pytest.raises(ProbeUnavailable) as said:
        sampler.activity(NoDriver(), samples=1, interval_s=0.0, sleep=lambda s: None)
    assert str(said.value) == init_failure("LIBRARY_NOT_FOUND")
    assert str(said.value) == "no NVIDIA driver here: libnvidia-ml.so.1 not found (nvmlInit: LIBRARY_NOT_FOUND)"
