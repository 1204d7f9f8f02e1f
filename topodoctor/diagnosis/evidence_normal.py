""" "Normal for this hardware" as an answer of its own (TD021, info): a figure at what the topology gives,
0 nvls channels on a GPU without NVLink SHARP, NCCL's socket network on one node whose channels go
through P2P, SHM between GPUs NCCL does not join by P2P by default; and the topology's reason where a
normal figure is low (a ring across PCIe, pairs across sockets, GPUs without peer access)."""

from __future__ import annotations

from topodoctor.core.text import human_size
from topodoctor.diagnosis.evidence_codes import BY_CODE
from topodoctor.diagnosis.evidence_expect import PostedExpectation
from topodoctor.diagnosis.evidence_facts import P2P_SHOWN, Facts, Measured, no_peer_access, path_class
from topodoctor.diagnosis.fallback import causes_set
from topodoctor.model.findings import Finding, Severity
from topodoctor.topology.busbw import STAGED_CLASSES
from topodoctor.topology.gpu_models import SOURCES

NOTHING = BY_CODE["TD021"].how
# nvidia-smi topo -p2p's answers other than OK, and cudaDeviceCanAccessPeer's no
NO_PEER = {"CNS": "CNS: chipset not supported", "GNS": "GNS: GPU not supported", "TNS": "TNS: topology not supported",
           "NS": "NS: not supported", "U": "U: unknown", "NO": "cudaDeviceCanAccessPeer: no"}  # fmt: skip


def _info(code: str, subject: str, message: str, evidence: dict[str, object], severity: Severity = "info") -> Finding:
    c = BY_CODE[code]
    return Finding(code, c.name, severity, subject, message, c.how, evidence)


def _hardware(f: Facts, per_node: int | None) -> str:
    name = f.model.name if f.model is not None else (f.names[0] if f.names else "these GPUs")
    return f"{per_node} x {name}" if per_node else name


def normal_findings(
    f: Facts,
    runs: list[tuple[Measured, PostedExpectation]],
    copies: list[tuple[str, float, float, str]],
    has_cause: bool,
) -> list[Finding]:
    """TD021 for each figure at what the hardware gives, and for the log lines that only look wrong."""
    out = []
    for m, e in runs:
        per_node = e.layout.gpus if e.layout is not None else None
        msg = f"{m.op} busbw {m.busbw_gbps:.1f} GB/s at {human_size(m.size_bytes)} is normal for "
        msg += f"{_hardware(f, per_node)}: {m.busbw_gbps / e.busbw_gbps:.2f} of the {e.busbw_gbps:.0f} GB/s "
        msg += f"expected at that size ({e.basis})"
        ev = {"measured_gbps": round(m.busbw_gbps, 1), "expected_gbps": e.busbw_gbps, "plateau_gbps": e.plateau_gbps,
              "basis": e.basis, "size_bytes": m.size_bytes, "seen_in": str(m.quote)}  # fmt: skip
        out.append(_info("TD021", m.op, msg, ev))
    for label, v, rate, basis in copies:
        who = "GPU" if "host" in label else "pair"
        msg = f"{label}: the slowest {who}'s {v:.0f} GB/s is {v / rate:.2f} of the {rate:.0f} GB/s nominal ({basis}), "
        msg += "as healthy copies reach"
        out.append(_info("TD021", label, msg, {"measured_gbps": v, "nominal_gbps": rate, "basis": basis}))
    gm = f.model
    if f.nvls_channels == 0 and gm is not None and not gm.nvls:
        why = "no NVSwitch" if gm.fabric != "nvswitch" else f"compute capability {gm.compute_capability}"
        msg = f"0 nvls channels is normal on {gm.name}: NVLink SHARP needs an NVSwitch and Hopper or later ({why})"
        out.append(_info("TD021", "nvls", msg, {"model": gm.name, "source": SOURCES["nvls"]}))
    socket = [s for s in f.net if (s.line.what == "network" and s.line.value.lower() == "socket")]
    socket = socket or [s for s in f.net if s.line.what == "socket"]
    one_node = f.conns and all(c.same_node is True for c in f.conns) and not any(c.kind == "net" for c in f.conns)
    if socket and one_node:
        kinds = sorted({c.transport for c in f.conns})
        said = "Using network Socket" if socket[0].line.what == "network" else "NET/Socket"
        msg = f"`{said}` is normal here: one "
        msg += f"node, every channel connection via {', '.join(kinds)} (the network carries nothing)"
        out.append(_info("TD021", "network", msg, {"lines": [str(socket[0].quote)]}))
    staged = [
        c
        for c in f.conns
        if c.kind == "shm" and c.gpus and (lb := f.link(*c.gpus)) and path_class(lb) in STAGED_CLASSES
    ]
    if staged and not causes_set(f) and not has_cause:
        c = staged[0]
        assert c.gpus is not None
        label = f.link(*c.gpus) or ""
        msg = f"SHM between GPU{c.gpus[0]} and GPU{c.gpus[1]} ({label}) is NCCL's default: it runs P2P only up to "
        msg += "PXB (through PCIe switches, not the host bridge)"
        out.append(_info("TD021", f"GPU{c.gpus[0]}-GPU{c.gpus[1]}", msg, {"path": label}))
    if f.peer_denied and not any(x.code == "TD033" for x in out):
        (a, b), said = sorted(f.peer_said.items())[0] if f.peer_said else (sorted(f.peer_denied)[0], "")
        why = NO_PEER.get(said, said)
        msg = f"GPU{a}-GPU{b}" + (f" and {len(f.peer_denied) - 1} more pairs" if len(f.peer_denied) > 1 else "")
        msg += f": no P2P ({why}): NCCL and every copy between them go through host memory"
        out.append(_info("TD033", f"GPU{a}-GPU{b}", msg, {"pairs": len(f.peer_denied), "said": said}, "warning"))
    for kind, cut in f.cut:
        if kind == "p2p-bandwidth-latency" and not f.copies:
            msg = f"p2pBandwidthLatencyTest cut before its figures ({cut}): post its Bandwidth Matrix lines, and "
            msg += "`lspci -vvv` (ACSCtl) where peer copies look slow"
            out.append(_info("TD022", "p2p-bandwidth-latency", msg, {"cut": cut}))
    return out


def reasons(f: Facts, runs: list[tuple[Measured, PostedExpectation]]) -> list[Finding]:
    """Where a normal figure is low, the topology's reason (info)."""
    out = []
    for m, e in runs:
        if e.ring_crosses_pcie:
            msg = f"{m.op}: only some GPU pairs are NVLinked ({e.layout.what if e.layout else ''}), so the ring "
            msg += "runs at the PCIe hop"
            out.append(_info("TD032", m.op, msg, {"basis": e.basis}))
        if e.crosses_sockets:
            out.append(_info("TD027", m.op, f"{m.op}: the ring crosses the CPU sockets (SYS) through host memory",
                             {"basis": e.basis}))  # fmt: skip
    # a figure far above the staged one shows P2P at work (a patched driver): then there is nothing to say
    staged_beaten = any(m.busbw_gbps >= P2P_SHOWN * e.busbw_gbps for m, e in runs if e.staged)
    shown = f.measured or f.copies or f.links or len(f.gpus) > 1 or len(f.hosts) >= 1  # several of its GPUs
    if shown and f.model is not None and no_peer_access(f) and not staged_beaten:
        figures = bool(f.measured or f.copies)
        msg = f"{f.model.name} (GeForce) has no P2P: the driver allows no peer access over PCIe, so NCCL stages "
        msg += "every transfer through host memory (SHM)" + (", as measured" if figures else "")
        msg += "; GPUs under one PCIe switch gain nothing"
        # no figure shows it: say what does (NCCL's connections, the GPUs' paths)
        msg += "" if figures else " (NCCL_DEBUG=INFO shows each connection `via SHM`; `nvidia-smi topo -m` the paths)"
        out.append(_info("TD033", "p2p", msg, {"model": f.model.name, "source": SOURCES[f.model.source]}, "warning"))
    return out
