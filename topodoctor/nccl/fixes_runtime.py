"""Builders of `nccl-log` findings read from NCCL's version and the programs around it: the NET
plugin aws-ofi-nccl, torch's collective check, the libnccl the process loaded, the subnet of
NCCL_COMM_ID, the topology search, the SHM transport's cuMem host memory, and a message the
catalogue of NCCL's sources knows but no class covers. Data in, text out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.nccl.evidence import Builder, LogContext, Said, odd_interfaces, older_than, with_general
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.log_signs import two_wheels
from topodoctor.nccl.parse import Event

# why aws-ofi-nccl cannot register a buffer with the NIC (libfabric's fi_mr_reg under the plugin)
_OFI_REGISTER = (
    "the locked-memory limit of the process (`ulimit -l` inside the job; --ulimit memlock=-1 in a container, "
    "LimitMEMLOCK=infinity for the service that starts it)",
    "GPU buffers without GPUDirect RDMA on this host (the efa driver's p2p support: `cat /sys/module/efa/"
    "parameters/*`, FI_EFA_USE_DEVICE_RDMA, the driver and EFA installer versions)",
    "aws-ofi-nccl, libfabric and NCCL from releases not made together (a container's own libfabric or plugin "
    "against the host's EFA installer)",
)


def _ofi(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    what = f.get("what", "").strip()
    err = f" ({f['err'].strip()})" if f.get("err") else ""
    if "fi_getinfo" in what or "provider" in what:
        specific = (
            "libfabric found no provider for the plugin: check `fi_info -p efa` in the same container (the EFA "
            "device passed in, FI_PROVIDER not naming an absent provider, libfabric as new as the plugin needs)."
        )
    elif "register memory" in what and ("-22" in err or "Invalid argument" in err):
        specific = (
            "The NIC refused the buffer as invalid (EINVAL), not for want of memory: NCCL 2.19 and later need the "
            "libfabric of EFA installer 1.29 or later (aws/aws-ofi-nccl#584): upgrade the EFA installer, or set "
            "FI_EFA_SET_CUDA_SYNC_MEMOPS=0 until then."
        )
    elif "register memory" in what:  # the errno, where printed, is not one that names the cause
        listed = list(_OFI_REGISTER)
        specific = (
            f"The plugin could not register a buffer with the NIC; candidates, most likely first: {numbered(listed)}."
        )
    else:
        specific = ""
    if "Disabling shared memory" in what and "Protocol not available" in what:  # fi_setopt's -FI_ENOPROTOOPT
        specific = (
            "The libfabric provider in use does not know FI_OPT_SHARED_MEMORY_PERMITTED, an option of the EFA "
            "provider: the plugin then fails to create its endpoint (nccl_ofi_ofiutils.c)."
        )
    providers = [s.value for s in ctx.signs if s.kind == "ofi-provider" and not s.value.startswith("efa")]
    if providers:  # the plugin is built for EFA; another provider means the EFA devices are not visible here
        specific += (
            f" The plugin selected libfabric's {providers[0]} provider, not efa: this process sees no EFA device. "
            "In a container pass them in (`--device /dev/infiniband/uverbs0` for each, the EFA device plugin on "
            "Kubernetes; `ls /dev/infiniband/uverbs*` inside); on a host without EFA leave aws-ofi-nccl out "
            "(NCCL_NET=Socket)."
        )
    extra: dict[str, object] = {"ofi": what}
    if "register memory" in what and "candidates," in specific:
        extra["candidates"] = list(_OFI_REGISTER)
    if not specific:  # a failure of the plugin whose words name no cause of their own: what makes its calls fail
        extra["candidates"] = list(_OFI_CAUSES)
        specific = f"The message names no cause; candidates, most likely first: {numbered(_OFI_CAUSES)}."
    who = "libfabric" if what.startswith("fi_getinfo: ") else "aws-ofi-nccl"  # libfabric's own line, or the plugin's
    return Said("TD084", f"{who} failed: {what}{err}", with_general("TD084", specific.strip()), extra)


# what makes the plugin's libfabric calls fail where its message says only which call (an endpoint, an address
# vector, a completion): the versions of the stack, then the device, then GPU memory through the NIC
_OFI_CAUSES = (
    "aws-ofi-nccl, libfabric and NCCL from different releases (a container's own libfabric or plugin ahead of or "
    "behind the host's EFA installer): use the versions released together",
    "the EFA device or its capabilities not visible to the process (`fi_info -p efa -t FI_EP_RDM` prints nothing in "
    "the container; the EFA device plugin, /dev/infiniband/uverbs*)",
    "GPU memory through the NIC (FI_HMEM: `fi_info -p efa -c FI_HMEM`, the efa driver's p2p support, "
    "FI_EFA_USE_DEVICE_RDMA)",
)


# torch's own check (ProcessGroupWrapper) compares each call's fingerprint across the ranks: the program
_MISMATCH_FIX = (
    "The program is at fault, not NCCL: the ranks must call the same collectives in the same order with the same "
    "tensor shapes and dtypes. Uneven data (a last batch of another size, a sample count not divisible by the "
    "ranks), a branch on the rank, or an exception caught on one rank are the usual causes; the message names "
    "both ranks' calls (TORCH_DISTRIBUTED_DEBUG=DETAIL found it)."
)


_FP_OP = re.compile(r"OpType=(\w+)")
_FP_SHAPE = re.compile(r"TensorShape=\[([^\]]*)\]")
_FP_DTYPE = re.compile(r"TensorDtypes=(\w+)")
_FP_SEQ = re.compile(r"SequenceNumber=(\d+)")
_DIFF = re.compile(r"\.?\s*Collectives differ in the following aspects:\s*(.*)$")


def _call(fingerprint: str) -> str:
    """One rank's call from torch's CollectiveFingerPrint: "ALLREDUCE of [195812480] BFloat16" (1.13's short
    form names the operation alone: "REDUCE")."""
    text = _DIFF.sub("", fingerprint).strip().rstrip(".")
    op = m.group(1) if (m := _FP_OP.search(text)) else (text if re.fullmatch(r"\w+", text) else "")
    if not op:
        return text[:120] or "?"
    shape = f" of [{m.group(1)}]" if (m := _FP_SHAPE.search(text)) else ""
    dtype = f" {m.group(1)}" if (m := _FP_DTYPE.search(text)) else ""
    return f"{op}{shape}{dtype}"


def _torch_mismatch(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """torch's check of each call's fingerprint across the ranks, or its flight recorder's: the ranks, their
    calls (operation, shape, dtype) and what differs, as torch says it."""
    extra: dict[str, object] = {}
    if f.get("fr"):  # the flight recorder's analyser
        culprit = f": {f['culprit'][:200]}" if f.get("culprit") else ""
        msg = f"torch's flight recorder found the ranks' collectives differ ({f['fr']}{culprit})"
        extra["flight_recorder"] = f["fr"]
    elif f.get("a"):
        ca, cb = f.get("ca", ""), f.get("cb", "")
        seq = m.group(1) if (m := _FP_SEQ.search(ca)) else ""
        other = m.group(1) if (m := _FP_SEQ.search(cb)) else ""
        diff = m.group(1).strip() if (m := _DIFF.search(cb or ca)) else ""
        at = f" at sequence {seq}" if seq else ""
        if f.get("b") and other and other != seq:  # the same call at different counts: one rank ran more of them
            msg = f"rank {f['a']} is at collective {seq} ({_call(ca)}) while rank {f['b']} is at {other} "
            msg += f"({_call(cb)}): a collective mismatch, one rank called more collectives than the other"
            extra["ranks"] = [int(f["a"]), int(f["b"])]
        elif f.get("b"):
            msg = f"rank {f['a']} runs {_call(ca)} while rank {f['b']} runs {_call(cb)}{at}"
            extra["ranks"] = [int(f["a"]), int(f["b"])]
        else:  # torch 1.10-1.12 name the inconsistent rank alone
            msg = f"rank {f['a']} runs {_call(ca)}{at}, which the other ranks do not"
            extra["ranks"] = [int(f["a"])]
        differ = " ".join(diff.split())[:160]
        msg += f": the ranks' collectives differ ({differ})" if differ else ": the ranks' collectives differ"
    else:
        msg = "torch found the ranks running different collectives (shapes, types or operations differ)"
    return Said("TD073", msg, _MISMATCH_FIX, extra)


def _library(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if f.get("noload"):  # XLA loads libnccl at run time and says only that it found none
        return Said(
            "TD085",
            "the program found no NCCL library to load (XLA's NCCL stub: 'Unable to load NCCL library')",
            "Install NCCL where the program loads it: JAX builds from 0.4.18 no longer bundle it, so a "
            "cuda12_local install needs the nvidia-nccl-cu12 wheel (or the system libnccl2) beside it; the cuda12 "
            "pip extra installs it. `ldconfig -p | grep libnccl` and LD_LIBRARY_PATH show which libnccl.so.2 the "
            "process can find.",
            {"symbol": ""},
        )
    if f.get("nokernel"):  # TensorFlow's build holds no NCCL kernels: NCCL ships for Linux only
        return Said(
            "TD085",
            f"TensorFlow has no kernel for its {f.get('op', 'NCCL')} op: this build of TensorFlow holds no NCCL",
            "NCCL is built for Linux only, so TensorFlow's Windows builds (and its CPU builds) register no NCCL "
            "kernels, while MirroredStrategy reduces with NcclAllReduce by default. On Windows pass "
            "cross_device_ops=tf.distribute.HierarchicalCopyAllReduce() (or ReductionToOneDevice()) to "
            "MirroredStrategy, or run under Linux or WSL2 with a GPU build of TensorFlow.",
            {"symbol": f.get("op", "")},
        )
    if built := f.get("built") or f.get("built2"):  # dev_runtime.cc (2.29+): the device API's check of both
        msg = f"the program was built with NCCL {built} but runs with libnccl {f.get('runs') or f.get('runs2')}"
        if f.get("older"):
            msg += ": built against a release too old for this libnccl's device API"
            return Said(
                "TD085",
                msg,
                "Rebuild the program (its device-side NCCL code) against the nccl.h of the libnccl it loads, or "
                "load the libnccl it was built with. " + EXPLANATIONS["TD085"].fix,
                {"symbol": ""},
            )
        fix = two_wheels(ctx) + EXPLANATIONS["TD085"].fix
        return Said("TD085", msg + ": the libnccl is older than the program", fix, {"symbol": ""})
    if f.get("unknown"):  # ncclGetErrorString's answer for a result code its own release does not define
        candidates = [
            "two libnccl builds in one process: the code came from one (a framework's bundled NCCL, a newer release) "
            "and the error text from another that lacks it (torch's wheel beside the program's own NCCL); load one "
            "NCCL (LD_LIBRARY_PATH, the framework's wheel) [tells: `ldd` of the program and its plugins, "
            "`torch.cuda.nccl.version()` against the system's libnccl]",
            "the program passed NCCL's error-string call a code that is not an ncclResult_t (its own error) [tells: "
            "the program's source at the line it names]",
        ]
        msg = "NCCL's error text for the failed call's code is 'unknown result code': the libnccl that answered does "
        msg += "not define that code"
        fix = f"Candidates, most likely first: {numbered(candidates)}. " + EXPLANATIONS["TD085"].fix
        return Said("TD085", msg, fix, {"symbol": "", "candidates": candidates})
    if lib := f.get("lib3"):  # building, not running: the link editor found no libnccl to link against
        msg = f"building against NCCL, the link editor did not find {lib}, which a library being linked needs"
        fix = (
            "Point the build at the NCCL it was configured with: its lib directory in LIBRARY_PATH / "
            "LD_LIBRARY_PATH (or -rpath-link), or install that libnccl; then link again. " + EXPLANATIONS["TD085"].fix
        )
        return Said("TD085", msg, fix, {"symbol": ""})
    if sym := f.get("sym2"):
        msg = f"building against NCCL, the link editor found no definition of {sym}: no libnccl, or an older one, "
        msg += "is on the link line"
        return Said("TD085", msg, EXPLANATIONS["TD085"].fix, {"symbol": sym})
    if f.get("sym"):
        msg = f"the libnccl loaded has no {f['sym']}: it is older than the program was built for"
    elif ver := f.get("ver") or f.get("ver2"):  # a symbol version the program was linked against
        msg = f"the {f.get('lib2') or 'libnccl'} loaded has no symbol version {ver}: older than the program needs"
    else:
        msg = f"{f.get('lib') or 'libnccl'} could not be loaded"
    return Said("TD085", msg, two_wheels(ctx) + EXPLANATIONS["TD085"].fix, {"symbol": f.get("sym", "")})


def _mnnvl(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """mnnvl.cc: NCCL tried a FABRIC handle on a multi-node NVLink domain; which step failed names the part of
    IMEX (2.27+: allocating it needs an IMEX channel, exporting / importing it the IMEX daemon's domain)."""
    clique = f" of {f['clique']} GPUs" if f.get("clique") else ""
    if f.get("forced"):
        msg = "NCCL_MNNVL_ENABLE=1 asked for multi-node NVLink, which this system does not offer"
        specific = "Unset NCCL_MNNVL_ENABLE (NCCL uses multi-node NVLink where the fabric has it)."
    elif f.get("imex") == "channel configuration":
        msg = f"the multi-node NVLink domain{clique} is present but NCCL could not allocate fabric memory"
        specific = (
            "The allocation needs an IMEX channel: /dev/nvidia-caps-imex-channels/channel0 is missing on the host "
            "or not passed into the container."
        )
    else:
        msg = f"the multi-node NVLink domain{clique} is present but fabric memory could not be shared through IMEX"
        specific = (
            "The export or import of the fabric handle failed: the nvidia-imex daemon is not running on every "
            "node, or its node list differs (`nvidia-imex-ctl -N`)."
        )
    return Said("TD093", msg, with_general("TD093", specific), {"clique": f.get("clique", "")})


def _subnet(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    comm_id = ctx.env.get("NCCL_COMM_ID", "")
    addr = f.get("addr", "").rstrip(".")
    named = f" (NCCL_COMM_ID={comm_id})" if comm_id else ""
    specific = odd_interfaces(ctx)
    if older_than(ctx, (2, 27, 3)):
        specific += (
            " NCCL before 2.27.3 also stopped its subnet search early on hosts with many interfaces (fixed in "
            "2.27.3): upgrade NCCL if an interface on that subnet does exist."
        )
    return Said(
        "TD086",
        f"no interface of this host is in the subnet of {addr or 'the remote address'}{named}",
        with_general("TD086", specific.strip()),
        {"address": addr},
    )


def _graph_search(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """NCCL's topology search failed: its own words do not say why, so the candidates, ranked."""
    if f.get("ring"):
        what = f"ring {f['ring']} does not {f.get('how', 'loop back to start')}"
    elif f.get("what") or evs[0].fields.get("said", "").lower().startswith("could not find"):
        what = f"could not find {f.get('what') or evs[0].fields.get('said', '')[15:135]}"
    else:
        what = evs[0].fields.get("said", "")[:120]
    settings = ("NCCL_TOPO_FILE", "NCCL_GRAPH_FILE", "NCCL_CROSS_NIC", "NCCL_NET_MERGE_LEVEL", "NCCL_HOSTID")
    forced = ", ".join(f"{k}={ctx.env[k]}" for k in settings if k in ctx.env)
    shown = f"the log shows {forced}: try without it; " if forced else ""
    candidates = _search_candidates(f"{what} {evs[0].fields.get('said', '')}", shown, ctx) or [
        f"{shown}settings that make ranks see different systems (NCCL_TOPO_FILE, NCCL_GRAPH_FILE, NCCL_HOSTID, "
        "NCCL_CROSS_NIC, NCCL_NET_MERGE_LEVEL set on some nodes only)",
        "different NCCL versions on the nodes (each rank's version banner)",
        "a known bug of the release: NCCL 2.19.0 - 2.19.3 computed rings from unset PCI link speeds (fixed in "
        "2.19.4; the maintainers: 2.20), NIC fusion in 2.25 - 2.26 (fixed in 2.27.3): upgrade NCCL",
    ]
    ranked = numbered(candidates)
    return Said(
        "TD052",
        f"NCCL's topology search failed: {what}; cause not found",
        f"Candidates, most likely first: {ranked}. Collect next: every rank's NCCL version banner and NCCL_* "
        "settings, NCCL_DEBUG_SUBSYS=GRAPH and NCCL_TOPO_DUMP_FILE on each node. " + EXPLANATIONS["TD052"].fix,
        {"candidates": candidates},
    )


def _search_candidates(said: str, shown: str, ctx: LogContext) -> list[str]:
    """The candidates of the topology search's messages whose site says more than the search failed; [] for
    the others. ``Could not find NET with id`` (graph/topo.h ncclTopoIdToNetDev, 2.21 - 2.28): a channel of the
    graph names a NIC this rank's system does not hold. ``P2P is disabled between NVLINK connected GPUs``
    (graph/paths.cc ncclTopoCheckP2p): NVML reports no P2P between GPUs an NVLink joins."""
    if "NET with id" in said or "net id" in said:
        fusion = (
            "NIC fusion's bug of NCCL 2.25.0 - 2.26.6 (NICs merged into one virtual NIC the graph then names; "
            "fixed in 2.27.3) [tells: the version banner; `NET/IB : Made virtual device` or `TOPO/NET : Tried "
            "merging multiple devices together and failed` at NCCL_DEBUG=INFO; NCCL_NET_MERGE_LEVEL=LOC makes it "
            "go away]"
        )
        files = (
            f"{shown}a graph or topology file (NCCL_GRAPH_FILE, NCCL_TOPO_FILE) that names a NIC this node lacks "
            "[tells: their `set by environment` lines, /etc/nccl.conf; run once without them]"
        )
        nics = (
            "ranks that see different NICs: NCCL_IB_HCA, NCCL_NET_MERGE_LEVEL or NCCL_CROSS_NIC set on some nodes "
            "only, a NIC down or missing in one container [tells: each node's `NET/IB : Using` line]"
        )
        versions = "different NCCL versions on the nodes [tells: each rank's version banner]"
        in_range = older_than(ctx, (2, 27, 3)) is not False and older_than(ctx, (2, 25, 0)) is not True
        first = [files] if shown else []
        return [*first, *([fusion] if in_range else []), *([] if shown else [files]), nics, versions]
    if "P2P is disabled between NVLINK" in said:
        return [
            "the NVLink fabric not up: on NVSwitch systems the Fabric Manager not running or not ready [tells: "
            "`nvidia-smi -q | grep -A3 Fabric`, `systemctl status nvidia-fabricmanager`]",
            "a GPU or NVLink fault [tells: `nvidia-smi nvlink -s` (links inactive), Xid in the kernel log]",
            "a VM or container that restricts P2P between the GPUs [tells: `nvidia-smi topo -p2p r` on the host]",
        ]
    return []


def cumem_host(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """The SHM transport's cuMem host memory (NCCL 2.23+): a CUDA call of transport/shm.cc that failed, or a
    peer's segment of size 0 or with a garbage name; NCCL_CUMEM_HOST_ENABLE=0 is the way around it."""
    where = f" in {evs[0].source}" if evs[0].source else ""
    if f.get("msg") or f.get("num"):
        num = f" {f['num']}" if f.get("num") else ""
        what = f"a CUDA call of the SHM transport failed{where}: CUDA error{num} '{f.get('msg', '')}'"
    else:
        seg, size = f.get("seg") or f.get("seg2", ""), f.get("size") or f.get("size2", "0")
        what = f"a local peer's SHM segment reads as {seg!r} of size {size}: not a segment it made"
    if older_than(ctx, (2, 23, 0)):
        return Said(
            "TD056",
            what + " (an NCCL without cuMem host memory)",
            "NCCL_SHM_DISABLE=1 confirms SHM is the part that fails; " + EXPLANATIONS["TD056"].fix,
        )
    return Said("TD087", what, EXPLANATIONS["TD087"].fix)


def _efa_memlock(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD061",
        "libfabric's EFA provider could not allocate memory (-12) and aborted the process",
        EXPLANATIONS["TD061"].fix,
    )


def _bad_address(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """NCCL was to connect to an address of no address family: which side made it, the log's settings tell."""
    family = f.get("family", "")
    ifname = ctx.env.get("NCCL_SOCKET_IFNAME")
    versions = {v.split("+")[0] for v in ctx.versions}
    candidates = [
        "ranks on different NCCL versions: the unique id's layout differs, the peer's address reads as empty "
        "(compare every node's NCCL version banner)",
        "NCCL_SOCKET_IFNAME (or NCCL_COMM_ID) naming no interface of some node: the address stays unset",
    ]
    msg = f"NCCL was to connect to an address of no family ({family}): it is not an address"
    if ifname or (family != "0" and len(versions) < 2):
        named = f" (the log shows NCCL_SOCKET_IFNAME={ifname})" if ifname else ""
        ranked = numbered(reversed(candidates))
        return Said(
            "TD041", msg + named, f"Candidates: {ranked}. " + EXPLANATIONS["TD041"].fix, {"candidates": candidates}
        )
    ranked = numbered(candidates)
    shown = f"; the logs name NCCL {', '.join(sorted(versions))}" if versions else ""
    return Said("TD048", msg + shown, f"Candidates: {ranked}. " + EXPLANATIONS["TD048"].fix, {"candidates": candidates})


def _plugin_broken(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """A NET plugin NCCL found and could not load: NCCL goes on with its own IB or sockets, not the network the
    plugin was installed for (EFA needs aws-ofi-nccl: without it the nodes talk over TCP)."""
    err = f.get("err", "")
    ofi = any(w in err.lower() for w in ("ofi", "fabric", "efa"))
    msg = f"the network plugin was found but could not be loaded ({err}): NCCL runs on its internal network instead"
    if ofi:
        fix = (
            "The aws-ofi-nccl plugin needs the libfabric it was built against: a version the linker cannot find "
            "(version `FABRIC_x' not found) means the libfabric on the library path is older; put the EFA "
            "installer's /opt/amazon/efa/lib (and the plugin's own folder) first on LD_LIBRARY_PATH, or install "
            "the aws-ofi-nccl release built for this libfabric. Check with `ldd` on the plugin: every library "
            "resolved, no 'not found'."
        )
        return Said(
            "TD084", "aws-ofi-nccl " + msg.removeprefix("the network "), with_general("TD084", fix), {"err": err}
        )
    fix = (
        "Load it by hand to see the whole error (`ldd` on the plugin: each 'not found' is a library missing from "
        "LD_LIBRARY_PATH; an undefined symbol is a plugin built for another NCCL or library release) and install "
        "the plugin's dependencies, or remove the plugin (NCCL_NET_PLUGIN=none) where NCCL's own network is meant."
    )
    return Said("TD099", msg, fix, {"err": err})


RUNTIME: dict[str, Builder] = {
    "net-plugin-broken": _plugin_broken,
    "efa-memlock": _efa_memlock,
    "bad-address": _bad_address,
    "ofi": _ofi,
    "torch-mismatch": _torch_mismatch,
    "nccl-library": _library,
    "subnet": _subnet,
    "graph-search": _graph_search,
    "cumem-host": cumem_host,
    "mnnvl": _mnnvl,
}
