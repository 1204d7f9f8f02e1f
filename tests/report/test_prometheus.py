"""Prometheus output: parsed back by prometheus_client's own parser, held to the naming rules,
on checks of real recordings and on real bandwidth results."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, scenario_path
from prometheus_client.parser import text_string_to_metric_families

from topodoctor.core.pci import long_bus_id as dcgm_bus_id
from topodoctor.model.collectives import Row, Timing
from topodoctor.model.copies import load_result
from topodoctor.probe.environment import capture_environment
from topodoctor.probe.sources import probe_host
from topodoctor.report.prometheus import (
    FAMILIES,
    check_metrics,
    collectives_metrics,
    fleet_metrics,
    write_textfile,
)
from topodoctor.report.prometheus_copies import bandwidth_metrics
from topodoctor.rules import Context, evaluate

BW = FIXTURES / "bandwidth"
# FLOP/s is what compute is measured in; nothing smaller is a rate of work
UNIT_SUFFIXES = (
    "_bytes_per_second",
    "_flops_per_second",
    "_seconds",
    "_ratio",
    "_info",
    "_celsius",
    "_watts",
    "_hertz",
)
# Counts, states and codes: numbers without a unit, named for what they count.
UNITLESS = {
    "topodoctor_exit_code",
    "topodoctor_status",
    "topodoctor_findings",
    "topodoctor_finding",
    "topodoctor_incomplete_checks",
    "topodoctor_could_not_check",
    "topodoctor_gpus",
    "topodoctor_bandwidth_measurement_failed",
    "topodoctor_collective_wrong_elements",
    "topodoctor_fleet_nodes",
    "topodoctor_fleet_node_status",
    "topodoctor_fleet_node_drain",
    "topodoctor_fleet_unreadable_files",
    "topodoctor_fleet_history_finding",
    "topodoctor_fleet_history_results",
    "topodoctor_gpu_clocks_event_reasons",
    "topodoctor_gpu_clocks_event_reason",
    "topodoctor_gpu_pcie_errors_during_check",
    "topodoctor_nic_port_up",
    "topodoctor_nic_port_errors_during_check",
}
RUN_TIME = 1_795_000_000.5


def parse(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(fams: dict[str, Any], name: str, **labels: str) -> list[Any]:
    return [s for s in fams[name].samples if all(s.labels.get(k) == v for k, v in labels.items())]


def _check(source: str, snap: Any = None) -> tuple[str, Any, list[Any]]:
    snap = snap or probe_host(source).snapshot
    findings = evaluate(Context(snap, capture_environment({})))
    incomplete = [f for f in findings if f.code == "TD901"]
    code = 1 if any(f.severity in ("error", "critical") for f in findings) else 0
    return check_metrics(findings, incomplete, code, snap, elapsed_s=0.42, run_time=RUN_TIME), snap, findings


def lint(text: str) -> None:
    """The exposition rules every file we write must keep."""
    fams = parse(text)
    assert fams, "no metrics"
    for line in text.splitlines():
        if line and not line.startswith("#"):
            # name{labels} value, and no third field: the textfile collector refuses timestamps
            assert re.fullmatch(r"[a-z_][a-z0-9_]*(\{.*\})? \S+", line), line
    for name, fam in fams.items():
        assert re.fullmatch(r"topodoctor_[a-z][a-z0-9_]*", name), name
        assert name in FAMILIES, f"{name} is not in the table"
        assert fam.type == "gauge" and fam.documentation == FAMILIES[name][0]
        assert not name.endswith("_total"), f"{name}: _total is for counters"
        assert not re.search(r"_(gbps|gb|mb|ms|us|usec|msec|percent)(_|$)", name), f"{name}: not a base unit"
        assert name.endswith(UNIT_SUFFIXES) or name in UNITLESS, f"{name}: unit suffix missing"
        for s in fam.samples:
            assert s.timestamp is None
            assert math.isfinite(s.value)
            for label in s.labels:
                assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", label) and not label.startswith("__"), label
                assert label in FAMILIES[name][1]
            if name.endswith("_info"):
                assert s.value == 1


def test_healthy_check_of_a_real_host() -> None:
    text, snap, findings = _check("h200-x4")
    lint(text)
    fams = parse(text)
    status = {s.labels["status"]: s.value for s in fams["topodoctor_status"].samples}
    assert status == {"healthy": 1.0, "unhealthy": 0.0, "unknown": 0.0}
    assert samples(fams, "topodoctor_last_run_timestamp_seconds", command="check")[0].value == RUN_TIME
    assert samples(fams, "topodoctor_run_duration_seconds")[0].value == 0.42
    info = samples(fams, "topodoctor_gpu_info", gpu="2")[0].labels
    g2 = snap.gpu(2)
    assert info["UUID"] == g2.uuid and info["model_name"] == "NVIDIA H200" and info["device"] == "nvidia2"
    assert info["pci_bus_id"] == dcgm_bus_id(g2.bus_id) and len(info["pci_bus_id"]) == len("00000000:00:08.0")
    assert sum(s.value for s in fams["topodoctor_findings"].samples) == len(findings)


def test_a_fault_is_one_series_that_joins_with_dcgm_labels() -> None:
    text, snap, _ = _check(str(scenario_path("x4-nvlink-down")))
    lint(text)
    fams = parse(text)
    assert samples(fams, "topodoctor_status", status="unhealthy")[0].value == 1
    (td101,) = samples(fams, "topodoctor_finding", code="TD101")
    assert td101.labels["subject"] == "GPU1/nvlink5" and td101.labels["severity"] == "error"
    assert td101.labels["gpu"] == "1" and td101.labels["UUID"] == snap.gpu(1).uuid
    assert samples(fams, "topodoctor_exit_code")[0].value == 1


def test_rules_that_could_not_check_are_counted_and_listed() -> None:
    from dataclasses import replace

    from topodoctor.core.probed import ProbeError

    snap = probe_host("h200-x4").snapshot  # GPU0's PCIe width unreadable, as in test_rules
    err = ProbeError("NO_PERMISSION", "nvmlDeviceGetCurrPcieLinkWidth", 4)
    g = replace(snap.gpus[0], pcie=replace(snap.gpus[0].pcie, width_current=err))
    text, _, findings = _check("", replace(snap, gpus=(g, *snap.gpus[1:])))
    lint(text)
    fams = parse(text)
    incomplete = [f for f in findings if f.code == "TD901"]
    assert incomplete
    assert samples(fams, "topodoctor_could_not_check", subject="GPU0")[0].labels["UUID"] == g.uuid
    assert samples(fams, "topodoctor_incomplete_checks")[0].value == len(incomplete)
    assert len(fams["topodoctor_could_not_check"].samples) == len(incomplete)


def test_could_not_check_still_writes_unknown() -> None:
    text = check_metrics([], [], 3, None, run_time=RUN_TIME, host="node7")
    lint(text)
    fams = parse(text)
    assert samples(fams, "topodoctor_status", status="unknown", Hostname="node7")[0].value == 1
    assert "topodoctor_gpu_info" not in fams


def test_label_values_are_escaped() -> None:
    from topodoctor.model.findings import Finding

    nasty = 'env:NCCL_SOCKET_IFNAME="eth0\\n"\nsecond line'
    f = Finding("TD601", "x", "warning", nasty, "m", "fix", {})
    text = check_metrics([f], [], 0, None, host='a"b\\c')
    lint(text)
    (s,) = parse(text)["topodoctor_finding"].samples
    assert s.labels["subject"] == nasty and s.labels["Hostname"] == 'a"b\\c'


def test_bandwidth_of_a_real_result() -> None:
    r = load_result(BW / "h200-x4.full.json")
    text = bandwidth_metrics(r, [], 0, run_time=RUN_TIME)
    lint(text)
    fams = parse(text)
    one = samples(fams, "topodoctor_bandwidth_pair_bytes_per_second", mode="oneway", gpu="0", peer_gpu="1")[0]
    m = r.find("oneway", 0, 1)
    assert m is not None and m.value is not None
    assert one.value == pytest.approx(m.value.median * 1e9)
    assert one.labels["UUID"].startswith("GPU-")
    ratio = samples(fams, "topodoctor_bandwidth_pair_expected_ratio", mode="oneway", gpu="0", peer_gpu="1")[0].value
    exp = samples(fams, "topodoctor_bandwidth_pair_expected_bytes_per_second", mode="oneway", gpu="0", peer_gpu="1")
    assert ratio == pytest.approx(one.value / exp[0].value) and 0.5 < ratio < 1.0
    # both directions of a bidirectional pair, each on its own
    assert len(samples(fams, "topodoctor_bandwidth_pair_bytes_per_second", mode="bidir")) == 12
    lat = fams["topodoctor_bandwidth_pair_latency_seconds"].samples
    assert len(lat) == 12 and all(1e-7 < s.value < 1e-3 for s in lat)
    h2d = samples(fams, "topodoctor_bandwidth_host_bytes_per_second", direction="h2d")
    assert len(h2d) == 4 and all(1e10 < s.value < 1e11 for s in h2d)
    assert "topodoctor_bandwidth_measurement_failed" not in fams


def test_bandwidth_sm_modes_and_modes_not_measured() -> None:
    text = bandwidth_metrics(load_result(BW / "derived" / "sm-latency-high.json"), [], 0)
    lint(text)
    fams = parse(text)
    assert len(samples(fams, "topodoctor_bandwidth_pair_bytes_per_second", mode="sm_oneway")) == 12
    assert len(samples(fams, "topodoctor_bandwidth_pair_bytes_per_second", mode="sm_bidir")) == 12  # each way
    (slow,) = samples(fams, "topodoctor_bandwidth_pair_load_latency_seconds", gpu="2", peer_gpu="3")
    assert slow.value == pytest.approx(1.035125e-6)
    assert len(fams["topodoctor_bandwidth_pair_latency_seconds"].samples) == 12  # the copy engine's, apart
    skipped = parse(bandwidth_metrics(load_result(BW / "derived" / "sm-kernels-missing.json"), [], 0))
    assert "topodoctor_bandwidth_pair_load_latency_seconds" not in skipped
    assert not samples(skipped, "topodoctor_bandwidth_pair_bytes_per_second", mode="sm_oneway")
    assert "topodoctor_bandwidth_measurement_failed" not in skipped  # not measured is not a failure


@pytest.mark.parametrize(
    ("name", "reason", "mode"), [("hung-copy", "timeout", "bidir"), ("corruption", "data_mismatch", "oneway")]
)
def test_bandwidth_failures(name: str, reason: str, mode: str) -> None:
    text = bandwidth_metrics(load_result(BW / "derived" / f"{name}.json"), [], 1)
    lint(text)
    (s,) = parse(text)["topodoctor_bandwidth_measurement_failed"].samples
    assert (s.labels["reason"], s.labels["mode"]) == (reason, mode)


def test_collectives_per_op_and_size() -> None:
    rows = [
        Row(
            "all_gather",
            1 << 30,
            1 << 26,
            "float",
            "none",
            -1,
            Timing(4563.0, 235.3, 353.0, 0),
            Timing(4575.0, 234.7, 352.1, 0),
        ),
        Row("all_reduce", 8, 2, "float", "sum", -1, None, None),  # not measured: no series
    ]
    text = collectives_metrics("node1", rows, [], 0, elapsed_s=12.0, run_time=RUN_TIME)
    lint(text)
    fams = parse(text)
    (s,) = samples(fams, "topodoctor_collective_busbw_bytes_per_second", op="all_gather", in_place="false")
    assert s.value == 353e9 and s.labels["size_bytes"] == str(1 << 30)
    assert samples(fams, "topodoctor_collective_time_seconds", in_place="true")[0].value == pytest.approx(4.575e-3)
    assert not samples(fams, "topodoctor_collective_busbw_bytes_per_second", op="all_reduce")


@pytest.mark.slow
def test_fleet_metrics_and_files_merge_as_node_exporter_needs(tmp_path: Path) -> None:
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "fixtures" / "fleet"))
    import simulate

    from topodoctor.fleet.inputs import read_results
    from topodoctor.fleet.rollup import roll_up

    simulate.build(tmp_path / "fleet")
    report = roll_up(*read_results([tmp_path / "fleet"]))
    text = fleet_metrics(report, run_time=RUN_TIME)
    lint(text)
    fams = parse(text)
    assert samples(fams, "topodoctor_fleet_node_drain", Hostname="node03")[0].value == 1
    (o,) = fams["topodoctor_fleet_outlier_ratio"].samples
    assert o.labels["Hostname"] == "node03" and 0.92 < o.value < 0.94
    assert fams["topodoctor_fleet_unreadable_files"].samples[0].value == 1

    # Files of several commands in one textfile directory: identical HELP per family, no series twice.
    check_text, _, _ = _check("h200-x4")
    bw_text = bandwidth_metrics(load_result(BW / "h200-x4.full.json"), [], 0)
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for t in (check_text, bw_text, text):
        for fam in text_string_to_metric_families(t):
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                assert key not in seen, key
                seen.add(key)
    path = tmp_path / "textfile" / "topodoctor-fleet.prom"
    path.parent.mkdir()
    write_textfile(path, text)
    assert path.read_text() == text and [p.name for p in path.parent.iterdir()] == [path.name]


def test_every_family_is_exercised_and_named_by_the_rules() -> None:
    """The lint above runs on real output; here the table itself, so no family escapes it."""
    for name, (help_text, labels) in FAMILIES.items():
        assert help_text.endswith(".") and labels == tuple(dict.fromkeys(labels))
        assert name.endswith(UNIT_SUFFIXES) or name in UNITLESS, name


def test_dcgm_bus_id_form() -> None:
    assert dcgm_bus_id("0000:0d:00.0") == "00000000:0D:00.0"
    assert dcgm_bus_id("00000000:B4:00.0") == "00000000:B4:00.0"
    assert dcgm_bus_id("not a bus id") == "not a bus id"


@pytest.mark.parametrize(
    "bad",
    [
        "# HELP topodoctor_gpus GPUs the probe found.\n# TYPE topodoctor_gpus gauge\ntopodoctor_gpus 4 1795000000000\n",
        "# HELP topodoctor_copy_gbps x.\n# TYPE topodoctor_copy_gbps gauge\ntopodoctor_copy_gbps 4\n",
        '# HELP topodoctor_gpus GPUs the probe found.\n# TYPE topodoctor_gpus gauge\ntopodoctor_gpus{gpu="0"} 4\n',
        "# HELP topodoctor_gpus Other help.\n# TYPE topodoctor_gpus gauge\ntopodoctor_gpus 4\n",
    ],
    ids=["timestamp", "unit", "label", "help"],
)
def test_the_lint_catches_what_it_is_for(bad: str) -> None:
    with pytest.raises(AssertionError):
        lint(bad)


def test_pair_finding_is_labelled_with_both_gpus() -> None:
    text, snap, findings = _check(str(scenario_path("x4-nvlink-down")))
    lint(text)
    pair = next(f.subject for f in findings if f.code == "TD102")
    a, b = (int(x.removeprefix("GPU")) for x in pair.split("-"))
    got = {s.labels["UUID"] for s in samples(parse(text), "topodoctor_finding", code="TD102", subject=pair)}
    assert got == {snap.gpu(a).uuid, snap.gpu(b).uuid}


def test_every_run_names_its_host_scope_and_judged_gpus() -> None:
    from topodoctor.model.findings import Finding

    f = Finding("TD101", "nvlink-down", "error", "GPU1/nvlink5", "m", "fix", {})
    snap = probe_host("h200-x4").snapshot
    job = parse(check_metrics([f], [], 1, snap, scope="job", scope_gpus=(0, 1)))
    node = parse(check_metrics([], [], 0, snap))
    (info,) = job["topodoctor_build_info"].samples
    assert info.labels["Hostname"] == snap.host.hostname and info.labels["scope"] == "job"
    assert samples(job, "topodoctor_status", status="unhealthy")[0].labels["gpus"] == "0,1"
    assert samples(node, "topodoctor_status", status="healthy")[0].labels["gpus"] == "0,1,2,3"
    # A job's file and the node's file in one directory: no series in both.
    keys = [{(s.name, tuple(sorted(s.labels.items()))) for fam in d.values() for s in fam.samples} for d in (job, node)]
    assert not (keys[0] & keys[1])
    # Nothing probed and no host given: the writing host's name, never an empty label.
    (bare,) = parse(check_metrics([], [], 3, None, host=""))["topodoctor_exit_code"].samples
    assert bare.labels["Hostname"]


def test_collectives_findings_carry_the_gpus_identity() -> None:
    from topodoctor.model.findings import Finding

    snap = probe_host("h200-x4").snapshot
    f = Finding("TD004", "collectives-transport", "error", "GPU0-GPU2", "m", "fix", {})
    text = collectives_metrics("node1", [], [f], 1, snapshot=snap)
    lint(text)
    got = {(s.labels["gpu"], s.labels["pci_bus_id"]) for s in parse(text)["topodoctor_finding"].samples}
    assert got == {("0", dcgm_bus_id(str(snap.gpu(0).bus_id))), ("2", dcgm_bus_id(str(snap.gpu(2).bus_id)))}
