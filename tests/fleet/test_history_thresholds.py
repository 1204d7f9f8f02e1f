"""Every threshold of the history at and just across its edge: drift (rates and latencies, the
baseline's size and spread), lemons (k of n, D days after a repair), flapping, rising counters
and silence. Stored rows are made directly, with exact figures."""

from __future__ import annotations

from array import array
from typing import Any

from topodoctor.fleet.drift import drift_findings
from topodoctor.fleet.episodes import Verdict, counters_rising, flapping, lemon, silent
from topodoctor.fleet.request import FleetThresholds, HistoryRequest
from topodoctor.fleet.rows import StoredRow
from topodoctor.fleet.timeline import DAY_S, Past

T0 = 1_796_000_000.0
BLOBS: dict[int, Any] = {
    1: [["fitness", "hbm ce", "GPU0", "GB/s", "higher"]],
    2: [["fitness", "latency sm", "GPU0->host", "ns", "lower"]],
    3: [["GPU1", "pcie_replay"], ["GPU1", "nvlink_crc"]],
    4: [[0, "GPU-a", "S0", "0000:00:06.0"], [1, "GPU-b", "S1", "0000:00:07.0"]],
}
ST = HistoryRequest()


def _row(day: float, keys: int | None = None, values: list[float] | None = None, **kw: Any) -> Past:
    fields: dict[str, Any] = {
        "node": "n1",
        "kind": "check",
        "measured_at": T0 + day * DAY_S,
        "time_from": "result",
        "state": "healthy",
        "reason": "",
        "path": f"day{day}",
        "node_type": None,
        "gpus": 4,
        "finding_keys": "",
        "findings": "",
        "figure_keys": keys,
        "figure_values": array("d", values).tobytes() if values is not None else None,
        "counter_keys": None,
        "counter_values": None,
    }
    fields.update(kw)
    return Past(StoredRow(**fields), BLOBS, 2)


def _drift(baseline: list[float], latest: float, keys: int = 1, st: HistoryRequest = ST) -> list[Any]:
    recs = [_row(i, keys, [v]) for i, v in enumerate(baseline)] + [_row(len(baseline), keys, [latest])]
    return drift_findings(recs, BLOBS, st, FleetThresholds())


def test_drift_at_and_across_the_tolerance() -> None:
    flat = [100.0] * 7  # no spread: the ratio alone decides
    assert _drift(flat, 95.0) == []  # exactly 5 % below: not past the tolerance
    (f,) = _drift(flat, 94.99)
    assert (f.code, f.severity, f.subject, f.evidence["baseline"]) == ("TD950", "error", "GPU0", 100.0)
    assert _drift(flat, 94.99, st=HistoryRequest(drift_tolerance=0.06)) == []


def test_latency_drift_is_a_rise_past_the_latency_tolerance() -> None:
    flat = [1000.0] * 7
    assert _drift(flat, 1150.0, keys=2) == [] and _drift(flat, 800.0, keys=2) == []  # faster is no fault
    (f,) = _drift(flat, 1150.5, keys=2)
    assert f.evidence["unit"] == "ns" and "above it since" in f.message


def test_drift_within_the_baselines_own_spread_is_no_drift() -> None:
    noisy = [100.0, 90.0, 110.0, 95.0, 105.0, 92.0, 108.0]  # median 100, MAD 8: z of 94 is -0.5
    assert _drift(noisy, 94.0) == []
    assert _drift(noisy, 59.0) == []  # 41 % below, but z -3.46: within what this figure does
    assert len(_drift(noisy, 58.0)) == 1  # z -3.54


def test_too_small_a_baseline_is_not_judged() -> None:
    assert _drift([100.0, 100.0], 50.0) == []
    assert len(_drift([100.0] * 3, 50.0)) == 1
    assert _drift([100.0] * 3, 50.0, st=HistoryRequest(min_baseline=4)) == []


def test_a_failed_latest_or_a_failed_past_is_no_baseline() -> None:
    failed = {"state": "unhealthy", "finding_keys": "error TD101 GPU1/nvlink5"}
    recs = [_row(i, 1, [100.0], **failed) for i in range(7)] + [_row(7, 1, [50.0])]
    assert drift_findings(recs, BLOBS, ST, FleetThresholds()) == []
    recs = [_row(i, 1, [100.0]) for i in range(7)] + [_row(7, 1, [50.0], **failed)]
    assert drift_findings(recs, BLOBS, ST, FleetThresholds()) == []


def test_a_replaced_gpu_starts_the_baseline_afresh() -> None:
    BLOBS[5] = [[0, "GPU-new", "S9", "0000:00:06.0"], [1, "GPU-b", "S1", "0000:00:07.0"]]
    recs = [_row(i, 1, [100.0]) for i in range(7)] + [_row(7, 1, [80.0], gpus=5)]
    assert drift_findings(recs, BLOBS, ST, FleetThresholds()) == []  # no healthy result of this GPU yet


def _seq(fail_days: list[float], days: int = 10) -> list[Verdict]:
    return [
        Verdict(T0 + d * DAY_S, d in fail_days, ("TD101 GPU1/nvlink5",) if d in fail_days else ()) for d in range(days)
    ]


def test_lemon_k_of_n() -> None:
    assert lemon("node", "TD951", _seq([1, 4, 8]), [], ST, "the node") is not None
    assert lemon("node", "TD951", _seq([4, 8]), [], HistoryRequest(repair_days=0), "the node") is None
    # The oldest of three failures just out of the last n checks.
    assert lemon("node", "TD951", _seq([0, 5, 8], days=11), [], HistoryRequest(repair_days=0), "the node") is None


def test_lemon_again_within_d_days_of_a_repair() -> None:
    seq = [Verdict(T0, True), Verdict(T0 + DAY_S, False), Verdict(T0 + 8 * DAY_S, True)]
    f = lemon("node", "TD951", seq, [], ST, "the node")  # failed again 7.0 days after the repair: within
    assert f is not None and f.evidence["days"] == 7.0
    seq[2] = Verdict(T0 + 8 * DAY_S + 60, True)
    assert lemon("node", "TD951", seq, [], ST, "the node") is None  # a minute past D
    # A GPU replaced after a failure is a repair too.
    seq = [Verdict(T0, True), Verdict(T0 + 20 * DAY_S, True)]
    assert lemon("node", "TD951", seq, [T0 + 15 * DAY_S], ST, "the node") is not None
    assert lemon("node", "TD951", seq, [], ST, "the node") is None


def _flaps(present: list[bool], severity: str = "error", st: HistoryRequest = ST) -> list[Any]:
    key = f"{severity} TD101 GPU1/nvlink5"
    recs = [_row(i, finding_keys=key if p else "") for i, p in enumerate(present)]
    return flapping(recs, st, "error")


def test_flapping_at_and_across_its_count() -> None:
    (f,) = _flaps([True, False, True, False])  # cleared twice
    assert (f.code, f.severity, f.evidence["clears"]) == ("TD953", "error", 2)
    assert _flaps([True, False, True]) == []  # cleared once: it may be fixed
    assert _flaps([True, True, True, True]) == []  # there all along: no flapping, a fault (its own finding)
    # The first clear out of the window.
    assert _flaps([True, False] + [True, False] + [False] * 11, st=HistoryRequest(flap_results=12)) == []
    (w,) = _flaps([True, False, True, False], severity="warning")
    assert w.severity == "warning"
    assert _flaps([True, False, True, False], severity="info") == []  # below --flap-level


def _counters(rises: dict[int, tuple[int, int]], days: int = 8, now_day: float = 7.5) -> list[Any]:
    recs = []
    replay = crc = 0
    for d in range(days):
        a, b = rises.get(d, (0, 0))
        replay, crc = replay + a, crc + b
        recs.append(_row(d, counter_keys=3, counter_values=array("q", [replay, crc]).tobytes()))
    return counters_rising(recs, BLOBS, ST, T0 + now_day * DAY_S)


def test_counters_rising_on_enough_days() -> None:
    (f,) = _counters({3: (1, 0), 5: (2, 0), 7: (1, 0)})
    assert (f.code, f.subject, f.evidence["rise"], f.evidence["counter"]) == ("TD954", "GPU1", 4, "pcie_replay")
    assert _counters({5: (2, 0), 7: (1, 0)}) == []  # two days of three
    assert _counters({0: (1, 0), 5: (2, 0), 7: (1, 0)}) == []  # the first out of the 7 days
    # CRC ticks on healthy links: a day's rise counts from 100.
    assert _counters({3: (0, 99), 5: (0, 99), 7: (0, 99)}) == []
    assert len(_counters({3: (0, 100), 5: (0, 100), 7: (0, 100)})) == 1


def test_a_counter_reset_counts_from_zero() -> None:
    recs = [
        _row(d, counter_keys=3, counter_values=array("q", [v, 0]).tobytes())
        for d, v in ((0, 50), (3, 51), (5, 2), (7, 3))  # a reboot between day 3 and 5: 2 since
    ]
    (f,) = counters_rising(recs, BLOBS, ST, T0 + 7.5 * DAY_S)
    assert f.evidence["rise"] == 4


def test_silent_at_and_across_its_limit() -> None:
    recs = [_row(0)]
    assert silent(recs, ST, T0 + 3 * DAY_S) is None
    f = silent(recs, ST, T0 + 3 * DAY_S + 1)
    assert f is not None and (f.code, f.severity) == ("TD956", "warning")
