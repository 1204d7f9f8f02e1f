"""Where in NCCL a CUDA call failed, and the causes that place has: a generic CUDA error ('invalid
argument', 'unknown error', 'illegal memory access', 'operation not supported') means what the
call meant, so the finding names the site and its candidates, ranked, with what tells them apart
and what to collect next, instead of one cause the log cannot show. Read from NCCL's sources
(the calls each file makes). Data and one lookup; no I/O."""

from __future__ import annotations

from dataclasses import dataclass


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
