"""The NVML warm-up of a live probe's child (probe/nvml.py ``WarmUp``): it makes the driver's slow
first calls in a thread while the probe loads, judges nothing, and a failure is left for the probe
to meet (the probe makes the same calls)."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from topodoctor.probe.nvml import WarmUp


def _fake_nvml(calls: list[str], fail_at: str | None = None, gate: threading.Event | None = None) -> types.ModuleType:
    nv = types.ModuleType("pynvml")

    def answer(name: str, value: object = None) -> object:
        def call(*args: object) -> object:
            if gate is not None:
                gate.wait(5)
            calls.append(name)
            if name == fail_at:
                raise RuntimeError("NVML_ERROR_UNKNOWN")
            return value

        return call

    nv.nvmlInit = answer("init")  # type: ignore[attr-defined]
    nv.nvmlDeviceGetCount = answer("count", 2)  # type: ignore[attr-defined]
    nv.nvmlDeviceGetHandleByIndex = answer("handle", object())  # type: ignore[attr-defined]
    nv.nvmlDeviceGetCpuAffinityWithinScope = answer("affinity")  # type: ignore[attr-defined]
    return nv


def test_it_meets_every_gpu_once_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    gate = threading.Event()
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(calls, gate=gate))
    warm = WarmUp()
    assert calls == []  # the caller goes on while the driver answers
    gate.set()
    warm.join()
    assert calls == ["init", "count", "handle", "affinity", "handle", "affinity"]


def test_a_failure_is_left_to_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(calls, fail_at="count"))
    WarmUp().join()
    assert calls == ["init", "count"]


def test_no_binding_is_left_to_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    WarmUp().join()
