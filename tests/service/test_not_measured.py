"""A measurement the user asked for that did not happen is "could not check" (exit 3), with the
reason on the one line, in every command: `check --collectives`, `collectives`, `check
--bandwidth`, `bandwidth`. Each cause is made for real (no GPU visible, one GPU, NCCL that cannot
start on a host without CUDA); the absence of torch is made where the code meets it, the rank's
command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from collectives_support import time_limit
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_UNHEALTHY
from topodoctor.measure.collectives import launch
from topodoctor.service import check as doctor
from topodoctor.service.collectives import check_pass

runner = CliRunner()
NO_TORCH = [sys.executable, "-c", "raise ModuleNotFoundError(\"No module named 'torch'\")"]


def _check(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, ["check", "--replay", "h200-x2", "--collectives", *args])
    return r.exit_code, r.stdout


@pytest.mark.parametrize(("visible", "why"), [(None, "0 visible"), ("0", "1 visible")])
def test_check_collectives_without_two_gpus_cannot_check(
    visible: str | None, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No GPU: no CUDA_VISIBLE_DEVICES and no driver's GPU list (this machine has none)."""
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    code, out = _check("-f", "line")
    assert code == EXIT_CANNOT_CHECK
    assert out.startswith("topodoctor UNKNOWN: collectives not measured: collectives need at least 2 GPUs")
    assert why in out and out.count("\n") == 1
    code, out = _check("-f", "json")
    doc = json.loads(out)
    assert (code, doc["verdict"], doc["exit_code"]) == (EXIT_CANNOT_CHECK, "unknown", EXIT_CANNOT_CHECK)
    assert doc["not_measured"] == [f"collectives not measured: collectives need at least 2 GPUs; {why}"]
    assert any(f["code"] == "TD901" for f in doc["findings"])  # and the rule says it could not check


def test_check_collectives_on_a_recording_cannot_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    """NCCL runs on the GPUs under us, never on a replayed host: asked for, not done, exit 3."""
    monkeypatch.setattr(launch, "worker_cmd", lambda: [sys.executable, "-c", "import time; time.sleep(30)"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    code, out = _check("-f", "line", "--timeout", "20")
    assert code == EXIT_CANNOT_CHECK and "live host only" in out


def test_a_fault_found_stays_unhealthy_when_collectives_could_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prolog must still drain a node with a broken link: exit 1 wins over "not measured"."""
    from conftest import scenario_path

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    args = ["check", "--replay", str(scenario_path("x4-pcie-fallback")), "--collectives", "--scope", "node"]
    r = runner.invoke(app, [*args, "-f", "json"])
    doc = json.loads(r.stdout)
    assert (r.exit_code, doc["verdict"]) == (EXIT_UNHEALTHY, "unhealthy")
    assert doc["not_measured"] and doc["reason"].startswith("topodoctor FAIL TD")


def _outcome(backend: str) -> doctor.CheckOutcome:
    opts = doctor.CheckRequest(replay="h200-x2", timeout=50, select=("TD0", "TD901"))
    with time_limit(60):
        return doctor.check(opts, passes=(check_pass(backend, 2, 1 << 20),))


def test_check_collectives_without_torch_cannot_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "worker_cmd", lambda: NO_TORCH)
    out = _outcome("gloo")
    assert out.exit_code == EXIT_CANNOT_CHECK and out.verdict == "unknown"
    (why,) = out.not_measured
    assert why == "collectives not measured: torch is not installed: pip install 'topodoctor[bandwidth]'"


@pytest.mark.slow
def test_check_collectives_when_nccl_does_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real ranks, real torch, NCCL on a host without CUDA: the ranks never meet. The host is
    taken for live (the pass refuses NCCL on a recording) and asked about no GPU activity."""
    pytest.importorskip("torch")
    import topodoctor.service.collectives

    monkeypatch.setattr(doctor.Source, "live", property(lambda self: True))
    monkeypatch.setattr(topodoctor.service.collectives, "live_nvml", lambda: None)
    out = _outcome("nccl")
    assert out.exit_code == EXIT_CANNOT_CHECK
    (why,) = out.not_measured
    assert why.startswith("collectives not measured: collectives could not start:")


@pytest.mark.slow
def test_check_collectives_that_ran_is_judged_as_before() -> None:
    pytest.importorskip("torch")
    out = _outcome("gloo")
    assert (out.exit_code, out.not_measured, out.verdict) == (0, (), "healthy")


@pytest.mark.parametrize(("visible", "why"), [("", "0 visible"), ("0", "1 visible")])
def test_collectives_command_without_two_gpus_cannot_check(
    visible: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    r = runner.invoke(app, ["collectives", "--replay", "h200-x2", "--size", "8"])
    assert r.exit_code == EXIT_CANNOT_CHECK and r.stdout == ""
    assert r.stderr.startswith("topodoctor: error: collectives need at least 2 GPUs") and why in r.stderr


def test_collectives_command_without_torch_cannot_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "worker_cmd", lambda: NO_TORCH)
    with time_limit(60):
        r = runner.invoke(app, ["collectives", "--backend", "gloo", "--size", "8", "--replay", "h200-x2"])
    assert r.exit_code == EXIT_CANNOT_CHECK and r.stdout == ""
    assert r.stderr == "topodoctor: error: torch is not installed: pip install 'topodoctor[bandwidth]'\n"


@pytest.mark.slow
def test_bandwidth_without_a_gpu_cannot_check_in_check_and_in_its_command(tmp_path: Path) -> None:
    """The copy timer finds no CUDA here: both commands say so on one line, exit 3."""
    pytest.importorskip("torch")
    with time_limit(120):
        r = runner.invoke(app, ["check", "--replay", "h200-x2", "--bandwidth", "-f", "line"])
        assert r.exit_code == EXIT_CANNOT_CHECK and r.stdout.startswith("topodoctor UNKNOWN: ")
        r = runner.invoke(app, ["bandwidth", "--replay", "h200-x2", "--quick"])
    assert r.exit_code == EXIT_CANNOT_CHECK and r.stdout == ""
    assert r.stderr.startswith("topodoctor: error: ") and r.stderr.count("\n") == 1
