"""The cause engine on real runs: one NCCL setting changed at a time on a 2 x H100 NVSwitch host, and a
foreign GEMM on one GPU (fixtures/diagnosis/h100-x2, README there). Each run that fell short ends with
its cause named at error level, leading the message and the fix; the runs that did not stay quiet."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import FIXTURES

from topodoctor.model.collectives import CollectivesResult, load_result
from topodoctor.model.copies import Activity
from topodoctor.model.findings import SEVERITY_ORDER, Finding
from topodoctor.model.outcome import CheckOutcome, Meta
from topodoctor.model.snapshot import ComputeProcess, HostSnapshot
from topodoctor.probe.environment import capture_environment
from topodoctor.report.check import one_line
from topodoctor.rules import Context
from topodoctor.service.collectives import judge
from topodoctor.service.judging import evaluate as check_findings

RUNS = FIXTURES / "diagnosis" / "h100-x2"
# run -> (the code at error level, what its cause must name)
SHORT = {
    "proto-ll": ("TD001", "NCCL_PROTO=LL"),
    "buffsize": ("TD001", "NCCL_BUFFSIZE=65536"),
    "nthreads": ("TD001", "NCCL_NTHREADS=64"),
    "maxch1": ("TD001", "NCCL_MAX_NCHANNELS=1"),
    "ch2": ("TD001", "NCCL_MAX_NCHANNELS=2"),
    "maxctas": ("TD001", "NCCL_MAX_CTAS=2"),
    "p2p-loc": ("TD001", "NCCL_P2P_LEVEL=LOC"),
    "p2p-disable": ("TD001", "NCCL_P2P_DISABLE=1"),
    "p2p-shm-off": ("TD001", "NCCL_SHM_DISABLE=1"),
    "algo-tree": ("TD005", "NCCL_ALGO=Tree"),
    "p2p-memcpy": ("TD005", "NCCL_P2P_USE_CUDA_MEMCPY=1"),
    "foreign-gemm": ("TD001", "pid 2972"),
}
HEALTHY = (
    "default",
    "proto-ll128",
    "minctas",
    "shm-off",
    "cumem-off",
    "launch-group",
    "launch-blocking",
    "net-chunk",
    "gdr-level",
    "ib-disable",
)


def _judged(name: str) -> list[Finding]:
    return judge(load_result(RUNS / f"coll-{name}.json"), None)


@pytest.mark.parametrize("name", sorted(SHORT))
def test_the_cause_leads_the_error(name: str) -> None:
    code, named = SHORT[name]
    found = [f for f in _judged(name) if f.code == code]
    assert found, f"{code} missing on {name}"
    f = found[0]
    assert f.severity == "error"
    assert f.cause is not None and f.cause.found and f.cause.confidence in ("high", "medium")
    assert named in f.cause.what
    assert f.message.startswith(f.cause.what) and f.fix.startswith(f.cause.fix)


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_runs_stay_quiet(name: str) -> None:
    loud = [f for f in _judged(name) if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["warning"]]
    assert loud == []


def test_a_settings_run_rules_out_what_did_not_touch_it() -> None:
    f = next(f for f in _judged("proto-ll") if f.code == "TD001")
    assert f.cause is not None
    ruled = " | ".join(f.cause.ruled_out)
    assert "NCCL_NVLS_ENABLE=0" in ruled and "other processes: none" in ruled
    # NCCL's model of LL on Hopper leaves at most 141 GB/s of the 320 the topology gives: 0.9 of the shortfall
    assert f.cause.evidence["expected_under_cause"] == pytest.approx(141.0)
    assert f.cause.explains == pytest.approx(0.9, abs=0.02)


def test_the_foreign_process_is_named_with_its_command() -> None:
    f = next(f for f in _judged("foreign-gemm") if f.code == "TD001")
    assert f.cause is not None
    assert "GPU1" in f.cause.what and "foreign_gemm.py" in f.cause.what
    assert f.cause.evidence["processes"][0]["pid"] == 2972
    busy = [x for x in _judged("foreign-gemm") if x.code == "TD007"]
    assert [(x.subject, x.severity) for x in busy] == [("GPU1", "info")]
    assert "pid 2972" in busy[0].message


def test_a_forced_algorithm_the_op_lacks_is_named_from_nccls_warning() -> None:
    f = next(f for f in _judged("algo-tree") if f.code == "TD005")
    assert f.cause is not None and f.cause.confidence == "high"
    assert "all_gather" in f.cause.what and "no algorithm" in f.cause.what
    assert "NCCL_ALGO was set to Tree" in f.cause.evidence["nccl_warning"]


@pytest.mark.slow
def test_collectives_from_leads_with_the_cause_in_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    from topodoctor.cli.commands import main

    path = str(RUNS / "coll-nthreads.json")
    assert main(["collectives", "--from", path]) == 1
    out = capsys.readouterr().out
    assert "TD001 error env:NCCL_NTHREADS: NCCL_NTHREADS=64 runs NCCL's kernels with 64 threads" in out
    assert main(["collectives", "--from", path, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    td001 = next(f for f in doc["findings"] if f["code"] == "TD001")
    assert td001["cause"]["what"].startswith("NCCL_NTHREADS=64") and td001["cause"]["confidence"] == "high"
    assert main(["collectives", "--from", str(RUNS / "coll-shm-off.json")]) == 0


def _quick_pass(name: str, largest: int = 1 << 30) -> tuple[CollectivesResult, HostSnapshot]:
    """Transform: a run as `check --level quick` holds it: its rows up to ``largest``, the
    snapshot the check's own probe (not the result) carries, and our ranks' processes on every GPU
    (children of the check: ours), as the probe saw them during the quick pass."""
    res = load_result(RUNS / f"coll-{name}.json")
    assert res.snapshot is not None
    rows = tuple(r for r in res.rows if r.size_bytes <= largest)
    mine = ComputeProcess(4242, 1 << 29, 0, 1, "python3 -m topodoctor.measure.collectives.rank.main", True)
    gpus = tuple(
        replace(g, compute_processes=(*(g.compute_processes if isinstance(g.compute_processes, tuple) else ()), mine))
        for g in res.snapshot.gpus
    )
    return replace(res, rows=rows, snapshot=None), replace(res.snapshot, gpus=gpus)


def _check(res: CollectivesResult, snap: HostSnapshot) -> CheckOutcome:
    ctx = Context(snap, capture_environment({"NCCL_NVLS_ENABLE": "0"}), collectives=res)
    findings, incomplete = check_findings(ctx)  # as `check` judges: one finding for one setting
    code = 1 if any(SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["error"] for f in findings) else 0
    return CheckOutcome(findings, incomplete, Meta("live", "vm", 2, 1.0, ("collectives",)), "error", code)


def test_a_quick_check_of_the_healthy_host_warns_of_nothing() -> None:
    res, snap = _quick_pass("default", 256 << 20)
    # as the healthy quick check measured it: sendrecv 299 GB/s at 256 MiB, GPU1 at 9 % from our copy pass
    assert any(r.op == "sendrecv" and r.size_bytes == 256 << 20 for r in res.rows)
    res = replace(res, activity=(Activity(0, 1, 1, 1 << 29), Activity(1, 9, 0, 1 << 29)))
    out = _check(res, snap)
    assert [f for f in out.findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["warning"]] == []
    assert not [f for f in out.findings if f.code == "TD007"]
    assert one_line(out).startswith("topodoctor OK")


def test_the_quick_checks_one_line_reason_leads_with_the_foreign_process() -> None:
    res, snap = _quick_pass("foreign-gemm")
    line = one_line(_check(res, snap))
    assert line.startswith("topodoctor FAIL TD001 all_reduce: another job's process on GPU1 99 % busy with pid 2972")
    assert len(line) <= 200


def test_the_quick_checks_one_line_reason_leads_with_a_setting() -> None:
    res, snap = _quick_pass("nthreads")
    line = one_line(_check(res, snap))
    assert line.startswith("topodoctor FAIL TD001: NCCL_NTHREADS=64") and len(line) <= 200
    assert "1 op below the topology's model: all_reduce 116.0 of 320.0 GB/s" in line and "more:" not in line
