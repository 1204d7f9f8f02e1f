"""The NVML server (probe/nvml_server.py): the probe's calls cross its pipe and come back as the
binding answered them, errors included, and the server never outlives or holds up its client."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from process_marks import gone

from topodoctor.core.codec import to_jsonable
from topodoctor.core.errors import ProbeUnavailable
from topodoctor.probe.api import NvmlCallError
from topodoctor.probe.collect import collect
from topodoctor.probe.nvml_server import NvmlServer
from topodoctor.probe.replay import recording_from_data

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "topodoctor" / "probe" / "recordings"
DERIVED = ROOT / "fixtures" / "derived"


def _recording(path: Path):  # type: ignore[no-untyped-def]
    return recording_from_data(json.loads(path.read_text()), path.stem)


@pytest.mark.parametrize("path", [RECORDINGS / "h200-x4.json", DERIVED / "x4-gpu-lost.json"], ids=lambda p: p.stem)
def test_the_probe_through_the_server_reads_what_the_binding_answers(path: Path) -> None:
    """A recording's fake NVML served from the other process: the snapshot is the one the fake
    gives in-process, its NVML errors (a lost GPU, unsupported calls) carried with their codes."""
    rec = _recording(path)
    server = NvmlServer.start(lambda: rec.fakes()[0])
    try:
        served = collect(server, rec.fakes()[1])
    finally:
        server.close()
    direct = collect(*rec.fakes())
    assert to_jsonable(served) == to_jsonable(direct)
    assert gone(server.pid)  # the end of its requests ends it


def test_an_error_comes_back_with_its_code_and_detail() -> None:
    class Failing:
        def call(self, fn: str, *args: object) -> object:
            raise NvmlCallError(15, f"{fn}{args}")

    server = NvmlServer.start(Failing)
    try:
        with pytest.raises(NvmlCallError) as err:
            server.call("nvmlDeviceGetName", "gpu:3")
    finally:
        server.close()
    assert (err.value.code, err.value.name, err.value.detail) == (15, "GPU_IS_LOST", "nvmlDeviceGetName('gpu:3',)")


def test_a_missing_binding_is_said_by_every_call() -> None:
    def missing() -> None:
        raise ProbeUnavailable("the nvidia-ml-py package is not installed (pip install nvidia-ml-py)")

    server = NvmlServer.start(missing)  # type: ignore[arg-type]
    try:
        for _ in range(2):
            with pytest.raises(ProbeUnavailable, match="nvidia-ml-py package is not installed"):
                server.call("nvmlInit")
    finally:
        server.close()


def test_a_server_that_dies_is_a_probe_that_cannot_run() -> None:
    class Slow:
        def call(self, fn: str, *args: object) -> object:
            time.sleep(60)
            return None

    server = NvmlServer.start(Slow)
    os.kill(server.pid, signal.SIGKILL)  # a crash in the driver
    with pytest.raises(ProbeUnavailable, match="died without an answer"):
        server.call("nvmlInit")
    server.close()


def test_it_holds_none_of_its_clients_descriptors() -> None:
    """A pipe the client opened before the server started (the client's own answer to its
    parent) ends when the client closes it, while the server still runs."""
    read_end, write_end = os.pipe()

    class Idle:
        def call(self, fn: str, *args: object) -> object:
            return fn

    server = NvmlServer.start(Idle)
    try:
        assert server.call("nvmlInit") == "nvmlInit"  # the server is up
        os.close(write_end)
        os.set_blocking(read_end, False)
        assert os.read(read_end, 1) == b""  # end of file: nobody else holds the write end
    finally:
        os.close(read_end)
        server.close()


def test_it_dies_with_its_client() -> None:
    """The kernel kills the server when the probe's child that started it dies (a budget's
    kill), even while the server sits in a driver call that never returns."""
    report_r, report_w = os.pipe()
    client = os.fork()
    if client == 0:
        os.close(report_r)

        class Hung:
            def call(self, fn: str, *args: object) -> object:
                time.sleep(3600)
                return None

        server = NvmlServer.start(Hung)
        server._requests.write('["nvmlInit", []]\n')  # asked, never answered
        server._requests.flush()
        os.write(report_w, str(server.pid).encode())
        os._exit(0)
    os.close(report_w)
    pid = int(os.read(report_r, 32))
    os.close(report_r)
    os.waitpid(client, 0)
    assert gone(pid), "the server outlived its client"


def test_the_calls_asked_ahead_cross_in_a_few_round_trips() -> None:
    """A 4-GPU host's probe (72 NVLinks, six pairs) asks hundreds of calls: through the server
    most go ahead in batches, and the snapshot is the one the binding gives call by call."""
    rec = _recording(RECORDINGS / "h200-x4.json")
    nvml, fs = rec.fakes()
    asked: list[str] = []
    real_call = nvml.call

    def counted(fn: str, *args: object) -> object:
        asked.append(fn)
        return real_call(fn, *args)

    nvml.call = counted  # type: ignore[method-assign]
    direct = collect(nvml, fs)
    server = NvmlServer.start(lambda: rec.fakes()[0])
    trips: list[str] = []
    real_ask = server._ask

    def ask(request: str) -> object:
        trips.append(request)
        return real_ask(request)

    server._ask = ask  # type: ignore[method-assign]
    try:
        served = collect(server, rec.fakes()[1])
    finally:
        server.close()
    assert to_jsonable(served) == to_jsonable(direct)
    assert len(asked) > 300 and len(trips) < len(asked) // 10, (len(asked), len(trips))


class _Spy:
    """A recording's fake NVML that also takes calls asked ahead, to hold each list of them to
    the calls the probe then makes."""

    def __init__(self, rec: object) -> None:
        self.api = rec.fakes()[0]  # type: ignore[attr-defined]
        self.ahead: list[str] = []
        self.made: list[str] = []

    def ask_ahead(self, calls: list[tuple[str, tuple[object, ...]]]) -> None:
        self.ahead += [json.dumps([fn, list(args)]) for fn, args in calls]

    def call(self, fn: str, *args: object) -> object:
        self.made.append(json.dumps([fn, list(args)]))
        return self.api.call(fn, *args)


@pytest.mark.parametrize("path", sorted(RECORDINGS.glob("*.json")), ids=lambda p: p.stem)
def test_every_call_asked_ahead_is_one_the_probe_makes(path: Path) -> None:
    """The lists of calls asked ahead (probe/gpu.py, probe/collect.py) are the probe's own calls:
    one that drifted would cost a driver call for nothing, and a missed one a round trip."""
    rec = _recording(path)
    spy = _Spy(rec)
    for fitness in (True, False):
        spy.ahead.clear()
        spy.made.clear()
        collect(spy, rec.fakes()[1], fitness)
        assert spy.ahead and not set(spy.ahead) - set(spy.made)
