"""`bandwidth --format prometheus` and `--metrics`: the copy measurements as series, beside the
check's (report/prometheus.py holds the families, labels and the shared run and finding series)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from topodoctor.report.prometheus import Run, _findings, _Metrics, _run, gpu_labels
from topodoctor.topology.copy_rates import expected_pairs, host_link_gbps

if TYPE_CHECKING:
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.model.findings import Finding
    from topodoctor.model.snapshot import HostSnapshot


def _failure(error: str | None, verified: bool | None) -> str | None:
    if error is not None:
        return "timeout" if error.startswith("timeout") else "error"
    return "data_mismatch" if verified is False else None


def bandwidth_metrics(
    result: BandwidthResult, findings: Sequence[Finding], exit_code: int, run_time: float | None = None
) -> str:
    """`bandwidth --format prometheus`: every measured pair and host copy in bytes/s (copy engine
    and SM kernels, by ``mode``), its ratio to what the topology gives, latencies in seconds (a small
    copy's, and the load latency across the pair), failures, and the findings."""
    snap = result.snapshot
    host = snap.host.hostname if snap is not None else result.host
    labels = gpu_labels(snap)
    measured = sorted({i for x in result.measurements for i in (x.src, x.dst) if i >= 0})
    run = Run("bandwidth", host, "node", ",".join(map(str, measured)))
    host = run.labels()["Hostname"]
    m = _Metrics()
    _run(m, run, run_time, result.wall_s, exit_code)
    _findings(m, run, labels, findings, "topodoctor_finding")
    expected = _expected(snap)
    for x in result.measurements:
        if x.mode in ("h2d", "d2h"):
            gpu = x.dst if x.mode == "h2d" else x.src
            where = {"Hostname": host, **m.gpu(labels, gpu)}
            if x.value is not None:
                m.add("topodoctor_bandwidth_host_bytes_per_second", x.value.median * 1e9, direction=x.mode, **where)
                ref = _host_ref(snap, gpu)
                if ref:
                    m.add("topodoctor_bandwidth_host_expected_ratio", x.value.median / ref, direction=x.mode, **where)
            reason = _failure(x.error, x.verified)
            if reason:
                m.add("topodoctor_bandwidth_measurement_failed", 1, mode=x.mode, peer_gpu="", reason=reason, **where)
            continue
        directions = [(x.src, x.dst, x.value)]
        if x.mode in ("bidir", "sm_bidir"):
            directions.append((x.dst, x.src, x.reverse))
        for src, dst, stats in directions:
            where = {"Hostname": host, **m.gpu(labels, src), "peer_gpu": str(dst)}
            if stats is None:
                continue
            if x.mode in ("latency", "sm_latency"):
                family = "pair_latency_seconds" if x.mode == "latency" else "pair_load_latency_seconds"
                m.add(f"topodoctor_bandwidth_{family}", stats.median * 1e-6, **where)
                continue
            m.add("topodoctor_bandwidth_pair_bytes_per_second", stats.median * 1e9, mode=x.mode, **where)
            nominal = expected.get((src, dst))
            if nominal:
                m.add("topodoctor_bandwidth_pair_expected_bytes_per_second", nominal * 1e9, mode=x.mode, **where)
                m.add("topodoctor_bandwidth_pair_expected_ratio", stats.median / nominal, mode=x.mode, **where)
        reason = _failure(x.error, x.verified)
        if reason:
            m.add(
                "topodoctor_bandwidth_measurement_failed",
                1,
                Hostname=host,
                mode=x.mode,
                peer_gpu=str(x.dst),
                reason=reason,
                **m.gpu(labels, x.src),
            )
    return m.text()


def _expected(snap: HostSnapshot | None) -> dict[tuple[int, int], float]:
    if snap is None:
        return {}

    return {k: e.nominal_gbps for k, e in expected_pairs(snap).items() if e.nominal_gbps}


def _host_ref(snap: HostSnapshot | None, gpu: int) -> float | None:
    if snap is None:
        return None

    # The link the GPU should have (full width), as TD704 judges it.
    return host_link_gbps(snap, gpu, full_width=True) or host_link_gbps(snap, gpu)
