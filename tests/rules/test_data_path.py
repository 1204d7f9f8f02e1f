"""The data path's verdicts (TD306-TD308) and the SM latency rule (TD725): which layer each names,
what it says it costs, their severities, and what they do with an input that could not be read."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import FIXTURES, scenario_path
from tests_support import judged

from topodoctor.core.probed import ProbeError
from topodoctor.model.copies import load_result
from topodoctor.probe.sources import probe_host
from topodoctor.rules import Context, Environment, evaluate
from topodoctor.service.copies import bandwidth_findings

QUIET = Environment({}, {}, {}, (), None)


def _found(source: str, code: str) -> list:  # type: ignore[type-arg]
    snap = probe_host(str(scenario_path(source)) if scenario_path(source).exists() else source).snapshot
    return [f for f in judged(evaluate(Context(snap, QUIET))) if f.code == code]


def test_links_up_and_p2p_dead_names_the_p2p_layer_and_its_cost() -> None:
    (f,) = _found("x2-links-up-p2p-dead", "TD306")
    assert (f.severity, f.subject) == ("error", "GPU0-GPU1")
    assert f.message.startswith("GPU0-GPU1: 18 NVLinks up, data path dead at the p2p layer (P2P read GPU0->GPU1")
    assert "at most 63 GB/s a direction over PCIe instead of 478 GB/s over the links (8x slower)" in f.message
    assert f.evidence["layer"] == "p2p" and f.evidence["nvlinks_up"] == 18 and f.evidence["layers"]["fabric"] == []
    assert len(f.evidence["layers"]["p2p"]) == 8  # four capabilities, both ways


@pytest.mark.parametrize(
    ("source", "severity", "what"),
    [
        ("x2-fabric-degraded-bandwidth", "error", "fabric layer (GPU1: the fabric reports its bandwidth degraded)"),
        ("x2-p2p-atomics-refused", "warning", "p2p layer (P2P atomics GPU0->GPU1 is NOT_SUPPORTED)"),
    ],
)
def test_degraded_names_its_layer_at_its_severity(source: str, severity: str, what: str) -> None:
    (f,) = _found(source, "TD307")
    assert f.severity == severity and what in f.message and "18 NVLinks up" in f.message


def test_a_narrow_switch_uplink_names_the_gpus_that_share_it() -> None:
    (f,) = _found("pcie-2socket-uplink-x8", "TD308")
    assert (f.severity, f.subject) == ("error", "bridge:0000:03:00.0")
    assert f.evidence["gpus"] == ["GPU0", "GPU1"] and f.evidence["gbps"] == pytest.approx(15.752)
    assert "x8, below x16: GPU0, GPU1 share 16 GB/s instead of 32 GB/s a direction" in f.message
    (g,) = _found("hgx-uplink-gen4", "TD308")
    assert g.severity == "warning" and "runs Gen4, can run Gen5" in g.message and g.evidence["gpus"] == ["GPU0"]


def test_the_measured_layer_joins_the_copies() -> None:
    r = load_result(FIXTURES / "bandwidth" / "derived" / "pcie-fallback.json")
    (f,) = [f for f in bandwidth_findings(r) if f.code == "TD306"]
    assert f.subject == "GPU0-GPU3" and "dead at the measured layer" in f.message
    assert f.evidence["copies"] == [["oneway", 0, 3]] and f.evidence["modes"] == ["oneway"]
    slow = load_result(FIXTURES / "bandwidth" / "derived" / "sm-slow-pair.json")
    (g,) = [f for f in bandwidth_findings(slow) if f.code == "TD307"]
    assert g.severity == "error" and "the sm-oneway copy GPU1->GPU2 ran at 224.0 GB/s" in g.message


def test_the_sm_latency_rule_is_a_warning_with_units() -> None:
    r = load_result(FIXTURES / "bandwidth" / "derived" / "sm-latency-high.json")
    (f,) = [f for f in bandwidth_findings(r) if f.code == "TD725"]
    assert f.severity == "warning" and f.message == (
        "GPU2 reads GPU3's memory in 1.035 us a load; pairs of its connection (NV18) 0.828 us"
    )


def test_an_unreadable_p2p_status_is_could_not_check_never_a_pass() -> None:
    snap = probe_host("h100-x2").snapshot
    pair = snap.pairs[0]
    broken = replace(pair, p2p=replace(pair.p2p, read=ProbeError("NO_PERMISSION", "nvmlDeviceGetP2PStatus", 4)))
    ev = evaluate(Context(replace(snap, pairs=(broken,)), QUIET))
    assert not [f for f in ev if f.code in ("TD306", "TD307")]
    (inc,) = [f for f in ev.incomplete if f.evidence.get("field") == "p2p.read"]
    assert {"TD306", "TD307"} <= set(inc.evidence["rules"])
