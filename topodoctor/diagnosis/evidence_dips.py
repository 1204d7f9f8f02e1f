"""An nccl-tests table whose bus bandwidth falls at some sizes and climbs again (TD996): NCCL's choice of algorithm,
protocol or channels at those sizes, not the links. Only the sizes where the links carry the traffic count (from a
few MiB up, where latency no longer bounds a row), and only a fall that the larger sizes make good."""

from __future__ import annotations

from topodoctor.core.text import human_size
from topodoctor.diagnosis.evidence_facts import where_of
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Severity

DIP_SHARE = 0.75  # a row under three quarters of the best row before it
RECOVERED = 0.95  # ... and a later row back to within 5 % of that best
FROM_BYTES = 4 << 20  # rows below this are bound by latency: their busbw climbs anyway


def dip_findings(ev: Evidence) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence) per nccl-tests run whose busbw dips and recovers."""
    out: list[tuple[Severity, str, str, dict[str, object]]] = []
    for run in ev.collectives:
        rows = [(r.size_bytes, b.busbw_gbps) for r in run.rows if r.size_bytes >= FROM_BYTES and (b := r.best)]
        best_before = 0.0
        for k, (size, bw) in enumerate(rows):
            after = max((b for _, b in rows[k + 1 :]), default=0.0)
            if best_before and bw < DIP_SHARE * best_before and after >= RECOVERED * best_before:
                low = [(s, b) for s, b in rows if b < DIP_SHARE * best_before and s >= size]
                end = next((s for s, b in rows[k:] if b >= RECOVERED * best_before), size)
                msg = (
                    f"{run.op} busbw falls to {bw:.1f} GB/s at {human_size(size)} from {best_before:.1f} at smaller "
                    f"sizes and climbs back by {human_size(end)}: NCCL's choice of algorithm, protocol or channels at "
                    "those sizes does worse here; post NCCL_DEBUG_SUBSYS=TUNING output and try NCCL_ALGO / NCCL_PROTO"
                )
                said: dict[str, object] = {"op": run.op, "dip_bytes": size, "dip_gbps": bw, "before_gbps": best_before,
                                           "rows_low": len(low), "lines": [where_of(ev, run.piece)]}  # fmt: skip
                out.append(("warning", run.op, msg, said))
                break
            best_before = max(best_before, bw)
    return out
