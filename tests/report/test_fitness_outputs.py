"""Fitness in every output: Prometheus series with dcgm-exporter's labels, the expectations
file, the drawing, and the probe's window on the real recording."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from conftest import scenario_path
from prometheus_client.parser import text_string_to_metric_families
from tests_support import judged

from topodoctor.probe.sources import probe_host
from topodoctor.report.draw import draw_topology
from topodoctor.report.prometheus import check_metrics
from topodoctor.rules import Context, Environment, evaluate
from topodoctor.topology.expect import from_snapshot

QUIET = Environment({}, {}, {}, (), None)


def _source(name: str) -> str:
    path = scenario_path(name)
    return str(path) if path.exists() else name


def _metrics(name: str) -> dict[str, list[Any]]:
    snap = probe_host(_source(name)).snapshot
    ev = evaluate(Context(snap, QUIET))
    text = check_metrics(ev.findings, ev.incomplete, 0, snap, run_time=1.0)
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_clock_event_reasons_as_a_bit_gauge_and_per_reason_with_dcgm_labels() -> None:
    fams = _metrics("x1-hw-slowdown")
    (mask,) = fams["topodoctor_gpu_clocks_event_reasons"]
    assert mask.value == 0x48
    assert mask.labels["gpu"] == "0" and mask.labels["pci_bus_id"] == "00000000:00:06.0" and mask.labels["UUID"]
    active = {s.labels["reason"] for s in fams["topodoctor_gpu_clocks_event_reason"] if s.value == 1}
    assert active == {"hw_slowdown", "hw_thermal_slowdown"}
    clocks = {(s.labels["clock"], s.labels["kind"]): s.value for s in fams["topodoctor_gpu_clock_hertz"]}
    assert clocks[("sm", "current")] == 1005e6 and clocks[("sm", "max")] == 1980e6


def test_counter_deltas_not_raw_counts() -> None:
    fams = _metrics("x1-sw-thermal")
    rise = {s.labels["policy"]: s.value for s in fams["topodoctor_gpu_violation_during_check_seconds"]}
    assert rise["sw_thermal"] == 0.02 and rise["power"] == 0
    (window,) = fams["topodoctor_gpu_counter_window_seconds"]
    assert abs(window.value - 0.03) < 1e-9
    pcie = {
        s.labels["counter"]: s.value
        for s in _metrics("x1-pcie-errors-storm")["topodoctor_gpu_pcie_errors_during_check"]
    }
    # 14 receiver errors from boot stand still: the series says 0, never 14.
    assert pcie["naks_received"] == 60 and pcie["bad_tlp"] == 15 and pcie["receiver_errors"] == 0


def test_nic_ports_up_rate_and_counter_deltas() -> None:
    down = _metrics("hgx-nic-port-down")
    up = {s.labels["nic"]: s.value for s in down["topodoctor_nic_port_up"]}
    assert up["mlx5_3"] == 0 and up["mlx5_0"] == 1
    rate = {s.labels["nic"]: s.value for s in down["topodoctor_nic_port_rate_bytes_per_second"]}
    assert rate["mlx5_0"] == 50e9
    flap = _metrics("hgx-nic-link-flap")
    errs = {(s.labels["nic"], s.labels["counter"]): s.value for s in flap["topodoctor_nic_port_errors_during_check"]}
    assert errs[("mlx5_1", "link_downed")] == 1 and errs[("mlx5_1", "symbol_error")] == 37
    assert errs[("mlx5_0", "symbol_error")] == 0


def test_an_old_recording_writes_no_fitness_series() -> None:
    """Values an older recording lacks are no series at all, never a 0 that reads healthy."""
    fams = _metrics("h200-x4")
    assert "topodoctor_gpu_clocks_event_reasons" not in fams
    assert "topodoctor_gpu_pcie_errors_during_check" not in fams


def test_expect_writes_power_limit_and_nic_rates() -> None:
    exp = from_snapshot(probe_host("h200-x1").snapshot)
    assert exp.power_limit_w == 700.0 and exp.nic_rate_gbps == {}
    nic = from_snapshot(probe_host(_source("hgx-nic-half-rate")).snapshot)
    assert nic.nic_rate_gbps["mlx5_0/1"] == 400.0 and nic.nic_rate_gbps["mlx5_5/1"] == 200.0


def _marked(name: str, kind: str) -> dict[str, str]:
    snap = probe_host(_source(name)).snapshot
    findings = judged(evaluate(Context(snap, QUIET)).findings)
    root = ET.fromstring(draw_topology(snap, findings))
    return {
        e.get("data-key", ""): e.get("data-codes", "")
        for e in root.iter()
        if kind in (e.get("class") or "").split() and e.get("data-codes")
    }


def test_the_drawing_marks_a_throttled_gpu_and_a_degraded_nic() -> None:
    assert list(_marked("x1-hw-slowdown", "gpu").values()) == ["TD530"]
    assert _marked("hgx-nic-half-rate", "nic") == {"NIC5": "TD421"}
