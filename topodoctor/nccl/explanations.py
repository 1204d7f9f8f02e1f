"""The failure classes `topodoctor nccl-log` names (codes TD040 - TD108, TD957 - TD965): each with its
stable name, severity, what it means and the general fix (what `topodoctor explain CODE` prints). This
module holds the classes of the host (CUDA, NVLS, shared memory, topology files, the result
itself) and gathers those of ``explanations_network``. A finding's own fix is built from its
evidence (``nccl.fixes_*``): the HCA, the status, the variable, the file. Data only."""

from __future__ import annotations

from topodoctor.nccl.explanation import Explanation
from topodoctor.nccl.explanation import explained as _e
from topodoctor.nccl.explanations_network import NETWORK_CLASSES
from topodoctor.nccl.explanations_runtime import RUNTIME_CLASSES

__all__ = ["CODE_OF", "EXPLANATIONS", "Explanation", "explanation_text"]

_HOST = (
    _e(
        "TD043",
        "shm-exhausted",
        "error",
        "NCCL could not create its shared-memory segment: /dev/shm is full or too small",
        "In a container give /dev/shm room: `docker run --shm-size=1g` (or `--ipc=host`), a Kubernetes "
        "emptyDir with medium: Memory on /dev/shm; `df -h /dev/shm` shows its size, stale nccl-* files there "
        "can be removed. NCCL_SHM_DISABLE=1 avoids it at a cost in speed.",
    ),
    _e(
        "TD044",
        "cuda-driver-too-old",
        "error",
        "The NVIDIA driver is older than the CUDA runtime the program was built for",
        "Install a driver that supports the CUDA version the program's torch/NCCL were built with "
        "(`nvidia-smi` shows the driver's CUDA version), or use a build for the installed driver's CUDA.",
    ),
    _e(
        "TD049",
        "no-reason",
        "error",
        "NCCL failed without saying why (NCCL_DEBUG was not set): the job failed, its cause is not in the log",
        "Run again with NCCL_DEBUG=WARN (NCCL_DEBUG=INFO for transports and interfaces) and "
        "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log, then `topodoctor nccl-log` on those files; `topodoctor check` "
        "on the node lints the NCCL variables that cause most init failures.",
    ),
    _e(
        "TD051",
        "warning",
        "info",
        "NCCL printed a warning no other explanation covers (the job did not fail on it)",
        "Read the line; `topodoctor nccl-log --format json` lists every event with its file and line.",
    ),
    _e(
        "TD052",
        "error",
        "error",
        "NCCL failed (its return-code trail reached the top of the call), and topodoctor does not know the "
        "cause of this message: cause not found",
        "Read NCCL's reason in the evidence; run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV for the "
        "lines before it.",
    ),
    _e(
        "TD053",
        "nvls-fabric",
        "error",
        "NVLink SHARP (NVLS, multicast over the NVSwitches) could not be set up: the Fabric Manager or the "
        "NVSwitch state is wrong (transport/nvls.cc's CUDA call failed)",
        "Usually the Fabric Manager was restarted while GPUs held fabric state: reset the GPUs (or reboot) in "
        "the order the Fabric Manager guide gives, check `nvidia-smi -q | grep -A3 Fabric` (State Completed, "
        "Status Success) and that nvidia-fabricmanager matches the driver version; NCCL_NVLS_ENABLE=0 runs "
        "without NVLS until then.",
    ),
    _e(
        "TD054",
        "fabric-not-ready",
        "error",
        "CUDA 802 'system not yet initialized': the GPUs are not registered with the NVLink fabric",
        "Start the Fabric Manager and keep it enabled across reboots: `systemctl enable --now "
        "nvidia-fabricmanager` (its version must equal the driver's; on HGX B200 and later NVLSM must run too); "
        "`nvidia-smi -q | grep -A3 Fabric` shows State Completed when the GPU is ready.",
    ),
    _e(
        "TD055",
        "p2p-unsupported",
        "error",
        "CUDA 217: peer access is not supported between two GPUs NCCL wanted to connect directly",
        "These GPUs cannot do P2P (GeForce and some L4/L40S boards, PCIe ACS or an IOMMU in the way, a VM): "
        "set NCCL_P2P_DISABLE=1 in every rank's environment (Ray: the workers' runtime_env; also "
        "NCCL_SHM_DISABLE=1 if SHM fails next); `nvidia-smi topo -p2p r` shows which pairs can.",
    ),
    _e(
        "TD056",
        "shm-host-register",
        "error",
        "The CUDA driver refused to pin NCCL's /dev/shm segment (cudaHostRegister: invalid argument)",
        "Set NCCL_SHM_DISABLE=1 (NCCL then goes through P2P or the network between local ranks); check that "
        "/dev/shm is a tmpfs and that the memlock limit (`ulimit -l`) is not tiny; in a VM or WSL the "
        "driver may not pin shared mappings at all.",
    ),
    _e(
        "TD057",
        "cuda-failure",
        "error",
        "A CUDA call inside NCCL failed",
        "The fix depends on the CUDA error (named in the finding); `dmesg | grep -i xid` shows GPU faults, "
        "`nvidia-smi` the driver's state.",
    ),
    _e(
        "TD058",
        "gpu-out-of-memory",
        "error",
        "NCCL could not allocate its GPU buffers: the GPU's memory is full",
        "Leave room for NCCL (a few hundred MiB per communicator): lower the framework's memory fraction "
        "(vLLM --gpu-memory-utilization; JAX/XLA, which takes most of the GPU at start: "
        "XLA_PYTHON_CLIENT_MEM_FRACTION=.7 or XLA_PYTHON_CLIENT_PREALLOCATE=false; TensorFlow: "
        "TF_FORCE_GPU_ALLOW_GROWTH=true), the batch or the model shard; NCCL_BUFFSIZE and fewer channels "
        "(NCCL_MAX_NCHANNELS) shrink NCCL's share; `nvidia-smi` shows other processes on the GPU.",
    ),
    _e(
        "TD059",
        "old-nccl-allocator",
        "warning",
        "NCCL's remote allocator (bootstrap.cc, NCCL before 2.12) received a stray request and failed: a "
        "known fault of old NCCL builds",
        "Upgrade NCCL (torch builds ship their own: a newer torch, or the nvidia-nccl-cu* wheel); the job "
        "may go on, but the failed allocation can stall a later point-to-point transfer.",
    ),
    _e(
        "TD060",
        "kernel-image-missing",
        "error",
        "The NCCL library holds no GPU code for this GPU's architecture ('named symbol not found' or "
        "'no kernel image is available')",
        "Use an NCCL built for this GPU: rebuild with NVCC_GENCODE listing its compute capability "
        "(`-gencode=arch=compute_90,code=sm_90` for H100), or install a release build; check which libnccl "
        "the process loads (`ldd`, LD_LIBRARY_PATH).",
    ),
    _e(
        "TD069",
        "topology-file",
        "error",
        "NCCL could not use the topology XML it loaded (NCCL_TOPO_FILE or a network plugin's file)",
        "Fix or replace the file the finding names: regenerate it on the host with NCCL_TOPO_DUMP_FILE, or "
        "unset NCCL_TOPO_FILE; a plugin's static file (aws-ofi-nccl before 1.11) is replaced by upgrading the "
        "plugin; NCCL before 2.8 also failed on CPUs the job did not use (upgrade NCCL).",
    ),
    _e(
        "TD070",
        "graph-file",
        "error",
        "NCCL_GRAPH_FILE forces rings/trees written for other GPUs (XML Import Channel: dev not found)",
        "Unset NCCL_GRAPH_FILE (look in the environment, /etc/nccl.conf and ~/.nccl.conf): it is a tuning "
        "experiment for one exact GPU set, not a setting for production.",
    ),
    _e(
        "TD071",
        "topology-detection",
        "error",
        "NCCL could not read the host's PCI topology (a GPU's /sys path, or a link seen only one way)",
        "Run where /sys shows the GPUs' PCI devices (not WSL2 or a container that hides /sys; `ls -l "
        "/sys/bus/pci/devices`), use an NCCL that supports the platform, or give NCCL_TOPO_FILE; a driver "
        "update fixes NVLink links reported one way only.",
    ),
    _e(
        "TD074",
        "shm-peer-missing",
        "error",
        "A rank could not open a local peer's shared-memory segment (No such file or directory)",
        "Ranks of one host must share /dev/shm: one container per node or `--ipc=host`, no private /tmp or "
        "/dev/shm per rank; systemd-logind's RemoveIPC=yes deletes segments of users that log out; if neither, "
        "another NCCL version (one report was fixed by going back to 2.21.5); NCCL_SHM_DISABLE=1 avoids SHM.",
    ),
    _e(
        "TD076",
        "nccl-diagnosis",
        "info",
        "NCCL's own diagnosis line (NCCL DIAG, NCCL 2.31 and later)",
        "Read NCCL's text: it names the condition it detected.",
    ),
    _e(
        "TD077",
        "invalid-setting",
        "error",
        "NCCL cannot honour a setting: a forced algorithm or protocol the operation does not have, nodes with "
        "different NIC counts, an invalid communicator config value, a variable's value NCCL refuses by name, "
        "RDMA devices of different link layers selected together",
        "Unset the variable the finding names (NCCL_ALGO / NCCL_PROTO: let NCCL choose, or allow Ring and "
        "Simple too); for mixed NIC counts fix the node that lacks a NIC (or NCCL_IGNORE_NET_MISMATCH=1); for "
        "InfiniBand and RoCE ports mixed list the ports of one link layer in NCCL_IB_HCA.",
    ),
    _e(
        "TD078",
        "nvml",
        "error",
        "NVML, which NCCL asks for the GPUs' topology, failed",
        "'Driver/library version mismatch': the loaded kernel module is older than the user-space driver (a "
        "driver update without a reboot): reboot or reload the nvidia modules; other errors: check `nvidia-smi` "
        "in the same container (the NVML library and /dev/nvidia* must match the host's driver).",
    ),
    _e(
        "TD079",
        "wrong-results",
        "error",
        "nccl-tests found wrong values in the results: data was corrupted",
        "Data went wrong on the way: check `dmesg | grep -i xid` and ECC errors (`nvidia-smi -q -d ECC`), "
        "NVLink/PCIe error counters; narrow it down with NCCL_PROTO=Simple, NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1 "
        "and, across nodes, NCCL_NET_GDR_LEVEL=LOC (GPUDirect RDMA off: a driver or peer-memory module that corrupts "
        "the NIC's reads of GPU memory; the driver's release notes) one at a time, and run `dcgmi diag -r 3` on the "
        "node.",
    ),
    _e(
        "TD082",
        "shm-permission",
        "error",
        "NCCL may not create or open its shared-memory segment: /dev/shm refused it (Permission denied)",
        "/dev/shm must be writable by every rank's user: `ls -ld /dev/shm` shows drwxrwxrwt (fix with `chmod "
        "1777 /dev/shm`); in a container mount a tmpfs there (`--ipc=host`, `--shm-size`, a Kubernetes "
        "emptyDir with medium Memory) and run the ranks of a node as one user; NCCL_SHM_DISABLE=1 avoids SHM "
        "at a cost in speed.",
    ),
)
EXPLANATIONS: dict[str, Explanation] = {
    e.code: e for e in sorted((*_HOST, *NETWORK_CLASSES, *RUNTIME_CLASSES), key=lambda e: e.code)
}
CODE_OF = {e.name: e.code for e in EXPLANATIONS.values()}


def explanation_text(code: str) -> str | None:
    """``topodoctor explain`` for a code of ours (TD040) or its name; None for any other."""
    e = EXPLANATIONS.get(code.upper()) or EXPLANATIONS.get(CODE_OF.get(code, ""))
    if e is None:
        return None
    return f"# {e.code} {e.name} ({e.severity}, from `topodoctor nccl-log`)\n\n{e.title}.\n\nFix: {e.fix}\n"
