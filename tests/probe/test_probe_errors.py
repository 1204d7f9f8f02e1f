"""No answer the probe could not get passes silently.

For every NVML call and every sysfs access in the h200-x4 recording, the host is replayed
with that one answer replaced by a permission error (NO_PERMISSION, EACCES) and, separately,
by GPU_IS_LOST; the check must then say something (a could-not-check, a lost GPU, or
"could not check" as a whole) about the right GPU, pair or the host.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import RECORDINGS, scenario_path
from tests_support import judged

from topodoctor.core.errors import ProbeUnavailable, ReplayMismatch
from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.nvml_codes import GPU_GONE_CODES
from topodoctor.probe.collect import collect
from topodoctor.probe.query import classify
from topodoctor.probe.replay import FakeNvml, ReplaySysfs
from topodoctor.rules import Context, Environment, evaluate

X4 = json.loads(next(p for p in RECORDINGS if p.stem == "h200-x4").read_text())
QUIET = Environment({}, {}, {}, (), None)
NO_PERMISSION, GPU_IS_LOST = 4, 15
STARTUP = ("nvmlInit", "nvmlDeviceGetCount")  # without these nothing is checked: exit 3
GPU_BUS = {g["bus_id"]: g["index"] for g in X4["snapshot"]["gpus"]}
PCI_LISTING = re.compile(r"^/sys/bus/pci/devices(/[^/]+/(vendor|class))?$")


def _subjects_for_call(entry: dict[str, Any]) -> set[str]:
    if entry["fn"] == "nvmlDeviceGetHandleByIndex":
        return {f"GPU{entry['args'][0]}"}
    gpus = [int(a[4:]) for a in entry["args"] if isinstance(a, str) and a.startswith("gpu:")]
    if len(gpus) == 2:
        return {f"GPU{min(gpus)}-GPU{max(gpus)}"}
    if len(gpus) == 1:
        return {f"GPU{gpus[0]}"}
    return {"host"}


def _subjects_for_read(entry: dict[str, Any]) -> set[str]:
    path = entry["path"]
    if PCI_LISTING.match(path):
        return {"host"}  # the bus listing as a whole (TD508 could not check)
    for bus, index in GPU_BUS.items():
        if f"/{bus}" in path:
            return {f"GPU{index}"}
    if "/net/" in path or "/0000:00:03.0" in path:
        return {"host", "nic:eth0"}
    if path == "/dev/kmsg":
        return {"kernel-log"}  # the XID rules could not check
    return {"host"}


def _said(findings: list[Any]) -> set[str]:
    return {f.subject.split("/")[0] for f in findings}


class _SweepSysfs(ReplaySysfs):
    """A refused answer can send the probe to a path the recorded host was never asked
    about (/run/.containerenv once /.dockerenv is unreadable): such a path reads as absent."""

    def _get(self, op: str, path: str) -> Any:
        try:
            return super()._get(op, path)
        except ReplayMismatch:
            raise FileNotFoundError(2, "not recorded", path) from None


def _check(nvml: list[dict[str, Any]], sysfs: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    snap = collect(FakeNvml(nvml, "sweep"), _SweepSysfs(sysfs, "sweep"))
    ev = evaluate(Context(snap, QUIET))
    return judged(ev.findings), judged(ev.incomplete)


def _failing(entry: dict[str, Any], **error: Any) -> dict[str, Any]:
    out = {k: v for k, v in entry.items() if k != "result"}
    out.update(error)
    return out


def test_the_unchanged_recording_is_healthy() -> None:
    findings, incomplete = _check(X4["nvml"], X4["sysfs"])
    assert findings == [] and incomplete == []


NVML_CASES = [(i, c["fn"], code) for i, c in enumerate(X4["nvml"]) for code in (NO_PERMISSION, GPU_IS_LOST)]


@pytest.mark.parametrize(("i", "fn", "code"), NVML_CASES, ids=lambda v: str(v))
def test_every_nvml_failure_is_reported_on_its_subject(i: int, fn: str, code: int) -> None:
    entry = X4["nvml"][i]
    calls = list(X4["nvml"])
    calls[i] = _failing(entry, error=code)
    if fn in STARTUP:
        with pytest.raises(ProbeUnavailable):
            _check(calls, X4["sysfs"])
        return
    findings, _ = _check(calls, X4["sysfs"])
    want = _subjects_for_call(entry)
    assert findings, "the check reported nothing"
    assert want & {f.subject.split("/")[0] for f in findings if f.code in ("TD901", "TD507")}, findings
    lost = {f.subject for f in findings if f.code == "TD507"}
    one_gpu = len(want) == 1 and next(iter(want)).startswith("GPU") and "-" not in next(iter(want))
    if code == GPU_IS_LOST and one_gpu:
        assert lost == want  # the GPU that answered lost, and no other
    else:
        assert lost == set()  # a pair call cannot blame a GPU that still answers


SYSFS_CASES = [(i, r["op"], r["path"]) for i, r in enumerate(X4["sysfs"])]


@pytest.mark.parametrize(("i", "op", "path"), SYSFS_CASES, ids=lambda v: str(v))
def test_every_refused_sysfs_access_is_reported_on_its_subject(i: int, op: str, path: str) -> None:
    reads = list(X4["sysfs"])
    reads[i] = _failing(reads[i], error="EACCES")
    findings, incomplete = _check(X4["nvml"], reads)
    assert incomplete, "a refused sysfs access passed silently"
    assert _subjects_for_read(X4["sysfs"][i]) & _said(incomplete), incomplete
    assert not [f for f in findings if f.code != "TD901"], "a refused read raised a fault, not could-not-check"


def test_the_policy_for_each_answer() -> None:
    assert classify(3, "x") == Unsupported("NOT_SUPPORTED")
    assert classify(13, "x") == Unsupported("FUNCTION_NOT_FOUND")
    assert classify(4, "nvmlDeviceGetName") == ProbeError("NO_PERMISSION", "nvmlDeviceGetName", 4)
    assert classify(FileNotFoundError(2, "x"), "read /x") == Unsupported("ABSENT")
    assert classify(PermissionError(13, "x"), "read /x") == ProbeError("EACCES", "read /x")
    assert classify(OSError(5, "x"), "read /x") == ProbeError("EIO", "read /x")


@pytest.mark.parametrize("value", [Unsupported(), ProbeError("NO_PERMISSION", "x")])
def test_not_available_has_no_truth_value(value: object) -> None:
    with pytest.raises(TypeError):
        bool(value)


def test_a_field_value_that_answers_lost_loses_the_gpu() -> None:
    calls = json.loads(json.dumps(X4["nvml"]))
    batch = next(
        c
        for c in calls
        if c["fn"] == "nvmlDeviceGetFieldValues" and c["args"][0] == "gpu:2" and 165 in [f for f, _ in c["args"][1]]
    )
    batch["result"][3]["ret"] = GPU_IS_LOST
    batch["result"][3]["value"] = None
    findings, _ = _check(calls, X4["sysfs"])
    assert {f.subject for f in findings if f.code == "TD507"} == {"GPU2"}


def test_ignoring_a_rule_does_not_hide_other_incomplete_checks() -> None:
    calls = list(X4["nvml"])
    i = next(i for i, c in enumerate(calls) if c["fn"] == "nvmlDeviceGetPersistenceMode" and c["args"] == ["gpu:2"])
    calls[i] = _failing(calls[i], error=NO_PERMISSION)
    snap = collect(FakeNvml(calls, "x"), ReplaySysfs(X4["sysfs"], "x"))
    ev = evaluate(Context(snap, QUIET), ignore=["TD901"])
    assert ev.findings == ()
    assert [(f.subject, f.evidence["rules"]) for f in judged(ev.incomplete)] == [("GPU2", ["TD505"])]
    ev = evaluate(Context(snap, QUIET), ignore=["TD505"])
    assert [(f.subject, f.severity, f.evidence["rules"]) for f in judged(ev.incomplete)] == [("GPU2", "info", [])]


class _Counters:
    """An NVML that answers the throughput batch of a GPU with 2 links."""

    def __init__(self, ret: int) -> None:
        self.ret = ret

    def call(self, fn: str, *args: Any) -> Any:
        if fn == "nvmlDeviceGetHandleByIndex":
            return f"gpu:{args[0]}"
        assert fn == "nvmlDeviceGetFieldValues"
        return [
            {"field": f, "scope": s, "ret": self.ret if s else 0, "value": 5 if s == 0 or self.ret == 0 else None}
            for f, s in args[1]
        ]


def test_link_counters_read_through_the_same_policy() -> None:
    from topodoctor.probe.counters import nvlink_tx_bytes

    assert nvlink_tx_bytes(_Counters(0), 0, 2) == 10 * 1024
    assert nvlink_tx_bytes(_Counters(NO_PERMISSION), 0, 2) is None  # one refused field: no total
    assert nvlink_tx_bytes(_Counters(3), 0, 2) is None


# ------------------------------------------------ a refused answer is never judged as bad hardware

UNKNOWN, TIMEOUT = 999, 10
REFUSALS = (NO_PERMISSION, UNKNOWN, TIMEOUT)
NOT_HARDWARE = {"TD901"}  # the could-not-check finding: the only one a refused answer may raise
SEVERE = {"error", "critical"}


def _refusals(rec: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """(what was refused, NVML calls, sysfs reads): every recorded call, every field of every field
    batch, every sysfs access, each refused in turn. NVML's codes take turns (see the test)."""
    out = []
    n = 0
    for i, c in enumerate(rec["nvml"]):
        if c["fn"] in STARTUP:
            continue
        calls = list(rec["nvml"])
        code = REFUSALS[n % len(REFUSALS)]
        n += 1
        calls[i] = _failing(c, error=code)
        out.append((f"{c['fn']}{c['args']} -> {code}", calls, rec["sysfs"]))
        if c["fn"] != "nvmlDeviceGetFieldValues" or "result" not in c:
            continue
        for j, f in enumerate(c["result"]):
            code = REFUSALS[n % len(REFUSALS)]
            n += 1
            one = {**c, "result": [*c["result"][:j], {**f, "ret": code, "value": None}, *c["result"][j + 1 :]]}
            calls = list(rec["nvml"])
            calls[i] = one
            out.append((f"{c['args'][0]} field {f['field']} scope {f['scope']} -> {code}", calls, rec["sysfs"]))
    for i, r in enumerate(rec["sysfs"]):
        for err in ("EACCES", "EIO"):
            reads = list(rec["sysfs"])
            reads[i] = _failing(r, error=err)
            out.append((f"{r['op']} {r['path']} -> {err}", rec["nvml"], reads))
    return out


# Beside the recordings, the derived hosts that show link layouts the recorded VMs cannot:
# GPU-to-GPU links without a switch, NVSwitches visible on the PCI bus.
SWEPT = [*RECORDINGS, *(scenario_path(n) for n in ("x2-direct-nvlink", "x4-visible-nvswitch"))]


@pytest.mark.slow
@pytest.mark.parametrize("rec", SWEPT, ids=lambda p: p.stem)
def test_no_refused_answer_is_judged_as_bad_hardware(rec: Any) -> None:
    """Refuse every probed field of every bundled recording in turn: what the check says about
    it is "could not check" (TD901), never a hardware finding at error level or above.

    NO_PERMISSION, UNKNOWN and TIMEOUT take turns over the answers rather than each refusing
    every one: the probe's one policy (``classify``) gives all three the same meaning, held
    here, so the sweep stays within CI's time."""
    assert {type(classify(c, "x")) for c in REFUSALS} == {ProbeError}
    assert not set(REFUSALS) & GPU_GONE_CODES
    data = json.loads(rec.read_text())
    judged, silent = [], []
    for what, calls, reads in _refusals(data):
        findings, incomplete = _check(calls, reads)
        bad = [f"{f.code} {f.subject}" for f in findings if f.code not in NOT_HARDWARE and f.severity in SEVERE]
        if bad:
            judged.append(f"{what}: {', '.join(bad)}")
        if not incomplete:
            silent.append(what)
    assert not judged, f"{len(judged)} refused answers judged as bad hardware:\n" + "\n".join(judged[:40])
    assert not silent, f"{len(silent)} refused answers passed silently:\n" + "\n".join(silent[:40])


def test_a_link_state_nvml_cannot_answer_is_could_not_check_naming_the_call() -> None:
    """One link's state field answers UNKNOWN: not a down link (TD101), not a pair short of
    links (TD102), but could-not-check on the GPU's pairs, naming the call and the error."""
    calls = json.loads(json.dumps(X4["nvml"]))
    batch = next(
        c
        for c in calls
        if c["fn"] == "nvmlDeviceGetFieldValues" and c["args"][0] == "gpu:1" and [165, 5] in c["args"][1]
    )
    j = batch["args"][1].index([165, 5])
    batch["result"][j] = {**batch["result"][j], "ret": UNKNOWN, "value": None}
    findings, incomplete = _check(calls, X4["sysfs"])
    assert {f.code for f in findings} == {"TD901"}
    pairs = {f.subject for f in incomplete if f.evidence["field"] == "GPU1/nvlink5.active"}
    assert pairs == {"GPU0-GPU1", "GPU1-GPU2", "GPU1-GPU3"}
    f = next(f for f in incomplete if f.subject == "GPU0-GPU1")
    assert "UNKNOWN at nvmlDeviceGetFieldValues" in f.message and "TD102" in f.evidence["rules"]
    link = next(f for f in incomplete if f.subject == "GPU1/nvlink5")
    assert "TD101" in link.evidence["rules"] and link.evidence["error"] == "UNKNOWN"
