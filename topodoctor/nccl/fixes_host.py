"""Builders of `nccl-log` findings for what fails on the host: NVLS and the Fabric Manager, CUDA
errors inside NCCL (P2P, memory, kernels, the driver), the topology and graph XML, NVML, nccl-tests' result
check (shared memory: ``fixes_shm``; settings NCCL cannot honour: ``fixes_setting``). Data in, text out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.nccl.cuda_errors import CAPTURE_CAUSES, CAPTURE_COLLECT, CUDA_HINTS, CUDA_STATES, cuda_text
from topodoctor.nccl.cuda_sites import call_at, kind_of, rccl_p2p, site_of
from topodoctor.nccl.evidence import Builder, LogContext, Said, older_than, with_general
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.fixes_runtime import cumem_host
from topodoctor.nccl.fixes_usage import own_p2p
from topodoctor.nccl.parse import Event


def _nvls(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    where = f" in {evs[0].source}" if evs[0].source else ""
    return Said(
        "TD053",
        f"NVLS multicast setup failed{where}" + (f": {cuda_text(f)}" if f.get("msg") or f.get("num") else ""),
        EXPLANATIONS["TD053"].fix,
        {"cuda_error": f.get("num") or f.get("msg", "")},
    )


def _fabric(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD054",
        "CUDA 802 'system not yet initialized': the Fabric Manager has not registered the GPUs",
        EXPLANATIONS["TD054"].fix,
    )


# NCCL's own forms of a CUDA error (its WARN, CUDACHECK's "Cuda failure", torch's NCCL error text)
_BY_NCCL = re.compile(r"NCCL|Cuda failure|CUDA error \d+")
_OWN_P2P_CAUSE = (
    "the program's own peer-to-peer kernels (a custom all-reduce over CUDA IPC: vLLM, TensorRT-LLM, sglang), which "
    "NCCL_P2P_DISABLE does not reach: turn the custom all-reduce off (vLLM --disable-custom-all-reduce, TensorRT-LLM "
    "without use_custom_all_reduce or with the NCCL all-reduce strategy)"
)


def _p2p(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if (own := own_p2p(f, evs, ctx)) is not None:  # a program's own P2P kernels, not NCCL's transport
        return own
    specific = ""
    if ctx.env.get("NCCL_P2P_DISABLE") == "1":
        specific = "The log shows NCCL_P2P_DISABLE=1, yet P2P was tried: the failing process did not get it."
    extra: dict[str, object] = {}
    also = ""
    if not any(e.source or _BY_NCCL.search(e.text) for e in evs):
        # CUDA's words alone, in no NCCL or CUDA-check form (a title, a framework's message): a program's own
        # peer-to-peer code (a custom all-reduce over CUDA IPC) asks for peer access as NCCL's P2P transport does
        extra["candidates"] = [_OWN_P2P_CAUSE, "P2P between the two GPUs in NCCL: NCCL_P2P_DISABLE=1"]
        return Said(
            "TD055",
            "CUDA 217: peer access is not supported between two GPUs (the line does not say whose code asked for it)",
            f"Candidates, most likely first: (1) {_OWN_P2P_CAUSE}; (2) NCCL's P2P transport: "
            + with_general("TD055", specific),
            extra,
        )
    if not any(e.source for e in evs) and older_than(ctx, (2, 23, 0)) is not True:
        # without NCCL's file the SHM transport's cuMem host memory (2.23+) raises the same error
        extra["candidates"] = ["P2P between the two GPUs: NCCL_P2P_DISABLE=1", "SHM's cuMem host memory"]
        also = (
            " The log does not name NCCL's file: if NCCL_P2P_DISABLE=1 does not help, the SHM transport's cuMem host "
            "memory (NCCL 2.23+) raises the same error: NCCL_CUMEM_HOST_ENABLE=0."
        )
    return Said(
        "TD055",
        "CUDA 217: peer access is not supported between two GPUs NCCL connects directly",
        with_general("TD055", specific) + also,
        extra,
    )


def _framework_p2p(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """accelerate's own refusal of RTX 40xx GPUs: GeForce boards have no peer-to-peer over PCIe, and the check
    stops the run before NCCL tries it unless both transports are off."""
    msg = "accelerate stopped the run: RTX 40xx GPUs have no peer-to-peer (P2P) over PCIe and no IB path"
    fix = (
        'Set NCCL_P2P_DISABLE="1" and NCCL_IB_DISABLE="1" in every rank\'s environment (the check reads both), or '
        "start the job with `accelerate launch`, which sets them; NCCL then goes through shared memory between the "
        "GPUs of a node."
    )
    return Said("TD055", msg, fix)


# CUDA errors whose meaning is the call's: without NCCL's file:line the log does not say which
_CALL_SPECIFIC = ("invalid argument", "invalid value")
# CUDA errors that report the GPU's or driver's state first, whatever the call: their own meaning leads the call's
_STATE_FIRST = ("unknown error", "invalid resource handle")
# after the state's own meaning, what else leaves CUDA in a state it cannot name (cudaErrorUnknown at any call)
_STATE_OTHERS = (
    "the nvidia-uvm module missing or stale after a driver update or a suspend (`lsmod | grep nvidia_uvm`)",
    "in a container or VM, the GPU's device files or the driver's libraries not passed in whole (the container "
    "toolkit's mounts, the VM's passthrough)",
)
_STATE_COLLECT = "`dmesg | grep -i xid`, `nvidia-smi`, and a CUDA sample (deviceQuery) run in the same environment"


def _cuda(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    msg = f.get("msg", "")
    if msg.lower() in _CALL_SPECIFIC and not any(e.source for e in evs):
        return Said(
            "TD052",
            f"a CUDA call in NCCL failed ({cuda_text(f)}) at a call the log does not name: cause not found",
            "Run again with NCCL_DEBUG=WARN: the WARN line names NCCL's file. transport/nvls.cc: NVLS and the "
            "Fabric Manager (NCCL_NVLS_ENABLE=0 confirms it); shmutils / shm: registering /dev/shm "
            "(NCCL_SHM_DISABLE=1); p2p / cumem / alloc: sharing GPU memory between processes "
            "(NCCL_CUMEM_ENABLE=0, --ipc=host in containers).",
            {"cuda_error": msg},
        )
    if "captur" in msg.lower():  # CUDA's stream-capture errors: a CUDA graph's capture, not NCCL's own call
        extra_capture: dict[str, object] = {"cuda_error": msg, "candidates": list(CAPTURE_CAUSES)}
        return Said(
            "TD057",
            f"CUDA refused an operation while a CUDA graph was captured: {cuda_text(f)}; the error does not say "
            "which operation",
            f"Candidates, most likely first: {numbered(CAPTURE_CAUSES)}. Collect next: {CAPTURE_COLLECT}.",
            extra_capture,
        )
    hint = next((h for key, h in CUDA_HINTS if key.lower() in msg.lower()), "")
    source = next((e.source for e in evs if e.source), "")
    where = f" in {source}" if source else ""
    fix = (hint[0].upper() + hint[1:] + ".") if hint else EXPLANATIONS["TD057"].fix
    extra: dict[str, object] = {"cuda_error": msg}
    if any(k in msg.lower() for k in CUDA_STATES):
        return Said("TD057", f"a CUDA call failed{where}: {cuda_text(f)}", fix, extra)
    if "shm.cc" in ctx.trail_sources and source.endswith(("alloc.h", "cudawrap.cc", "cudawrap.h")):
        return cumem_host(f, evs, ctx)  # an allocation of the SHM transport: its cuMem host memory
    line = next((e.fields.get("at", "") for e in evs if e.source == source), "")
    if msg.lower() in _CALL_SPECIFIC:  # the error means what the call meant: the call's candidates say it
        fix = EXPLANATIONS["TD057"].fix
    # the call the line names itself, else the one NCCL's release checks at that file:line (RCCL's P2P: HIP IPC)
    found = (f["call"], "") if f.get("call") else call_at(source, line, ctx.versions)
    if found is None and rccl_p2p(source) is not None:
        found = ("a HIP call", "")
    if found and (kind := kind_of(found[0], msg) or rccl_p2p(source)):
        call, span = found
        listed = ([hint] if hint and msg.lower() in _STATE_FIRST else []) + list(kind.candidates)
        ranked = numbered(listed)
        extra |= {"site": f"{source}:{line}", "call": call, "candidates": listed}
        what = f"the call NCCL {span} checks there: {kind.does}" if span else kind.does
        return Said(
            "TD057",
            f"{call} failed in {source}:{line} ({what}): {cuda_text(f)}",
            f"Candidates for {call}, most likely first: {ranked}. Collect next: {kind.collect}. {fix}",
            extra,
        )
    site = site_of(source) if source else None
    if site is None and hint and msg.lower() in _STATE_FIRST:  # the state's causes, the call unknown
        listed = [hint, *_STATE_OTHERS]
        ranked = numbered(listed)
        extra |= {"candidates": listed}
        return Said(
            "TD057",
            f"a CUDA call failed{where}: {cuda_text(f)}; the error does not say which state it is",
            f"Candidates, most likely first: {ranked}. Collect next: {_STATE_COLLECT}.",
            extra,
        )
    if site is None:
        return Said("TD057", f"a CUDA call failed{where}: {cuda_text(f)}", fix, extra)
    listed = ([hint] if hint and msg.lower() in _STATE_FIRST else []) + list(site.candidates)
    ranked = numbered(listed)
    extra |= {"site": source, "candidates": listed}
    return Said(
        "TD057",
        f"a CUDA call failed{where} ({site.does}): {cuda_text(f)}; the error does not say which of this "
        "site's causes it is",
        f"Candidates at {source}, most likely first: {ranked}. Collect next: {site.collect}. {fix}",
        extra,
    )


def _oom(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if f.get("size"):  # torch's caching allocator: "CUDA out of memory. Tried to allocate 2.00 GiB"
        said = f"a rank's GPU memory is full: torch's allocator could not allocate {f['size']}"
        return Said("TD058", said, EXPLANATIONS["TD058"].fix)
    if f.get("from") == "words":  # the post says so; NCCL's own WARN is not in the paste
        said = f"the post says NCCL ran out of GPU memory ({f.get('said', '')[:120]}); NCCL's own line is not pasted"
        return Said("TD058", said, EXPLANATIONS["TD058"].fix)
    if "CUDA error:" in f.get("said", ""):  # torch's own CUDA check, in a rank or in the watchdog
        return Said("TD058", "a CUDA call in a rank failed: out of memory", EXPLANATIONS["TD058"].fix)
    return Said("TD058", "NCCL's GPU allocation failed: CUDA out of memory", EXPLANATIONS["TD058"].fix)


def _rem_alloc(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD059",
        f"{evs[0].fields.get('said', '[Rem Allocator] Allocation failed').strip()[:80]}: old NCCL's remote allocator "
        "took a stray request",
        EXPLANATIONS["TD059"].fix,
    )


def _kernel(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    text = cuda_text(f)
    if "named symbol" in text.lower():  # CUDA 500: a symbol the module lacks, which more than the arch explains
        msg = f"{text}: a kernel or symbol NCCL looked up is not in the code loaded"
        fix = f"Candidates, most likely first: {numbered(_SYMBOL_CAUSES)}. {EXPLANATIONS['TD060'].fix}"
        return Said("TD060", msg, fix, {"candidates": list(_SYMBOL_CAUSES)})
    if any("rccl" in e.text.lower() or "/hipify/" in e.text for e in evs):  # AMD's RCCL: a gfx target, not an sm
        return Said("TD060", f"{text}: this RCCL has no code object for this GPU's gfx target", _RCCL_TARGET)
    return Said("TD060", f"{text}: this NCCL has no GPU code for this GPU's architecture", EXPLANATIONS["TD060"].fix)


_RCCL_TARGET = (
    "`rocminfo | grep gfx` lists each GPU's target; a GPU the RCCL build leaves out stops the job, most often an "
    "integrated Radeon beside the discrete ones (gfx1036 on Ryzen 7000 CPUs): hide it from the job "
    "(HIP_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES naming only the discrete GPUs; or disable it in the BIOS or "
    "amdgpu), or use an RCCL built with GPU_TARGETS naming every GPU's target."
)


# what leaves CUDA's 'named symbol not found' (cudaErrorSymbolNotFound) at NCCL's kernel lookups
_SYMBOL_CAUSES = (
    "an NCCL (or torch) built without GPU code for this GPU's architecture, a new GPU under an old build: the "
    "build's compute capability list against the GPU's (`torch.cuda.get_arch_list()`, `nvidia-smi -q`)",
    "two NCCL or CUDA builds mixed in one process (a system libnccl beside a wheel's, LD_PRELOAD, a container's "
    "CUDA libraries over the host's): `grep -e nccl -e cuda /proc/PID/maps`",
    "a driver older than the CUDA runtime the build needs (`nvidia-smi` against the build's CUDA version)",
)


def _driver(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD044", "the CUDA driver is older than the CUDA runtime the program was built with", EXPLANATIONS["TD044"].fix
    )


def _topo(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    file = ctx.topo_file or ctx.env.get("NCCL_TOPO_FILE", "")
    if f.get("rem") and not file:  # no file loaded: NCCL's own detection is at fault
        return _sysfs(f, evs, ctx)
    named = f" {file}" if file else " (NCCL_TOPO_FILE, or one a network plugin supplied)"
    if f.get("attr"):
        what = f"attribute '{f['attr']}' of node '{f['node']}' is missing from the topology XML{named}"
    elif f.get("rem"):
        what = f"the topology XML{named} has a link with no way back (remNode {f['rem']})"
    else:
        what = f"the topology XML{named} could not be read: {evs[0].fields.get('said', '')}"
    return Said("TD069", what, EXPLANATIONS["TD069"].fix, {"topo_file": file})


def _graph(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    file = ctx.env.get("NCCL_GRAPH_FILE", "")
    named = f"NCCL_GRAPH_FILE={file}" if file else "NCCL_GRAPH_FILE"
    dev = f" (dev {f['dev']} not found)" if f.get("dev") else ""
    if f.get("file"):  # xml.cc: fopen failed, with strerror
        err = f": {f['err'].strip()}" if f.get("err") else ""
        msg = f"NCCL could not open the graph file {f['file']}{err} (a path missing or unreadable on this node)"
        return Said("TD070", msg, EXPLANATIONS["TD070"].fix, {"graph_file": file or f["file"]})
    if f.get("version"):
        needed = f.get("needed", "?")
        msg = f"{named} is in graph format {f['version']}, this NCCL reads {needed}: dumped by another release"
        return Said("TD070", msg, EXPLANATIONS["TD070"].fix, {"graph_file": file})
    return Said(
        "TD070",
        f"{named} names GPUs or NICs this job does not have{dev}",
        EXPLANATIONS["TD070"].fix,
        {"graph_file": file},
    )


def _sysfs(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if f.get("path"):
        msg = f"NCCL could not resolve {f['path']}: the GPU's PCI device is not visible in /sys"
    else:
        msg = f"NCCL's topology has a link seen one way only (remNode {f.get('rem', '?')})"
        if older_than(ctx, (2, 19, 0)):  # an NCCL older than the GPU model misreads its NVLink / NVSwitch
            versions = ", ".join(dict.fromkeys(v.split("+")[0] for v in ctx.versions))
            first = (
                f"Upgrade NCCL first: {versions} may predate this GPU model, whose links an older NCCL misreads "
                "(H100 needs 2.15 or later)."
            )
            return Said("TD071", msg + f" (NCCL {versions})", with_general("TD071", first))
    return Said("TD071", msg, EXPLANATIONS["TD071"].fix)


def _diag(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said("TD076", f"NCCL DIAG: {f.get('said', '')[:200]}", EXPLANATIONS["TD076"].fix)


def _graph_capture(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD077",
        "NCCL cannot run inside a CUDA graph here: a driver older than R465 or an NCCL built with CUDA < 11.3",
        "Update the driver (or use an NCCL built with CUDA 11.3+), or run without graph capture (vLLM "
        "--enforce-eager, torch without CUDA graphs).",
    )


def _nvml(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if lib := f.get("lib"):  # NVML's library is not where the process loads from: the driver's user space
        why = f" ({f['dlerr'].strip()})" if f.get("dlerr") else ""
        msg = f"NCCL could not load {lib}{why}: the NVIDIA driver's user-space libraries are not in this process"
        fix = (
            "Run the container with the NVIDIA runtime (`docker run --gpus all`, the device plugin's "
            "NVIDIA_DRIVER_CAPABILITIES with utility), or install the driver; `ldconfig -p | grep libnvidia-ml` "
            "and `nvidia-smi` in the same environment show it. " + EXPLANATIONS["TD078"].fix
        )
        return Said("TD078", msg, fix, {"library": lib})
    if "ByPciBusId" in f.get("call", "") and "Not Found" in f.get("err", ""):  # a bus id this process's NVML lacks
        return Said(
            "TD078",
            f"{f.get('call')} failed: Not Found: NVML in this process does not see the GPU at a bus id NCCL was given "
            "(a peer rank's GPU)",
            "The ranks of one node see different GPUs: containers started with a GPU each (NVIDIA_VISIBLE_DEVICES, "
            "Kubernetes' nvidia.com/gpu: 1 per pod) cannot map each other's GPUs. Run one container per node with "
            "every GPU, or give each rank's container all the node's GPUs and pick one with CUDA_VISIBLE_DEVICES; "
            "`nvidia-smi -L` in each container shows what it sees.",
        )
    return Said("TD078", f"{f.get('call')} failed: {f.get('err', '').strip()}", EXPLANATIONS["TD078"].fix)


def _wrong(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said("TD079", f"nccl-tests found {f.get('n')} wrong values in its results", EXPLANATIONS["TD079"].fix)


HOST: dict[str, Builder] = {
    "nvls": _nvls,
    "fabric-not-ready": _fabric,
    "p2p-unsupported": _p2p,
    "cuda-failure": _cuda,
    "gpu-oom": _oom,
    "rem-allocator": _rem_alloc,
    "kernel-image": _kernel,
    "cuda-driver": _driver,
    "topo-attr": _topo,
    "topo-reverse": _topo,
    "graph-file": _graph,
    "topo-sysfs": _sysfs,
    "framework-p2p": _framework_p2p,
    "diag": _diag,
    "nvml": _nvml,
    "graph-capture": _graph_capture,
    "wrong-results": _wrong,
}
