"""The driver's warm-up (probe/warm_up.py): the slow first calls go straight to the library in two
threads while the caller imports the binding; nothing is judged, and every failure is left for
the probe to meet (it makes the same calls through the binding)."""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

import pytest

from topodoctor.probe import warm_up
from topodoctor.probe.warm_up import SLOW_FIRST_CALLS, WarmUp

NOT_SUPPORTED, GPU_IS_LOST = 3, 15
SLOW = [name for name, _ in SLOW_FIRST_CALLS]


class _Library:
    """libnvidia-ml as the warm-up calls it: each call recorded, answering ``codes`` (by "name"
    or "name@gpuN") or success, out arguments filled (two GPUs)."""

    def __init__(self, calls: list[str], codes: dict[str, int], gate: threading.Event | None) -> None:
        self._calls, self._codes, self._gate = calls, codes, gate

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> int:
            if self._gate is not None:
                self._gate.wait(5)
            gpu = ""
            if name == "nvmlDeviceGetCount_v2":
                args[0]._obj.value = 2
            elif name == "nvmlDeviceGetHandleByIndex_v2":
                gpu = f"@gpu{args[0].value}"
                args[1]._obj.value = 1000 + args[0].value
            elif args and isinstance(args[0], ctypes.c_void_p):
                gpu = f"@gpu{args[0].value - 1000}"
            self._calls.append(name + gpu)
            return self._codes.get(name + gpu, self._codes.get(name, 0))

        return call


def _library(
    monkeypatch: pytest.MonkeyPatch, codes: dict[str, int] | None = None, gate: threading.Event | None = None
) -> list[str]:
    calls: list[str] = []
    lib = _Library(calls, codes or {}, gate)

    def load(name: str) -> _Library:
        calls.append(f"load {name}")
        return lib

    monkeypatch.setattr(warm_up.ctypes, "CDLL", load)
    monkeypatch.setattr(warm_up, "LIBRARY", "libnvidia-ml.so.1")  # the test guard's refusal undone: the library is fake
    return calls


def _handles(n: int) -> list[str]:
    return [f"nvmlDeviceGetHandleByIndex_v2@gpu{i}" for i in range(n)]


def _affinity(n: int) -> str:
    return f"nvmlDeviceGetCpuAffinityWithinScope@gpu{n}"


def _slow(n: int, slow: list[str] = SLOW) -> list[str]:
    return [f"{s}@gpu{n}" for s in slow]


START = ["load libnvidia-ml.so.1", "nvmlInit_v2", "nvmlDeviceGetCount_v2"]


def _threads(calls: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The calls in their threads' orders: the start and the handles, then the affinities (the
    second thread) and the slow calls (the first) as each thread made them."""
    head = len(START) + len([c for c in calls if c.startswith("nvmlDeviceGetHandleByIndex")])
    rest = calls[head:]
    return calls[:head], [c for c in rest if "CpuAffinity" in c], [c for c in rest if "CpuAffinity" not in c]


def test_it_meets_every_gpu_in_threads_while_the_binding_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    calls = _library(monkeypatch, gate=gate)
    imported: list[str] = []
    real_import = warm_up.importlib.import_module
    monkeypatch.setattr(warm_up.importlib, "import_module", lambda name: imported.append(name) or real_import("json"))
    warm = WarmUp()
    assert imported == [] and calls == ["load libnvidia-ml.so.1"]  # started first; the driver answers later
    warm.load_binding()
    assert imported == ["pynvml"]
    gate.set()
    warm.join()
    assert _threads(calls) == ([*START, *_handles(2)], [_affinity(0), _affinity(1)], [*_slow(0), *_slow(1)])


def test_the_affinities_are_asked_beside_the_slow_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second thread's first call reaches the driver while the first thread waits in its own."""
    both = threading.Barrier(2, timeout=5)
    met: list[str] = []

    class Meeting(_Library):
        def __getattr__(self, name: str) -> Any:
            call = super().__getattr__(name)
            if name not in ("nvmlDeviceGetCpuAffinityWithinScope", SLOW[0]):
                return call

            def meet(*args: Any) -> int:
                both.wait()  # each blocks until the other is in the driver too
                met.append(name)
                return call(*args)

            return meet

    calls: list[str] = []
    monkeypatch.setattr(warm_up.ctypes, "CDLL", lambda name: Meeting(calls, {}, None))
    WarmUp().join()
    assert sorted(met) == sorted([SLOW[0], "nvmlDeviceGetCpuAffinityWithinScope"] * 2)


def test_an_unsupported_call_is_passed_over_and_a_failing_gpu_left(monkeypatch: pytest.MonkeyPatch) -> None:
    fails = {SLOW[0]: NOT_SUPPORTED, f"{SLOW[2]}@gpu0": GPU_IS_LOST}
    calls = _library(monkeypatch, fails)
    WarmUp().join()
    # GPU0 stops at the call that lost it; GPU1 is still warmed, its unsupported call passed over.
    assert _threads(calls) == ([*START, *_handles(2)], [_affinity(0), _affinity(1)], [*_slow(0, SLOW[:3]), *_slow(1)])


@pytest.mark.parametrize("failing", ["nvmlInit_v2", "nvmlDeviceGetCount_v2"])
def test_a_driver_that_does_not_start_is_left_to_the_probe(monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    calls = _library(monkeypatch, {failing: 9})
    WarmUp().join()
    assert calls == START[: START.index(failing) + 1]


def test_no_library_and_no_binding_are_left_to_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(warm_up.ctypes, "CDLL", missing)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # its import fails too
    warm = WarmUp()
    warm.load_binding()
    warm.join()


def test_the_switch_interval_is_short_while_it_runs_and_given_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread holding the GIL hands it to the warm-up as soon as the driver answers it: each
    call would otherwise wait the interpreter's 5 ms switch interval."""
    seen: list[float] = []

    def load(name: str) -> _Library:
        seen.append(sys.getswitchinterval())
        return _Library([], {}, None)

    monkeypatch.setattr(warm_up.ctypes, "CDLL", load)
    before = sys.getswitchinterval()
    WarmUp().join()
    assert seen and seen[0] < before / 10
    assert sys.getswitchinterval() == before


def test_a_warm_up_begun_early_is_the_one_the_probe_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe's child begins the warm-up before its imports (service/early.py ``child_work``);
    the binding then joins that one, once, and a later probe in the process starts its own."""
    calls = _library(monkeypatch)
    monkeypatch.setattr(warm_up, "_begun", None)
    warm_up.begin()
    warm_up.begin()  # a second begin starts nothing more
    first = warm_up.take()
    first.join()
    assert calls.count("load libnvidia-ml.so.1") == 1
    second = warm_up.take()
    assert second is not first
    second.join()
    assert calls.count("load libnvidia-ml.so.1") == 2


def test_a_live_probe_s_child_begins_the_warm_up_before_its_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    from topodoctor.service import early, gather
    from topodoctor.service.passes import Source

    order: list[str] = []
    monkeypatch.setattr(warm_up, "begin", lambda: order.append("begin"))
    monkeypatch.setattr(gather, "work", lambda source, passes, deadline: order.append("probe") or {})
    early.child_work(Source())(1.0)
    early.child_work(Source(replay="h200-x4"))(1.0)
    assert order == ["begin", "probe", "probe"]  # a replay has no driver to warm
