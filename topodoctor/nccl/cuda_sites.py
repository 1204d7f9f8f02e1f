"""Where in NCCL a CUDA call failed, and the causes that place has: a generic CUDA error ('invalid
argument', 'unknown error', 'illegal memory access', 'operation not supported') means what the
call meant, so the finding names the call (the catalogue knows which call NCCL checks at each
file:line of each release), its site and their candidates, ranked, with what tells them apart and
what to collect next, instead of one cause the log cannot show. Data and lookups; no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoctor.nccl.catalogue import cuda_calls_at


@dataclass(frozen=True)
class Site:
    """One place in NCCL that makes CUDA calls: the files, what it does, its candidates (most
    likely first, each with what confirms or rules it out) and what to collect next."""

    files: tuple[str, ...]
    does: str
    candidates: tuple[str, ...]
    collect: str


SITES = (
    Site(
        ("transport/shm.cc", "shmutils.cc", "include/shm.h", "shm.h"),
        "the SHM transport's host memory between local ranks (NCCL 2.23+: cuMem host memory; older: /dev/shm "
        "registered with cudaHostRegister)",
        (
            "cuMem host memory refused by the driver, the container or the NUMA setup: NCCL_CUMEM_HOST_ENABLE=0 "
            "makes it go away if so",
            "/dev/shm registration refused (a VM, WSL, a tiny memlock limit): NCCL_SHM_DISABLE=1 makes it go away",
            "ranks of one node with different NCCL versions or settings (the segment formats differ)",
        ),
        "every rank's NCCL version banner and NCCL_* settings, `ulimit -l`, `df -h /dev/shm`, `numactl -H` in "
        "the container",
    ),
    Site(
        ("transport/p2p.cc",),
        "GPU memory shared directly between two GPUs of one node (CUDA IPC or cuMem handles)",
        (
            "the two GPUs cannot map each other (no P2P: GeForce, ACS/IOMMU, a VM): NCCL_P2P_DISABLE=1 makes it "
            "go away",
            "the processes may not share memory (a container without --ipc=host or CAP_SYS_PTRACE, cuMem fabric "
            "handles without IMEX): NCCL_CUMEM_ENABLE=0 makes it go away",
        ),
        "`nvidia-smi topo -p2p r`, the container's --ipc and capabilities, the driver version",
    ),
    Site(
        ("transport/nvls.cc",),
        "NVLink SHARP multicast memory on the NVSwitches",
        (
            "the Fabric Manager state (restarted while GPUs held fabric memory): NCCL_NVLS_ENABLE=0 makes it go away",
            "a driver without multicast support for this NCCL build",
        ),
        "`nvidia-smi -q | grep -A3 Fabric`, `systemctl status nvidia-fabricmanager`",
    ),
    Site(
        ("enqueue.cc",),
        "the launch of NCCL's kernels (their attributes, shared memory, the stream)",
        (
            "a known bug of this NCCL release for the GPU (see the version): upgrading NCCL fixes it",
            "a kernel of the program that faulted before (CUDA errors are sticky): CUDA_LAUNCH_BLOCKING=1 "
            "shows the first",
            "an NCCL built without code for this GPU's architecture",
        ),
        "the NCCL version banner, the GPU model, `dmesg | grep -i xid`, the run with CUDA_LAUNCH_BLOCKING=1",
    ),
    Site(
        ("allocator.cc", "include/alloc.h", "alloc.h", "misc/cudawrap.cc", "cudawrap.h", "register.cc"),
        "NCCL's own GPU and host allocations (cuMem, user buffer registration)",
        (
            "cuMem not allowed here (an old driver, a vGPU without UVM, a container): NCCL_CUMEM_ENABLE=0 makes "
            "it go away",
            "buffer registration of the program's memory (NCCL_LOCAL_REGISTER=0, NCCL_NVLS_ENABLE=0 tell)",
        ),
        "the driver version (`nvidia-smi`), the NCCL version, whether it runs in a VM or container",
    ),
    Site(
        ("init.cc", "misc/strongstream.cc", "strongstream.cc", "channel.cc"),
        "the communicator's set-up on its device (context, streams, graph capture)",
        (
            "the device or context the rank uses (CUDA_VISIBLE_DEVICES, a GPU in a bad state: `nvidia-smi`)",
            "a CUDA graph capture the driver does not support",
        ),
        "`nvidia-smi` on the node, CUDA_VISIBLE_DEVICES of each rank, `dmesg | grep -i xid`",
    ),
    Site(
        ("proxy.cc", "transport/net.cc", "net.cc", "transport/coll_net.cc"),
        "the network proxy's GPU buffers (GPUDirect RDMA registration, host staging)",
        (
            "GPUDirect RDMA between this NIC and GPU (nvidia-peermem, DMA-BUF): NCCL_NET_GDR_LEVEL=0 makes it go away",
            "a fault of the GPU (`dmesg | grep -i xid`)",
        ),
        "`lsmod | grep peermem`, the NIC and driver versions, `dmesg | grep -i xid`",
    ),
)


def site_of(source: str) -> Site | None:
    """The site of an NCCL source file (``transport/shm.cc:123`` or ``shm.cc``); None when the
    file is not one NCCL's CUDA calls are known at."""
    path = source.split(":", 1)[0]
    for site in SITES:
        if any(path == f or path.endswith("/" + f) or f.endswith("/" + path) for f in site.files):
            return site
    return None


@dataclass(frozen=True)
class Call:
    """CUDA calls of one kind: what NCCL does with them and their candidates (most likely first)."""

    names: tuple[str, ...]  # call names, or their prefixes
    does: str
    candidates: tuple[str, ...]
    collect: str


CALLS = (
    Call(  # RCCL: HIP has no cuMem path, IPC is how the processes of one node share GPU memory
        ("hipIpcOpenMemHandle", "hipIpcGetMemHandle", "hipIpcCloseMemHandle"),
        "HIP IPC between the processes of one node (RCCL's P2P transport)",
        (
            "the processes may not share GPU memory: a container needs --ipc=host and every GPU's /dev/dri node "
            "beside /dev/kfd",
            "the GPUs cannot map each other's memory: over an XGMI (Infinity Fabric) bridge its peer mappings "
            "(amdgpu.use_xgmi_p2p=0 falls back to PCIe), over PCIe the IOMMU in translation mode (RCCL warns when "
            "iommu=pt is missing from the kernel command line) or large BAR off; NCCL_P2P_DISABLE=1 makes it go away",
            "the kernel's amdgpu driver behind the ROCm user space (the distribution's in-box driver, not ROCm's "
            "amdgpu-dkms), or a bug of this ROCm or RCCL release (the banner's versions; the same run on another ROCm)",
        ),
        "the RCCL and ROCm versions in the banner, `modinfo amdgpu | grep ^version` (or `dkms status`), "
        "`cat /proc/cmdline`, the container's --ipc and devices, `dmesg | grep -i -e amdgpu -e iommu`",
    ),
    Call(
        ("cudaIpcOpenMemHandle", "cudaIpcGetMemHandle", "cudaIpcCloseMemHandle"),
        "legacy CUDA IPC between the processes of one node, which NCCL uses when cuMem is off",
        (
            "cuMem turned off (NCCL_CUMEM_ENABLE=0, set by the user or by a framework: vLLM does) sends NCCL down "
            "the legacy IPC path: set NCCL_CUMEM_ENABLE=1, or unset the 0",
            "the processes may not share GPU memory: a container needs --ipc=host",
            "the two GPUs cannot map each other (no P2P): NCCL_P2P_DISABLE=1 makes it go away",
        ),
        "`env | grep NCCL_CUMEM` in every rank (and what the framework sets), the container's --ipc",
    ),
    Call(
        (
            "cuMemImportFromShareableHandle",
            "cuMemExportToShareableHandle",
            "cuMemCreate",
            "cuMemMap",
            "cuMemSetAccess",
            "cuMemAddressReserve",
            "cuMemRetainAllocationHandle",
            "cuMemRelease",
            "cuMemUnmap",
        ),
        "cuMem memory NCCL shares between processes",
        (
            "the processes may not exchange cuMem handles: a container without --ipc=host (POSIX file "
            "descriptors), fabric handles without IMEX channels on multi-node NVLink: NCCL_CUMEM_ENABLE=0 makes "
            "it go away",
            "a driver too old for this NCCL's use of cuMem (`nvidia-smi`), or host NUMA memory (NCCL 2.23+: "
            "NCCL_CUMEM_HOST_ENABLE=0)",
        ),
        "the driver version, the container's --ipc and capabilities, `nvidia-smi -q | grep -i imex`",
    ),
    Call(
        ("cuMulticast",),
        "NVLink SHARP multicast memory",
        ("the Fabric Manager state: NCCL_NVLS_ENABLE=0 makes it go away", "a driver without multicast support"),
        "`nvidia-smi -q | grep -A3 Fabric`",
    ),
    Call(
        ("cudaHostRegister", "cudaHostUnregister"),
        "pinning a /dev/shm segment for the GPU",
        ("the driver refuses to pin shared memory here (a VM, WSL, memlock): NCCL_SHM_DISABLE=1 makes it go away",),
        "`ulimit -l`, `df -h /dev/shm`",
    ),
    Call(
        (
            "cudaFuncSetAttribute",
            "cudaFuncGetAttributes",
            "cuLaunchKernel",
            "cudaLaunchKernel",
            "cudaLaunchCooperative",
            "cuFuncSetAttribute",
            "cuFuncGetAttribute",
        ),
        "the attributes or the launch of NCCL's kernels",
        (
            "a known bug of the release for this GPU (the version: 2.25 on Blackwell): upgrading NCCL fixes it",
            "an NCCL built without code for this GPU's architecture",
            "a kernel that faulted before (CUDA errors are sticky): CUDA_LAUNCH_BLOCKING=1 shows the first",
        ),
        "the NCCL version banner, the GPU model, `dmesg | grep -i xid`",
    ),
    Call(
        ("cudaMalloc", "cuMemAlloc", "cudaHostAlloc", "cudaMallocHost", "cudaCalloc"),
        "an allocation",
        ("GPU or pinned host memory exhausted: leave room for NCCL, NCCL_BUFFSIZE", "a GPU in a bad state (Xid)"),
        "`nvidia-smi` (memory, other processes), `dmesg | grep -i xid`",
    ),
    Call(
        (
            "cudaStreamSynchronize",
            "cudaStreamQuery",
            "cudaEventSynchronize",
            "cudaEventQuery",
            "cudaMemcpy",
            "cudaMemset",
            "cudaStreamWaitEvent",
            "cudaEventRecord",
        ),
        "waiting on the GPU's work: the error is a kernel's that ran before (CUDA errors are sticky)",
        (
            "a kernel of the program that faulted before NCCL's call: CUDA_LAUNCH_BLOCKING=1 names it",
            "a fault of NCCL's kernel or of the GPU (`dmesg | grep -i xid`; a known bug of the release)",
        ),
        "the run with CUDA_LAUNCH_BLOCKING=1, `dmesg | grep -i xid`",
    ),
    Call(
        ("cudaDeviceCanAccessPeer", "cudaDeviceEnablePeerAccess"),
        "peer access between two GPUs",
        ("the two GPUs cannot map each other (no P2P): NCCL_P2P_DISABLE=1",),
        "`nvidia-smi topo -p2p r`",
    ),
    Call(
        (
            "cudaSetDevice",
            "cudaGetDevice",
            "cudaStreamCreate",
            "cudaEventCreate",
            "cudaDeviceGetAttribute",
            "cuCtx",
            "cudaGetDeviceCount",
            "cudaDriverGetVersion",
            "cuDeviceGet",
        ),
        "the device and its context",
        ("the GPU this rank uses (CUDA_VISIBLE_DEVICES) or its state (`nvidia-smi`, Xid)",),
        "`nvidia-smi`, CUDA_VISIBLE_DEVICES of each rank",
    ),
)


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])


def _holds(runs: tuple[str, ...], version: tuple[int, ...]) -> bool:
    for run in runs:
        lo, _, hi = run.partition("..")
        if _version(lo) <= version <= _version(hi or lo):
            return True
    return False


def call_at(source: str, line: str, versions: tuple[str, ...]) -> tuple[str, str] | None:
    """The CUDA call NCCL checks at ``source:line`` and the versions that make it there, as the
    log's versions narrow it: ("cudaIpcOpenMemHandle", "2.24.3..2.26.6"); None when the line holds
    no check or the candidates disagree."""
    calls = cuda_calls_at(f"{source}:{line}") if line else {}
    known = [v for v in (_version(x) for x in versions) if len(v) == 3]
    if known:
        calls = {c: r for c, r in calls.items() if any(_holds(r, v) for v in known)}
    if len(calls) != 1:
        return None
    ((call, runs),) = calls.items()
    return call, ", ".join(r.replace("..", " - ") for r in runs)


# A copy or a wait that CUDA refused with 'invalid argument': the call's own arguments, not an earlier kernel's
# fault (a sticky error comes back as that fault's own code, an illegal address, a launch failure)
REFUSED_ARGUMENT = Call(
    (),
    "a copy or wait whose own arguments CUDA refused",
    (
        "an address this process cannot use there: a pointer of another device or context, a buffer freed or not "
        "mapped yet (a peer's cuMem or IPC mapping); NCCL_CUMEM_ENABLE=0 tells whether cuMem's mappings are it",
        "a bug of this NCCL release (the version banner; a newer release)",
        "two NCCL builds in the job (each rank's banner; a second libnccl.so.2)",
    ),
    "every rank's version banner, the run with NCCL_CUMEM_ENABLE=0, `dmesg | grep -i xid`",
)


# A launch or an attribute call that CUDA answered with a kernel's fault: the fault of a kernel that ran before (CUDA
# errors are sticky; a launch does not fault by itself), not the launch's own arguments or NCCL's build
EARLIER_FAULT = Call(
    (),
    "a launch of NCCL's kernels after a kernel's fault (CUDA errors are sticky: the fault is an earlier kernel's)",
    (
        "a kernel of the program, or an earlier NCCL kernel, that faulted before this launch: CUDA_LAUNCH_BLOCKING=1 "
        "names it, `dmesg | grep -i xid` shows whether the GPU reported it",
        "a buffer freed or resized while NCCL's kernels still used it (a CUDA graph, user buffer registration)",
        "a bug of this NCCL release for the GPU (the version banner; a newer release)",
    ),
    "`dmesg | grep -i xid`, the run with CUDA_LAUNCH_BLOCKING=1, the NCCL version banner",
)
_FAULTS = re.compile(
    r"illegal (?:memory access|address|instruction)|misaligned address|launch failure|hardware stack", re.I
)


def kind_of(call: str, error: str = "") -> Call | None:
    """The kind of a CUDA call, where its candidates are known; a copy or wait refused with
    'invalid argument' / 'invalid value' (``error``) is its arguments' (``REFUSED_ARGUMENT``); a launch answered
    with a kernel's fault is an earlier kernel's (``EARLIER_FAULT``)."""
    kind = next((c for c in CALLS if call.startswith(c.names)), None)
    if kind is not None and kind.does.startswith("waiting") and error.lower() in ("invalid argument", "invalid value"):
        return REFUSED_ARGUMENT
    if kind is not None and kind.does.startswith("the attributes or the launch") and _FAULTS.search(error):
        return EARLIER_FAULT
    return kind


RCCL_BUILD = ("/rccl/", "/hipify/", "rccl/src/")  # the paths of RCCL's sources as its builds print them


def rccl_p2p(source: str) -> Call | None:
    """RCCL's P2P transport, where a HIP call failed at it: HIP IPC's causes (and XGMI's), not CUDA's cuMem ones."""
    if source.endswith("p2p.cc") and any(part in source for part in RCCL_BUILD):
        return kind_of("hipIpcGetMemHandle")
    return None
