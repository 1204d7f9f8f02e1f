"""The failure classes `topodoctor nccl-log` names (codes TD040 - TD079): each with its stable
name, severity, what it means and the general fix (what `topodoctor explain CODE` prints). A
finding's own fix is built from its evidence (``nccllog.fixes``): the HCA, the status, the
variable, the file. Data only."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.model.findings import Severity


@dataclass(frozen=True)
class Explanation:
    """One failure class: its stable code and name, severity, what it means, and the fix."""

    code: str
    name: str
    severity: Severity
    title: str
    fix: str


def _e(code: str, name: str, severity: Severity, title: str, fix: str) -> Explanation:
    return Explanation(code, f"nccl-log-{name}", severity, title, fix)


_ALL = (
    _e(
        "TD040",
        "no-net-plugin",
        "error",
        "NCCL found no network it may use: NCCL_NET (or a plugin) names a network with no usable device here",
        "Unset NCCL_NET (NCCL then picks IB when an RDMA device is up, else sockets) or set NCCL_NET=Socket; "
        "`ls /sys/class/infiniband` and `ibv_devinfo` show whether the host has an IB device at all; "
        "`topodoctor check` lints NCCL_NET and NCCL_IB_HCA against the host.",
    ),
    _e(
        "TD041",
        "no-socket-interface",
        "error",
        "NCCL found no network interface for its sockets (NCCL_SOCKET_IFNAME matches nothing, or the host has "
        "no usable IP interface)",
        "Set NCCL_SOCKET_IFNAME to an interface that is up on every node (`ip -br addr`; a prefix such as `eth` "
        "matches eth0, `=eth0` only eth0; interfaces named differently per node: list both, `eno1,eth0`), or "
        "unset it; `topodoctor check` lints it against the host.",
    ),
    _e(
        "TD042",
        "duplicate-gpu",
        "error",
        "Two ranks of one host use the same GPU",
        "Give each rank its own GPU: torch.cuda.set_device(LOCAL_RANK) before init_process_group (or "
        "device_id=...), horovod: hvd.local_rank(); check CUDA_VISIBLE_DEVICES per rank and what the launcher "
        "(torchrun --nproc-per-node, mpirun, Ray's GPU assignment) gives each process.",
    ),
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
        "TD045",
        "ib-completion-error",
        "error",
        "An InfiniBand/RoCE transfer ended with a completion error (status 12: the peer's NIC did not "
        "acknowledge in time)",
        "Status 12 (transport retry counter exceeded): the two NICs cannot reach each other over RDMA. On RoCE "
        "the GID index is the usual cause (NCCL_IB_GID_INDEX to the RoCE v2 GID `show_gids` lists, same "
        "traffic class as the switches expect); on rail-optimised fabrics NCCL_CROSS_NIC=0; otherwise the link "
        "(`ibstat`, port counters, cable, switch port) or a peer that died first. NCCL_IB_TIMEOUT and "
        "NCCL_IB_RETRY_CNT only widen the window.",
    ),
    _e(
        "TD046",
        "peer-lost",
        "error",
        "A peer went away in the middle of a collective (remote process exited or a network error)",
        "This rank is a victim: find the rank that failed first (its own log's last lines: an exception, "
        "out of memory, an XID in `dmesg`, a killed process) and fix that; then the network between the nodes.",
    ),
    _e(
        "TD047",
        "watchdog-timeout",
        "error",
        "A collective did not finish within the process group's timeout (torch's watchdog)",
        "A rank never joined the collective (a hang, a different code path, a dead process) or the network "
        "stalled: compare each rank's last completed sequence number; TORCH_NCCL_TRACE_BUFFER_SIZE and "
        "the flight recorder show where each rank stood. Raise the timeout only for known-slow first steps.",
    ),
    _e(
        "TD048",
        "version-mismatch",
        "error",
        "Ranks run different NCCL versions",
        "Run every rank from one image or environment (`python -c 'import torch; print(torch.cuda.nccl."
        "version())'` on each node); LD_LIBRARY_PATH or a system libnccl can shadow the one torch ships.",
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
        "TD050",
        "ib-fallback",
        "warning",
        "InfiniBand was asked for but NCCL found no IB device and fell back to TCP sockets",
        "Name RDMA devices that exist in NCCL_IB_HCA (`ls /sys/class/infiniband`), or unset it; on a host "
        "without RDMA NICs sockets are all there is.",
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
        "(vLLM --gpu-memory-utilization), the batch or the model shard; NCCL_BUFFSIZE and fewer channels "
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
        "TD061",
        "ib-memlock",
        "error",
        "An RDMA registration failed with 'Cannot allocate memory': the locked-memory limit is too low",
        "Raise the memlock limit for the job: `ulimit -l unlimited` in the launcher's shell, memlock unlimited "
        "in /etc/security/limits.conf (then log in again), `--ulimit memlock=-1` for docker, "
        "PropagateResourceLimits / LimitMEMLOCK for Slurm and systemd; check it inside the job (`mpirun ... "
        "sh -c 'ulimit -l'`).",
    ),
    _e(
        "TD062",
        "ib-dmabuf",
        "error",
        "DMA-BUF registration of GPU memory is not supported on this host (ibv_reg_dmabuf_mr)",
        "Set NCCL_DMABUF_ENABLE=0 (NCCL then uses nvidia-peermem for GPUDirect RDMA), or bring the RDMA stack "
        "up to DMA-BUF support (kernel 5.12+, a recent MOFED/rdma-core, the open GPU kernel module).",
    ),
    _e(
        "TD063",
        "ib-device-unusable",
        "error",
        "An RDMA device NCCL picked is unusable ('No such device' from a verbs call)",
        "Restrict NCCL to ports that are up: NCCL_IB_HCA=<active devices> (`ibstat`/`ibv_devinfo` show State "
        "Active, LinkUp); on RoCE a VF or bond member without an IP has no GID: NCCL_IB_GID_INDEX, or give the "
        "interface its address.",
    ),
    _e(
        "TD064",
        "ib-qp-connect",
        "error",
        "A queue pair could not be connected to its peer (ibv_modify_qp to RTR/RTS failed)",
        "Timed out: the NICs cannot reach each other (rail-optimised fabric: NCCL_CROSS_NIC=0; RoCE: routing "
        "between the two GIDs); Network is unreachable: no route for the GID (RoCE v2 IP, NCCL_IB_GID_INDEX); "
        "Invalid argument: a wrong forced NCCL_IB_GID_INDEX (-1 lets NCCL pick).",
    ),
    _e(
        "TD065",
        "ib-verbs",
        "error",
        "An InfiniBand verbs call failed",
        "Check the device (`ibv_devinfo`), that the container sees /dev/infiniband and may lock memory "
        "(IPC_LOCK, `ulimit -l`), and the errno the finding names.",
    ),
    _e(
        "TD066",
        "ib-local-protection",
        "error",
        "An RDMA transfer ended with status 4 (local protection error): GPUDirect RDMA between the NIC and "
        "the GPU is blocked",
        "PCIe ACS on the switches between NIC and GPU (or an IOMMU in translation mode) breaks GPUDirect: "
        "confirm with NCCL_NET_GDR_LEVEL=0 (runs, but slower), then disable ACS (`lspci -vvv | grep ACSCtl`, "
        "BIOS or setpci) or boot with iommu=pt; in a VM enable ATS for the passed-through devices.",
    ),
    _e(
        "TD067",
        "ib-work-flushed",
        "error",
        "An RDMA request was flushed (status 5): its queue pair had already failed",
        "Status 5 follows another failure: find the first completion error or the peer that died (its log); "
        "NICs of one host that cannot reach each other also end here.",
    ),
    _e(
        "TD068",
        "ib-remote-error",
        "error",
        "The peer's NIC rejected an RDMA operation (status 9/10/11/13)",
        "The remote side refused or had no receive posted: ranks on different NCCL versions or settings, the "
        "peer's GPU memory registration (GPUDirect on the peer: ACS, nvidia-peermem), or a peer that hung.",
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
        "TD072",
        "connect-failed",
        "error",
        "A TCP connection between ranks failed (NCCL's bootstrap or socket transport)",
        "Check that every node reaches every other on the interface NCCL uses (`nc -l PORT` on one, `nc HOST "
        "PORT` on the other), the firewall (ufw, firewalld, security groups allow the ephemeral ports between "
        "nodes), MASTER_ADDR/NCCL_SOCKET_IFNAME naming a routable interface.",
    ),
    _e(
        "TD073",
        "collective-mismatch",
        "error",
        "Ranks disagreed on a transfer's size (collective mismatch / message truncated)",
        "The ranks did not run the same NCCL operation: different NCCL settings between nodes (NCCL_PROTO, "
        "NCCL_ALGO, NCCL_BUFFSIZE: compare `env | grep NCCL` on each), different NCCL versions, or the "
        "program called collectives in a different order or size on some ranks (TORCH_DISTRIBUTED_DEBUG=DETAIL).",
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
        "TD075",
        "socket-closed-job-went-on",
        "warning",
        "A socket closed, but the job went on afterwards: not a fatal loss of a peer",
        "Nothing failed because of it; if it repeats, see which process connected and left (a port scanner, "
        "a restarted helper thread) and upgrade NCCL (2.27.3 ignores connections that close before NCCL's "
        "handshake).",
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
        "different NIC counts, an invalid communicator config value",
        "Unset the variable the finding names (NCCL_ALGO / NCCL_PROTO: let NCCL choose, or allow Ring and "
        "Simple too); for mixed NIC counts fix the node that lacks a NIC (or NCCL_IGNORE_NET_MISMATCH=1).",
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
        "one at a time, and run `dcgmi diag -r 3` on the node.",
    ),
)
EXPLANATIONS: dict[str, Explanation] = {e.code: e for e in _ALL}
CODE_OF = {e.name: e.code for e in EXPLANATIONS.values()}


def explanation_text(code: str) -> str | None:
    """``topodoctor explain`` for a code of ours (TD040) or its name; None for any other."""
    e = EXPLANATIONS.get(code.upper()) or EXPLANATIONS.get(CODE_OF.get(code, ""))
    if e is None:
        return None
    return f"# {e.code} {e.name} ({e.severity}, from `topodoctor nccl-log`)\n\n{e.title}.\n\nFix: {e.fix}\n"
