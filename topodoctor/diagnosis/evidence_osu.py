"""The OSU bandwidth tests' runs judged against each other (TD979): a run whose send buffer is in GPU memory far
below one whose send buffer is in host memory, over the same path, is GPU memory staged through the host, not read by
the NIC or the peer GPU directly. Only bandwidth-bound sizes count. Data in, findings' parts out; no I/O."""

from __future__ import annotations

from topodoctor.core.text import numbered
from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.evidence import OsuRun
from topodoctor.model.findings import Severity

BANDWIDTH_BYTES = 64 << 10  # below this an osu_bw row is bound by the per-message latency, not by the link
STAGED = 0.25  # a device-buffer run under this share of the host-buffer run's peak: not the same path's rate
CANDIDATES = (
    "GPUDirect RDMA not in use: the peer-memory module not loaded (nvidia-peermem; nv_peer_mem before it, which "
    "needed MOFED), so the NIC cannot read GPU memory and every message is copied through host memory [tells: "
    "`lsmod | grep -e peermem -e nv_peer_mem`; `ib_write_bw --use_cuda=0` against `ib_write_bw`]",
    "the communication library's transports for GPU memory: UCX without cuda_copy, cuda_ipc or gdr_copy in "
    "UCX_TLS, or built without CUDA, falls back to small staged fragments [tells: `ucx_info -d | grep -i cuda`; "
    "UCX_LOG_LEVEL=info and UCX_PROTO_INFO=y on the run]",
    "the GPU and the NIC (or the two GPUs) across the CPU (SYS, NODE in `nvidia-smi topo -m`), where reads of GPU "
    "memory through the root complex are slow or refused [tells: `nvidia-smi topo -m`; the same test on a GPU "
    "under the NIC's own PCIe switch]",
)


def _peak(run: OsuRun) -> float | None:
    """The run's highest MB/s at bandwidth-bound sizes; None where it shows none."""
    rates = [mbps for size, mbps in run.rows if size >= BANDWIDTH_BYTES]
    return max(rates) if rates else None


def staged_findings(f: Facts) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence): the device-buffer runs far below a host-buffer run."""
    host = [(p, r) for r in f.osu if r.send == "host" and (p := _peak(r)) is not None]
    device = [(p, r) for r in f.osu if r.send == "device" and (p := _peak(r)) is not None]
    if not host or not device:
        return []
    ref, ref_run = max(host, key=lambda t: t[0])
    low, run = min(device, key=lambda t: t[0])
    if low >= STAGED * ref:
        return []
    at = f.where.get(run.piece, "")
    msg = (
        f"osu_{run.test} with its send buffer in GPU memory ({run.send[0].upper()} {run.recv[:1].upper()}) peaks at "
        f"{low / 1000:.2f} GB/s against {ref / 1000:.2f} GB/s with it in host memory ({ref_run.send[0].upper()} "
        f"{ref_run.recv[:1].upper()}): {low / ref:.2f} of it. GPU buffers are staged through host memory instead of "
        "going straight to the wire (GPUDirect RDMA, CUDA IPC); candidates, most likely first: " + numbered(CANDIDATES)
    )
    ev: dict[str, object] = {"device_peak_mbps": low, "host_peak_mbps": ref, "seen_in": str(at),
                             "candidates": list(CANDIDATES)}  # fmt: skip
    return [("warning", "transport", msg, ev)]
