"""The failure classes of `nccl-log` that happen between processes and nodes: networks and
sockets, InfiniBand / RoCE verbs and completions, peers, ranks and versions that disagree,
torch's watchdog. Data only; ``explanations`` gathers every class."""

from __future__ import annotations

from topodoctor.nccl.explanation import explained as _e

NETWORK_CLASSES = (
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
        "unset it; `topodoctor check` lints it against the host. In a container whose network has no routed "
        "interface (docker's --network none, an isolated bridge between nodes) run with --net=host.",
    ),
    _e(
        "TD042",
        "duplicate-gpu",
        "error",
        "Two ranks of one host use the same GPU",
        "Give each rank its own GPU: torch.cuda.set_device(LOCAL_RANK) before init_process_group (or "
        "device_id=...), horovod: hvd.local_rank(); check CUDA_VISIBLE_DEVICES per rank and what the launcher "
        "(torchrun --nproc-per-node, accelerate's num_processes, mpirun, Ray's GPU assignment) gives each process. A "
        "node given more processes than it has GPUs (--nproc-per-node, num_processes, -np or a script's process count "
        "above `nvidia-smi -L`'s) puts two ranks on one GPU whatever set_device does: start one process per GPU.",
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
        "TD100",
        "one-host-name-two-machines",
        "error",
        "Two machines share one host name, so NCCL took their ranks for one node",
        "NCCL tells nodes apart by a hash of the host name (and, in later releases, the boot ID); ranks whose hashes "
        "match are joined by CUDA IPC and /dev/shm, which cannot cross machines. Give every machine its own "
        "hostname (`hostname` on each; hostnamectl set-hostname; a container's --hostname), or set NCCL_HOSTID "
        "apart on each machine. Where the two addresses are containers of one machine, share their IPC namespace "
        "(--ipc=host) so CUDA IPC and /dev/shm reach across them.",
    ),
    _e(
        "TD092",
        "net-peer-gone",
        "error",
        "A NET plugin's provider reported that the other end of a connection went away or never answered (libfabric "
        "EFA: the remote queue pair is gone, the receiver stopped answering, the remote is unreachable)",
        "This rank saw its peer go; the cause is on the peer or between the two. Read the peer host's log first (the "
        "host id the line names): a process killed for memory (`dmesg -T | grep -i -e oom -e 'killed process'`, "
        "`kubectl describe pod` OOMKilled, `sacct` OUT_OF_MEMORY), a crash or an exit on its own error; then the "
        "peer instance's health; for an unreachable remote, the security group (all traffic to and from itself) "
        "and the instances' subnets.",
    ),
    _e(
        "TD047",
        "watchdog-timeout",
        "error",
        "A collective did not finish within the process group's timeout, or the watchdog thread that checks "
        "them hung (torch's watchdog and its heartbeat monitor)",
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
        "TD050",
        "ib-fallback",
        "warning",
        "InfiniBand was asked for but NCCL found no IB device and fell back to TCP sockets",
        "Name RDMA devices that exist in NCCL_IB_HCA (`ls /sys/class/infiniband`), or unset it; on a host "
        "without RDMA NICs sockets are all there is.",
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
        "TD075",
        "socket-closed-job-went-on",
        "warning",
        "A socket closed, but the job went on afterwards: not a fatal loss of a peer",
        "Nothing failed because of it; if it repeats, see which process connected and left (a port scanner, "
        "a restarted helper thread) and upgrade NCCL (2.27.3 ignores connections that close before NCCL's "
        "handshake).",
    ),
    _e(
        "TD080",
        "invalid-rank",
        "error",
        "A process asked NCCL for a rank outside the communicator (Invalid rank requested: rank R of N ranks): "
        "more processes were started than the world size the program passed",
        "Make the world size equal the processes started: torchrun's --nnodes x --nproc-per-node, mpirun's -np "
        "and Slurm's tasks must match the world_size / --world-size the script passes to init_process_group, and "
        "each RANK must be below it; a script that hard-codes the world size or the GPU list breaks when the "
        "launcher starts one process per GPU of a bigger node.",
    ),
    _e(
        "TD081",
        "ib-device-skipped",
        "warning",
        "NCCL could not open or query an RDMA device at start-up and skipped it (it goes on with the others)",
        "Nothing failed because of it: NCCL uses the devices it could open (its `NET/IB : Using` line). To "
        "silence it list the devices meant for NCCL in NCCL_IB_HCA; if the skipped device should be used, "
        "check it with `ibv_devinfo` and, in a container, that its /dev/infiniband node is passed in (the "
        "RDMA device plugin, `--device`).",
    ),
    _e(
        "TD106",
        "nvshmem-not-mlx5",
        "error",
        "NVSHMEM's IBGDA transport skipped an RDMA device that is not an NVIDIA ConnectX (mlx5) NIC: IBGDA drives "
        "only mlx5 NICs, so a run that needs it (DeepEP's low-latency kernels) has no NIC",
        "IBGDA posts its work requests from the GPU straight into an mlx5 NIC's queues; other RDMA NICs (Alibaba "
        "eRDMA, AWS EFA, Intel irdma, Broadcom bnxt_re) cannot serve it. Run the IBGDA kernels on hosts with "
        "ConnectX NICs, or use NVSHMEM's proxy transports there (NVSHMEM_IB_ENABLE_IBGDA=0 for IBRC, "
        "NVSHMEM_REMOTE_TRANSPORT=libfabric on EFA) with code that does not need IBGDA (DeepEP's normal kernels); "
        "`ibv_devinfo` names each device's driver.",
    ),
    _e(
        "TD107",
        "ib-async-fatal",
        "error",
        "The RDMA device, a completion queue or a queue pair raised a fatal asynchronous event (NCCL 2.23 and "
        "later fail the communicator on it): the NIC or its queue stopped, not a transfer's completion status",
        "The event names what stopped: `ibv_devinfo` (fw_ver) and `dmesg | grep -i mlx5` (the adapter's health "
        "syndrome) on the node the WARN names, the NIC's firmware and driver (MLNX_OFED / DOCA) from one matched "
        "release on every node, the same NCCL and network plugin on every node. NCCL_IB_RETURN_ASYNC_EVENTS=0 "
        "only stops NCCL from failing on the event; the queue is still broken.",
    ),
    _e(
        "TD108",
        "net-plugin-fell-back",
        "warning",
        "The network plugin failed at init and NCCL went on over TCP sockets: the RDMA network it was installed for "
        "carries nothing between the nodes",
        "Give the process the devices the plugin drives (EFA: `fi_info -p efa` in the same container, the EFA device "
        "plugin on Kubernetes), or, on a host without them, leave the plugin out (NCCL_NET=Socket) and expect TCP's "
        "rate; the plugin's lines above its failure (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET) name the call that "
        "failed.",
    ),
    _e(
        "TD957",
        "collnet-sharp",
        "error",
        "The SHARP network plugin (CollNet: reductions in the InfiniBand switches, nccl-rdma-sharp-plugins) "
        "failed: its libsharp_coll could not start, create the job's group or register memory",
        "NCCL_COLLNET_ENABLE=0 runs without SHARP (NCCL's own rings and trees over IB) while SHARP is fixed. "
        "For SHARP: the Aggregation Manager (sharp_am) running on the subnet manager's node and the switches "
        "SHARP-capable, the SHARP resources not all taken by other jobs, the plugin's libsharp_coll from the same "
        "HPC-X as the plugin; SHARP_COLL_LOG_LEVEL=3 prints libsharp_coll's own reason.",
    ),
)
