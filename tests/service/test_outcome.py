"""One outcome, one exit code: what was found (1) outranks what could not be measured (3), which
outranks what could not be used (2), in every command and on every measuring path of `check`. A
measurement that fails, overruns its budget or takes its process down never hides the fault the
probe before it found (x4-nvlink-down: GPU1's NVLink 5 is down, TD101 at error)."""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import time
from typing import Any

import pytest
from conftest import FIXTURES, scenario_path
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.core.errors import (
    EXIT_CANNOT_CHECK,
    EXIT_OK,
    EXIT_UNHEALTHY,
    EXIT_USAGE,
    BandwidthUnavailable,
)
from topodoctor.model.outcome import DONE, PlainOutcome, exit_code
from topodoctor.service import check as doctor
from topodoctor.service.passes import Pass

runner = CliRunner()
DOWN = str(scenario_path("x4-nvlink-down"))


@pytest.mark.parametrize(
    ("verdict", "unwritten", "code"),
    [
        (PlainOutcome(), (), EXIT_OK),
        (PlainOutcome(failing=("x",)), (), EXIT_UNHEALTHY),
        (PlainOutcome(failing=("x",), not_measured=("y",), unusable=("z",)), ("w",), EXIT_UNHEALTHY),
        (PlainOutcome(not_measured=("y",)), (), EXIT_CANNOT_CHECK),
        (PlainOutcome(not_measured=("y",), unusable=("z",)), ("w",), EXIT_CANNOT_CHECK),
        (PlainOutcome(unusable=("z",)), (), EXIT_USAGE),
        (PlainOutcome(), ("cannot write m.prom",), EXIT_USAGE),
    ],
)
def test_the_one_exit_code_is_the_worst_of_what_was_found_missed_and_unused(
    verdict: PlainOutcome, unwritten: tuple[str, ...], code: int
) -> None:
    assert exit_code(verdict, unwritten) == code
    assert verdict.exit_code == exit_code(verdict)
    assert DONE.exit_code == EXIT_OK


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
@pytest.mark.parametrize(
    "asked",
    [
        ["--bandwidth"],
        ["--collectives"],
        ["--level", "quick"],
        ["--level", "long"],
        ["--bandwidth", "--collectives"],
    ],
)
def test_a_measurement_not_made_never_hides_the_fault_the_static_check_found(asked: list[str]) -> None:
    """No GPU here: each pass asked for cannot measure (no CUDA, fewer than 2 GPUs, a recording).
    The broken link still fails the check, in every format, and the JSON says what was not measured."""
    args = ["check", "--replay", DOWN, "--scope", "node", "--timeout", "60", *asked]
    r = runner.invoke(app, [*args, "-f", "line"])
    assert r.exit_code == EXIT_UNHEALTHY, r.output
    assert r.stdout.startswith("topodoctor FAIL TD101 GPU1/nvlink5:") and r.stdout.count("\n") == 1
    r = runner.invoke(app, [*args, "-f", "json"])
    doc = json.loads(r.stdout)
    assert (r.exit_code, doc["exit_code"], doc["verdict"]) == (EXIT_UNHEALTHY, EXIT_UNHEALTHY, "unhealthy")
    assert any(f["code"] == "TD101" and f["severity"] == "error" for f in doc["findings"])
    assert doc["not_measured"] and all(" not measured: " in why for why in doc["not_measured"])


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_on_a_healthy_host_the_same_measurement_not_made_cannot_check() -> None:
    r = runner.invoke(app, ["check", "--replay", "h200-x4", "--level", "quick", "-f", "line"])
    assert r.exit_code == EXIT_CANNOT_CHECK and r.stdout.startswith("topodoctor UNKNOWN: ")


def _check(p: Pass, timeout_s: float = 30.0, replay: str = DOWN) -> doctor.CheckOutcome:
    return doctor.check(doctor.CheckRequest(replay=replay, timeout=timeout_s), passes=(p,))


def _raises(snap: Any, source: Any, deadline: float, started: Any) -> Any:
    raise BandwidthUnavailable("CUDA unavailable: no driver")


def _hangs(snap: Any, source: Any, deadline: float, started: Any) -> Any:
    time.sleep(60)


def _dies(snap: Any, source: Any, deadline: float, started: Any) -> Any:
    os._exit(9)  # the measuring process taken down (a driver crash, the OOM killer)


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_a_pass_that_raises_is_not_measured_and_why() -> None:
    out = _check(Pass("bandwidth", _raises, dict))
    assert out.exit_code == EXIT_UNHEALTHY and out.failing[0].code == "TD101"
    assert out.not_measured == ("bandwidth not measured: CUDA unavailable: no driver",)


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_a_pass_that_overruns_the_budget_leaves_the_probe_judged() -> None:
    t0 = time.monotonic()
    out = _check(Pass("fitness", _hangs, dict), timeout_s=4)
    assert time.monotonic() - t0 < 4  # judged within the budget, the reserve kept for it
    assert out.exit_code == EXIT_UNHEALTHY and out.failing[0].code == "TD101"
    (why,) = out.not_measured
    assert why.startswith("fitness not measured: not finished within the 4 s budget")


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_a_pass_that_takes_its_process_down_leaves_the_probe_judged() -> None:
    out = _check(Pass("collectives", _dies, dict))
    assert out.exit_code == EXIT_UNHEALTHY
    (why,) = out.not_measured
    assert why == "collectives not measured: the check process exited with status 9 without an answer"


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_on_a_healthy_host_an_overrun_pass_cannot_check() -> None:
    out = _check(Pass("fitness", _hangs, dict), timeout_s=3, replay="h200-x4")
    assert out.exit_code == EXIT_CANNOT_CHECK and out.verdict == "unknown" and not out.failing


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_a_probe_that_fails_is_still_an_error_with_its_own_code() -> None:
    """Nothing was probed: there is no finding to keep, and the error's code stands."""
    r = runner.invoke(app, ["check", "--replay", "no-such-recording", "--bandwidth", "-f", "line"])
    assert r.exit_code == EXIT_USAGE and r.stdout.startswith("topodoctor UNKNOWN: ")


def _measures_then_crashes(snap: Any, source: Any, deadline: float, started: Any, interim: Any) -> Any:
    """The bandwidth pass as it crashed on the GPU hosts: every copy done and handed over, then
    SIGSEGV in the closing read of the link counters."""
    from dataclasses import replace

    from topodoctor.model.copies import load_result
    from topodoctor.model.during import GpuDuring, RunSampling
    from topodoctor.probe.during import CLOSING_UNREAD

    saved = load_result(FIXTURES / "bandwidth" / "h200-x4.quick.json")
    seen = GpuDuring(0, 3, counters_before={"nvlink5_crc": 0}, counters_error=CLOSING_UNREAD)
    interim(replace(saved, during=RunSampling(0.2, 0.6, 3, (seen,))))
    faulthandler.disable()  # pytest's, inherited by the fork: no dump of this staged crash
    os.kill(os.getpid(), signal.SIGSEGV)


@pytest.mark.slow  # processes forked or started: 0.3 s or more on 2 cores
def test_a_pass_that_handed_its_result_over_before_crashing_is_judged_with_it() -> None:
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.service import probing
    from topodoctor.service.passes import Source

    p = Pass("bandwidth", _measures_then_crashes, BandwidthResult, interim=True)
    host = probing.probe(Source(DOWN), doctor.Budget.start(30), (p,))
    assert host.missed == {} and host.snapshot.gpus  # the probe, and the copies with it
    res = host.measured["bandwidth"]
    assert res.measurements and res.measured_at is not None  # stamped as every result is
    assert res.during.error.startswith("the measuring process ended before its closing read: ")
    assert "SIGSEGV" in res.during.error
    out = _check(p)
    assert out.not_measured == () and out.exit_code == EXIT_UNHEALTHY and out.failing[0].code == "TD101"
