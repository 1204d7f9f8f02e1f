"""A node's figures against its own past (TD950).

The latest result of a kind is held, figure by figure, against the node's baseline: the median
of its last N usable results of that kind before it (passed, or carrying no verdict; measured
on the same GPUs: a replaced GPU starts the baseline afresh). A figure has drifted when it is
both past the tolerance (a rate below ``1 - drift_tolerance`` of the baseline, a latency above
``1 + latency_tolerance``) and past the robust z threshold of the baseline's own spread (the
test the fleet applies across nodes, applied to one node's past).

A drift that lasts would become its own baseline after N/2 results. So the N results before
those are kept as an older baseline: when the recent baseline is itself a drift from the older
one, the latest is held against the older, and the finding says since when the figure has been
off. A drift older than 2N results is left to the comparison with the node's peers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from topodoctor.core.stats import median
from topodoctor.fleet.codes import finding
from topodoctor.fleet.request import FleetThresholds, HistoryRequest
from topodoctor.fleet.rollup import MAD_TO_SIGMA, slow_by
from topodoctor.fleet.rows import unpack_floats
from topodoctor.fleet.timeline import Past, day
from topodoctor.model.findings import Finding
from topodoctor.model.stamp import utc_iso


def figure_subject(subject: str) -> str:
    """A figure's subject as a finding names it: GPU0->GPU1 is GPU0-GPU1, host->GPU0 is GPU0."""
    if subject.startswith("host->"):
        return subject[len("host->") :]
    if subject.endswith("->host"):
        return subject[: -len("->host")]
    if subject.startswith("GPU"):
        return subject.replace("->", "-")
    return "node"


def _columns(rs: Sequence[Past], keys_id: int, keys: list[Any]) -> list[list[float]] | None:
    """Each figure's values across ``rs`` (rows of one result each), in ``keys``' order; None
    where some result lacks a figure."""
    if all(r.row.figure_keys == keys_id for r in rs):
        return [list(unpack_floats(r.row.figure_values)) for r in rs]
    return None


def _by_key(rs: Sequence[Past], blobs: dict[int, Any], keys: list[Any]) -> list[list[float | None]]:
    out = []
    for r in rs:
        names = blobs[r.row.figure_keys] if r.row.figure_keys is not None else []
        got = dict(zip((tuple(k) for k in names), unpack_floats(r.row.figure_values)))
        out.append([got.get(tuple(k)) for k in keys])
    return out


def drift_findings(
    recs: Sequence[Past], blobs: dict[int, Any], st: HistoryRequest, fleet: FleetThresholds
) -> list[Finding]:
    """TD950 for each figure of the latest of ``recs`` (one node's results of one kind, oldest
    first) that drifted from the node's own baseline."""
    latest = recs[-1]
    if not latest.usable or latest.row.figure_keys is None:
        return []
    gpus = latest.gpus
    usable = [r for r in recs[:-1] if r.usable and r.row.figure_keys is not None and r.gpus == gpus]
    n = st.baseline
    recent, older = usable[-n:], usable[-2 * n : -n] if len(usable) > n else []
    if len(recent) < st.min_baseline:
        return []
    keys = blobs[latest.row.figure_keys]
    x = unpack_floats(latest.row.figure_values)
    rows = _columns(recent + older, latest.row.figure_keys, keys) or _by_key(recent + older, blobs, keys)
    own = FleetThresholds(
        tolerance=st.drift_tolerance, z_threshold=fleet.z_threshold, latency_tolerance=fleet.latency_tolerance
    )
    out = []
    for j, key in enumerate(keys):
        source, metric, subject, unit, better = key
        r_vals = [v for v in (row[j] for row in rows[: len(recent)]) if v is not None]
        if len(r_vals) < st.min_baseline:
            continue
        base, used, absorbed = median(r_vals), r_vals, False
        o_vals = [v for v in (row[j] for row in rows[len(recent) :]) if v is not None]
        if len(o_vals) >= st.min_baseline and base > 0:
            old = median(o_vals)
            old_mad = median(abs(v - old) for v in o_vals)
            z_old = MAD_TO_SIGMA * (base - old) / old_mad if old_mad > 0 else None
            if old > 0 and slow_by(base / old, z_old, own, better):
                base, used, absorbed = old, o_vals, True
        if base <= 0:
            continue
        mad = median(abs(v - base) for v in used)
        ratio = x[j] / base
        z = MAD_TO_SIGMA * (x[j] - base) / mad if mad > 0 else None
        if not slow_by(ratio, z, own, better):
            continue
        since = _since(recs, blobs, tuple(key), base, own, better)
        figure = f"{metric} {subject}"
        basis = recent if not absorbed else older
        evidence = {
            "figure": figure,
            "source": source,
            "value": round(x[j], 3),
            "unit": unit,
            "measured_at": utc_iso(latest.t),
            "baseline": round(base, 3),
            "baseline_results": len(used),
            "baseline_from": utc_iso(basis[0].t),
            "baseline_to": utc_iso(basis[-1].t),
            "ratio": round(ratio, 4),
            "robust_z": None if z is None else round(z, 2),
            "since": utc_iso(since),
        }
        way = "above" if better == "lower" else "below"
        message = (
            f"{figure} {x[j]:.1f} {unit} on {day(latest.t)}, {ratio:.2f}x its own baseline {base:.1f} {unit} "
            f"(median of {len(used)} healthy results, {day(basis[0].t)} to {day(basis[-1].t)}); "
            f"{way} it since {day(since)}"
        )
        out.append(finding("TD950", figure_subject(subject), message, evidence))
    out.sort(key=lambda f: abs(1.0 - float(f.evidence["ratio"])), reverse=True)
    return out


def _since(
    recs: Sequence[Past], blobs: dict[int, Any], key: tuple[Any, ...], base: float, own: FleetThresholds, better: Any
) -> float:
    """The time of the first result of the latest run of results whose figure is off the baseline."""
    since = recs[-1].t
    for r in reversed(recs[:-1]):
        if r.row.figure_keys is None:
            continue
        got = dict(zip((tuple(k) for k in blobs[r.row.figure_keys]), unpack_floats(r.row.figure_values)))
        v = got.get(key)
        if v is None or not slow_by(v / base, None, own, better):
            break
        since = r.t
    return since
