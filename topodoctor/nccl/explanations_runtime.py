"""The failure classes of `nccl-log` read from NCCL's version and the programs around it: known
bugs of an NCCL release, the NET plugins (aws-ofi-nccl), the NCCL library the process loaded,
the socket subnet NCCL_COMM_ID needs, the SHM transport's cuMem host memory, the arguments NCCL's
own checks reject, and the variables a log shows that its NCCL does not read. Data only;
``explanations`` gathers every class."""

from __future__ import annotations

from topodoctor.nccl.explanation import explained as _e

RUNTIME_CLASSES = (
    _e(
        "TD083",
        "known-bug",
        "error",
        "A known bug of the NCCL version in use: its release notes or its maintainers' answer name this message "
        "under this version, fixed in a later release",
        "Upgrade NCCL to the release the finding names (torch ships its own: a newer torch, or the "
        "nvidia-nccl-cu* wheel it depends on; `python -c 'import torch; print(torch.cuda.nccl.version())'` "
        "shows the one torch loads); "
        "the finding gives the workaround where the thread found one.",
    ),
    _e(
        "TD084",
        "ofi-plugin",
        "error",
        "The aws-ofi-nccl network plugin (NET/OFI, libfabric: EFA and other providers) failed",
        "fi_getinfo failed: libfabric found no provider for the request: the EFA device is not in the "
        "container (`fi_info -p efa`, the EFA device plugin, /dev/infiniband/uverbs*), or FI_PROVIDER names an "
        "absent one. Unable to register memory: the locked-memory limit (`ulimit -l unlimited`) or GPUDirect "
        "RDMA (the efa driver's p2p support, `cat /sys/module/efa/parameters/*`, FI_EFA_USE_DEVICE_RDMA); keep "
        "aws-ofi-nccl, libfabric and NCCL at versions released together.",
    ),
    _e(
        "TD099",
        "net-plugin-unloadable",
        "error",
        "NCCL found a network plugin but could not load it, so it runs on its internal network instead",
        "The dynamic linker's words name why: a library the plugin needs not on LD_LIBRARY_PATH, a version of it "
        "older than the plugin was built against, an undefined symbol (a plugin built for another NCCL); "
        "`ldd` on the plugin shows each 'not found'. Install what it needs, or NCCL_NET_PLUGIN=none where "
        "NCCL's own network is meant.",
    ),
    _e(
        "TD085",
        "nccl-library",
        "error",
        "The NCCL library the process loaded is not the one the program was built for (an undefined nccl* "
        "symbol, or no libnccl at all)",
        "A libnccl older than the program needs is found first: LD_LIBRARY_PATH or LD_PRELOAD pointing at a "
        "system or conda libnccl, or two NCCL wheels installed (`pip list | grep nccl`); let torch load the "
        "nvidia-nccl-cu* wheel it depends on (unset LD_LIBRARY_PATH entries for NCCL, uninstall the extra copy), "
        "or install an NCCL at least as new as the one torch was built with (`torch.cuda.nccl.version()`).",
    ),
    _e(
        "TD086",
        "no-interface-in-subnet",
        "error",
        "NCCL_COMM_ID (or a bootstrap address) names an address no interface of this host shares a subnet with",
        "NCCL_COMM_ID must be an address of the root rank's host reachable from every node, and each node needs "
        "an interface on that subnet: in a container use the host's network (--net=host, hostNetwork: true) or "
        "an address of the pod network; set NCCL_SOCKET_IFNAME to the interface of that subnet, or unset "
        "NCCL_COMM_ID and let the launcher pass the unique id.",
    ),
    _e(
        "TD087",
        "cumem-host-memory",
        "error",
        "The SHM transport's host memory failed: NCCL 2.23 and later allocate it with cuMem (host NUMA "
        "memory shared between local ranks), which this host, driver or container does not allow",
        "NCCL_CUMEM_HOST_ENABLE=0 in every rank goes back to /dev/shm segments and confirms it; give the "
        "container the host's NUMA view and IPC (--ipc=host, no restrictive seccomp on the memory calls); use one "
        "NCCL version on every rank (a segment of size 0 or a name of garbage is a peer that speaks the other "
        "format); NCCL_SHM_DISABLE=1 avoids SHM at a cost in speed.",
    ),
    _e(
        "TD088",
        "variable-not-read",
        "warning",
        "A variable the log shows set (NCCL's `set by environment to` line, or a command line or export in the log) "
        "is not one the log's NCCL version reads: removed or renamed, read only by other releases, or no NCCL "
        "variable at all",
        "Use the variable the log's NCCL reads for the same purpose (the finding names the releases that read it, "
        "or the closest real name of a typo), upgrade NCCL to a release that reads it, or drop it: NCCL ignores "
        "names it does not read, silently. `topodoctor check` lints the host's environment the same way against "
        "the NCCL installed there.",
    ),
    _e(
        "TD089",
        "invalid-argument",
        "error",
        "NCCL rejected an argument of a call before running it (misc/argcheck.cc, ncclInvalidArgument): a root "
        "or peer outside the communicator, a buffer NCCL cannot use, or a datatype or reduction it does not know",
        "The finding names the call and the argument. A root or send/receive peer must be a rank of this "
        "communicator, 0 .. nranks-1 (NCCL prints the range up to nranks): a global rank passed to a smaller "
        "communicator is the usual mistake, and a range of 0..0 (nranks 0) is a communicator not initialised, "
        "or already destroyed, when the call was made. A buffer must be device memory of the communicator's GPU "
        "(torch.cuda.set_device before creating tensors). An unknown datatype or reduction is a program built "
        "against a newer nccl.h than the libnccl it loaded, or a user reduction of another communicator.",
    ),
    _e(
        "TD090",
        "process-killed",
        "error",
        "A rank's process was killed (SIGKILL, a launcher's return code -9, a Ray actor whose worker died) or "
        "the job's memory limit killed it: the signal is in the log, who sent it only where the log says so",
        "The kernel's or the job's OOM killer is the usual sender: `dmesg -T | grep -i -e oom -e killed` (or "
        "`journalctl -k`) on the rank's host at that time, the job's memory use (`sacct -j JOB -o "
        "State,ExitCode,MaxRSS,ReqMem,Timelimit,Elapsed`, `kubectl describe pod` Last State), then the "
        "scheduler's limits and who else could kill it (`ray stop --force`, a health check, a user). Less host "
        "memory per rank: fewer dataloader workers, load the checkpoint on one rank or memory-mapped, no CPU "
        "offload of optimizer states.",
    ),
    _e(
        "TD091",
        "store-port-in-use",
        "error",
        "torch's c10d store could not listen on MASTER_PORT: another process on this host holds the port "
        "(errno 98, EADDRINUSE)",
        "`ss -ltnp 'sport = :PORT'` (or `lsof -i :PORT`) on MASTER_ADDR's host names the holder: another job, a "
        "leftover process of an earlier run, or the program starting a second store on its default port (29500). "
        "Give each job its own MASTER_PORT (torchrun --master-port, --rdzv-endpoint=localhost:0 or --standalone "
        "for one node picks a free one); end the leftover process. A port the framework picked by probing a free one "
        "and releasing it (a serving engine's internal stores) can be taken by an outgoing connection from the "
        "kernel's ephemeral range (net.ipv4.ip_local_port_range) before the store binds it: keep such ports outside "
        "that range, or reserve them (net.ipv4.ip_local_reserved_ports).",
    ),
    _e(
        "TD109",
        "tests-separate-runs",
        "error",
        "nccl-tests' processes each ran a test of one rank alone (every one prints itself as rank 0): the launch "
        "never joined them into one job",
        "nccl-tests joins its processes through MPI only when built with it: `make MPI=1 MPI_HOME=/path/to/mpi` (and "
        "NCCL_HOME), then launch with mpirun, or srun with the MPI plugin the MPI library was built for "
        "(`srun --mpi=pmix`, `--mpi=pmi2`; `srun --mpi=list` names them); inside enroot / pyxis containers the MPI "
        "library and its PMI must be in the image. One header listing every rank, then one result, is a joined run.",
    ),
    _e(
        "TD096",
        "torch-backend-usage",
        "error",
        "torch's NCCL backend refused the program's call before NCCL ran it: a CPU or sparse tensor (\"Tensors "
        'must be CUDA and dense", "No backend type associated with device type cpu"), tensors on several '
        "devices in one call, a non-contiguous tensor, or no GPU visible to the process",
        "The program's own call: put the tensor on the rank's GPU before the collective (`t.cuda()` or "
        "`device=torch.device('cuda', local_rank)`; a scalar such as an optimizer's `step` or a metric made on the "
        "CPU is the usual one), `.contiguous()` a view; for CPU tensors create a Gloo group "
        "(`dist.new_group(backend='gloo')`) or init with `backend='cpu:gloo,cuda:nccl'`; with no GPU visible "
        "check CUDA_VISIBLE_DEVICES and `nvidia-smi` in the rank's environment, or use the gloo backend.",
    ),
    _e(
        "TD097",
        "cuda-driver-mismatch",
        "error",
        "CUDA could not start: the CUDA driver library the process loaded (libcuda.so) does not fit the kernel "
        "driver or the GPU (CUDA 803 'system has unsupported display driver / cuda driver combination', 804 "
        "'forward compatibility was attempted on non supported HW')",
        "Compare the libcuda the process loads with the kernel driver: `cat /proc/driver/nvidia/version` (the "
        "kernel module) against `ldconfig -p | grep libcuda` and `ls -l /usr/local/cuda/compat/` in the container. "
        "A container's forward-compatibility package (cuda-compat, /usr/local/cuda/compat on LD_LIBRARY_PATH) must "
        "match a driver branch the host supports: update it with the image (a base image whose cuda-compat fits "
        "the hosts' driver), or drop it from the library path where the host driver is already new enough. A host "
        "whose driver was upgraded without a reboot loads the new libcuda over the old module: reboot (or reload "
        "the nvidia modules). Forward compatibility works only on data-center GPUs.",
    ),
    _e(
        "TD098",
        "process-crashed",
        "error",
        "A process of the run crashed or aborted in native code (glibc's heap check, SIGSEGV, SIGABRT) with no "
        "NCCL error before it: the signal is in the log, the code that caused it is not",
        "Collect what names the code: a core file's backtrace (`ulimit -c unlimited`, then `gdb -batch -ex bt "
        "python core` or `coredumpctl debug`), the NCCL version in use (NCCL_DEBUG=INFO prints its banner and the "
        "GPUs; `python -c 'import torch; print(torch.cuda.nccl.version())'`), which libnccl the process mapped "
        "(`grep nccl /proc/PID/maps`), and whether the same run at fewer ranks or nodes passes.",
    ),
    _e(
        "TD958",
        "cuda-interposer-failed",
        "error",
        "A library that interposes on CUDA's driver calls in the container (HAMi-core's libvgpu.so, the vGPU layer "
        "that splits a GPU between pods) failed inside a call NCCL or the program made: the fault is the layer's, "
        "not NCCL's",
        "Run the job once without the layer: CUDA_DISABLE_CONTROL=true in the container's environment keeps "
        "HAMi-core out of it (no memory or core limit then; on a shared GPU only for the test), or a whole GPU "
        "without the vGPU resource. A run that passes so is the layer's: upgrade HAMi (its device plugin and "
        "libvgpu.so) to a release that handles the call. Where the hooked call is NCCL's probe of cuMem host "
        "memory at init (cuMemCreate under ncclCuMemHostEnable), NCCL_CUMEM_HOST_ENABLE=0 skips that probe, and "
        "NCCL_CUMEM_ENABLE=0 keeps NCCL off cuMem altogether.",
    ),
    _e(
        "TD959",
        "run-stalled",
        "error",
        "The post says the run hangs and its log shows no failure line: the log does not say why a collective "
        "never completed",
        "Run it again with NCCL_DEBUG=INFO and, while it hangs, see where each rank waits (`py-spy dump --pid PID`, "
        "torch's flight recorder with TORCH_NCCL_TRACE_BUFFER_SIZE); the same run with NCCL_P2P_DISABLE=1 tells "
        "PCIe peer-to-peer (ACS, the IOMMU) from the rest.",
    ),
    _e(
        "TD960",
        "tests-stopped-after-init",
        "warning",
        "nccl-tests' output stops after NCCL's init with no result row and no error: a first collective that never "
        "completed, or a paste cut there (a warning: the text cannot tell them apart)",
        "Say whether the test hung there or the paste stops: a test that hangs after init is a collective that never "
        "completed; the same run with NCCL_P2P_DISABLE=1 tells PCIe peer-to-peer (ACS, the IOMMU) from the rest, "
        "and NCCL_DEBUG=INFO shows the transports each channel uses.",
    ),
    _e(
        "TD094",
        "process-bus-error",
        "error",
        "A process of the run died of SIGBUS (a Bus error, a launcher's return code -7): it touched memory mapped "
        "from a file that had no page to give, most often shared memory past what /dev/shm holds",
        "`df -h /dev/shm` where the rank ran, while the job starts: in a container give /dev/shm room "
        "(`docker run --shm-size=1g` or `--ipc=host`, a Kubernetes emptyDir with medium: Memory on /dev/shm); "
        "NCCL_SHM_DISABLE=1 (NCCL's segments) or a DataLoader with num_workers=0 (its workers' shared memory) "
        "confirms which; NCCL 2.19 and later report a full /dev/shm as an error instead of the signal.",
    ),
    _e(
        "TD093",
        "mnnvl-imex",
        "error",
        "Multi-node NVLink (MNNVL: a GB200 / GB300 NVL rack) is present, but its fabric memory does not work: the "
        "IMEX daemon or its channels are not set up where the process runs",
        "Every node of the NVLink domain needs the nvidia-imex service running with the same node list "
        "(`nvidia-imex-ctl -N` shows the domain's nodes READY), and the process an IMEX channel: "
        "/dev/nvidia-caps-imex-channels/channel0 on the host (created by the driver or `mknod`), and in a "
        "container passed in (the GPU operator's ComputeDomain, `--device`). NCCL_MNNVL_ENABLE=0 runs without "
        "multi-node NVLink (over the network) until then.",
    ),
    _e(
        "TD095",
        "invalid-usage",
        "error",
        "The program called NCCL against its API's rules, in NCCL's own words: a group call, a config or info "
        "struct, a communicator, a reduction operator, a device or a datatype used as NCCL does not allow",
        "The rule is in NCCL's message: find the call in the program (or the framework release that makes it) "
        "and keep the rule: ncclGroupStart before ncclGroupEnd, structs set from their NCCL_*_INITIALIZER, one "
        "operation at a time on a nonblocking communicator until it returns ncclSuccess, a send to self paired "
        "with a receive in the same group; a framework's own call is fixed by upgrading it.",
    ),
)
