"""A run that stopped with no failure line (``nccl.stall_lines`` reads it: the post says it hangs, or
nccl-tests printed no result after NCCL's init). Neither says why; the candidates are the causes of a collective
that never completes (NCCL's troubleshooting guide: PCIe ACS and the IOMMU first on one node; the network across
nodes; ranks that do not call the same collectives; a GPU fault; a release's bug), ranked by what the text shows
(PCIe GPUs, several nodes). The finding's builder, and the causes as data for ``nccl.causes``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topodoctor.nccl.evidence import Builder, LogContext, Said
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.log_signs import ClassCause, ClassCauses, odd_ifs
from topodoctor.nccl.logfile import Event


def _stall(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if f.get("how") == "said":
        msg = f"the post says the run hangs ('{f.get('said', '')[:120]}') and the log shows no failure line"
    elif f.get("how") == "xla":
        spans = ", whose clique holds devices of other processes" if f.get("nodes") else ""
        msg = f"XLA's rendezvous to initialize an NCCL clique is still waiting{spans}: NCCL's init never completed"
    else:
        msg = (
            "nccl-tests stopped after NCCL's init with no result row and no error: its first collective never "
            "completed (or the paste stops there)"
        )
    if forced := _forced(evs, ctx):
        msg += f"; {forced}"
    if not ctx.info:  # what would show where it stopped: NCCL's own account of its init and first collective
        msg += "; the log holds no NCCL_DEBUG=INFO output, which would show where init or the first collective stopped"
    code = "TD959" if f.get("how") in ("said", "xla") else "TD960"
    return Said(code, msg, EXPLANATIONS[code].fix, {"how": f.get("how", "")})


def _pcie(evs: Sequence[Event], ctx: LogContext) -> bool:
    return not _nodes(evs, ctx) and (bool(evs[0].fields.get("pcie")) or bool(ctx.gpu_names))


def _nodes(evs: Sequence[Event], ctx: LogContext) -> bool:
    return bool(evs[0].fields.get("nodes")) or ctx.hosts > 1


# variables that force a path NCCL would not take by itself (a transport off, one protocol or algorithm, a level):
# set in a run that hangs, the forced path is the first suspect; NCCL_P2P_DISABLE is left out, it is the usual cure
_FORCING = ("NCCL_SHM_DISABLE", "NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_CUMEM_ENABLE",
            "NCCL_P2P_USE_CUDA_MEMCPY", "NCCL_LAUNCH_MODE", "NCCL_SHM_USE_CUDA_MEMCPY")  # fmt: skip


def _forced(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's words for the path-forcing variables the run sets, or ""."""
    shown = [f"{k}={ctx.shown[k]}" for k in _FORCING if ctx.shown.get(k, "").strip()]
    return f"the log shows {', '.join(shown)} set" if shown else ""


def _said_failed(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    msg = (
        f"the post says the run failed ('{f.get('said', '')[:120]}'), but the log holds no failure line (the paste "
        "stops before it): cause not found"
    )
    fix = (
        "Post the whole output of one failing rank, from its start to the failure, with NCCL_DEBUG=INFO "
        "(NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log keeps each rank's) and the framework's traceback; then "
        "`topodoctor nccl-log` on those files."
    )
    return Said("TD049", msg, fix, {"said": f.get("said", "")})


STALL: dict[str, Builder] = {"run-stalled": _stall, "tests-stopped": _stall, "said-failed": _said_failed}
_CAUSES = (
    ClassCause(
        "PCIe peer-to-peer traffic between the GPUs blocked or sent round by ACS on the PCIe switches and root "
        "ports or by the IOMMU (VT-d, AMD-Vi; a VM's passthrough): the first collective over P2P never "
        "completes. If the run completes with NCCL_P2P_DISABLE=1, disable ACS on the bridges above the GPUs "
        "(the BIOS, or setpci), or boot with iommu=pt (intel_iommu=off, amd_iommu=off), and keep P2P on",
        "the same run with NCCL_P2P_DISABLE=1; `lspci -vvv | grep -i acsctl` (SrcValid+ on a bridge above the "
        "GPUs); `dmesg | grep -i -e DMAR -e AMD-Vi -e iommu`; p2pBandwidthLatencyTest between the GPUs",
        first=_pcie,
    ),
    ClassCause(
        "the network between the nodes: NCCL's connections over an interface the peer cannot reach, or a "
        "firewall or security group that drops them (pin NCCL_SOCKET_IFNAME to the routed interface; on "
        "NET/IB, InfiniBand or RoCE, the GID and route), so the ranks wait for data that never comes",
        "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET on every node (the interfaces and network in use), and the "
        "same run on one node alone",
        first=lambda evs, ctx: _nodes(evs, ctx) or bool(odd_ifs(evs, ctx)),  # sockets on bridges, link-local
    ),
    ClassCause(
        "the ranks do not all call the same collectives in the same order (a rank that skipped one, an uneven "
        "split of the data, a rank held at another barrier or in its own work), so the others wait for it",
        "TORCH_DISTRIBUTED_DEBUG=DETAIL (torch's collective mismatch checks), torch's flight recorder "
        "(TORCH_NCCL_TRACE_BUFFER_SIZE) or `py-spy dump` of each rank: where each one waits",
    ),
    ClassCause(
        "a GPU or driver fault (an Xid in the kernel log, a GPU fallen off the bus), or the GPUs busy with another job",
        "`dmesg | grep -i xid` and `nvidia-smi` while it hangs",
    ),
    ClassCause(
        "a bug of the NCCL release in use (a hang fixed in a later release): the same run on the newest NCCL",
        "the NCCL version banner (NCCL_DEBUG=VERSION) against the release notes",
    ),
    ClassCause(
        "a variable the run sets forces a path NCCL would not take by itself (a transport off, one protocol or "
        "algorithm, a P2P or GPUDirect level), and that path is the one that hangs: run once without it",
        "the same run without the variable; NCCL_DEBUG=INFO's `set by environment to` lines (what the run set)",
        first=lambda evs, ctx: bool(_forced(evs, ctx)),  # a candidate, not the cause: runs set them to debug too
    ),
)
_COLLECT = (
    "the run with NCCL_DEBUG=INFO (the transports: via P2P/IPC, SHM, NET), the same run with NCCL_P2P_DISABLE=1, "
    "`nvidia-smi topo -m`, `lspci -vvv | grep -i acs`, and where each rank waits (py-spy dump, torch's flight recorder)"
)
# the post's words that it hangs (TD959), and nccl-tests' output that stops after init (TD960): the same causes
STALL_CAUSES = (ClassCauses("TD959", _CAUSES, _COLLECT), ClassCauses("TD960", _CAUSES, _COLLECT))
