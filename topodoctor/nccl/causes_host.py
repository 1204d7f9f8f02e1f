"""The causes of the host classes whose message fits several (NVLS set-up, the topology XML, a local
peer's shared-memory segment, the SHM transport's cuMem host memory), most likely first, with what
tells each apart. Data; ``nccl.causes`` weighs them against a log."""

from __future__ import annotations

from topodoctor.nccl.evidence import older_than
from topodoctor.nccl.log_signs import (
    VERSIONS,
    ClassCause,
    ClassCauses,
    at_destroy,
    before_2_8,
    before_cumem_host,
    before_shm_register_summary,
    cumem_host_off,
    cumem_mixed,
    mapping_refused,
    mkstemp_names,
    ofi,
    plugin_topo,
    shm_open_names,
    user_topo,
    versions_differ,
)

HOST_CAUSES: tuple[ClassCauses, ...] = (
    ClassCauses(
        "TD053",
        (
            ClassCause(
                "the Fabric Manager was restarted (or is not ready) while the GPUs held fabric state: reset the GPUs "
                "or reboot; NCCL_NVLS_ENABLE=0 runs without NVLS until then",
                "`nvidia-smi -q | grep -A3 Fabric` (State Completed, Status Success), `systemctl status "
                "nvidia-fabricmanager`",
            ),
            ClassCause(
                "nvidia-fabricmanager and the driver are different versions, or the driver lacks multicast for this "
                "NCCL",
                "`nvidia-smi` against `nv-fabricmanager --version`",
            ),
            ClassCause(
                "another component released NCCL's multicast memory first (an external memory plugin, the program "
                "at teardown), so NCCL's own release fails",
                "whether it comes at the communicator's destroy (`commReclaim` lines) after the work completed",
                first=at_destroy,
            ),
        ),
        "`nvidia-smi -q | grep -A3 Fabric`, the Fabric Manager's log, whether the failure is at init or at destroy",
    ),
    ClassCauses(
        "TD069",
        (
            ClassCause(
                "the network plugin's own static topology file (aws-ofi-nccl before 1.11 ships one per instance type "
                "that lacks CPU attributes or GPUs the job leaves out): upgrade aws-ofi-nccl",
                "the `NET/OFI ... Setting NCCL_TOPO_FILE` line of NCCL_DEBUG=INFO",
                plugin_topo,
                first=ofi,
            ),
            ClassCause(
                "a file set by NCCL_TOPO_FILE (an image's or a hand-written one) missing what NCCL needs: regenerate "
                "it on the host with NCCL_TOPO_DUMP_FILE, or unset NCCL_TOPO_FILE",
                "`echo $NCCL_TOPO_FILE`, /etc/nccl.conf, the file itself",
                user_topo,
            ),
            ClassCause(
                "NCCL before 2.8 failed on an injected topology whose CPUs the job did not use: upgrade NCCL to 2.8 "
                "or later",
                "the NCCL version banner",
                before_2_8,
                ruled_out=lambda evs, ctx: older_than(ctx, (2, 8, 0)) is False,
            ),
        ),
        "NCCL_DEBUG=INFO (the NCCL_TOPO_FILE line: which file, set by whom) and the NCCL and plugin versions",
        lambda evs: bool(evs[0].fields.get("attr")),
    ),
    ClassCauses(
        "TD043",
        (
            ClassCause(
                "/dev/shm too small or full where the ranks run: a container's default is 64 MB (docker: "
                "--shm-size=1g or --ipc=host), a Kubernetes pod needs an emptyDir with medium: Memory on /dev/shm "
                "(its sizeLimit and the pod's memory limit both count the segments)",
                "`df -h /dev/shm` in the ranks' container while the job starts",
                first=lambda evs, ctx: not mapping_refused(evs, ctx),
            ),
            ClassCause(
                "a segment of the same name left by an earlier job (NCCL before 2.12 names its segments by host and "
                "ranks, and shm_open refuses another user's), or a /dev/shm this user may not write",
                "`ls -l /dev/shm/nccl-shm-*` (a file of no running job, another owner), `ls -ld /dev/shm` (drwxrwxrwt)",
                ruled_out=mkstemp_names,
            ),
            ClassCause(
                "segments left by jobs that died before removing them take the room, or /dev/shm is not writable by "
                "this user (mkstemp failed: NCCL's 'failed to extend' line just before this one)",
                "`ls -l /dev/shm/nccl-*` (files of no running job), `ls -ld /dev/shm` (drwxrwxrwt)",
                ruled_out=shm_open_names,
            ),
            ClassCause(
                "the process's memory limits refused the mapping (mmap: `ulimit -v`, vm.overcommit_memory, a cgroup "
                "memory limit)",
                "the errno of the line before (Cannot allocate memory), `ulimit -a` in the job",
                first=mapping_refused,
            ),
            ClassCause(
                "the CUDA driver refused to pin the segment (cudaHostRegister; from 2.16 the summary follows its "
                "`Cuda failure` line): TD056",
                "a `Cuda failure` WARN of shmutils.cc just before this line (NCCL_DEBUG=WARN)",
                ruled_out=before_shm_register_summary,
            ),
            ClassCause(
                "cuMem host memory, which keeps the SHM transport's buffers out of /dev/shm, is off on this rank: "
                "NCCL 2.23 uses it only with NCCL_CUMEM_HOST_ENABLE=1, 2.24+ by itself from a CUDA 12.6 driver unless "
                "NCCL_CUMEM_HOST_ENABLE=0 or NCCL_CUMEM_ENABLE=0 is set",
                "NCCL_DEBUG=INFO: 'cuMem host allocations do not appear to be working', the NCCL_CUMEM_* variables "
                "set, the driver's CUDA version (`nvidia-smi`)",
                ruled_out=before_cumem_host,
            ),
        ),
        "`df -h /dev/shm` and `ls -l /dev/shm` in the ranks' container, and NCCL_DEBUG=WARN: the line before the "
        "summary names the call that failed and its errno",
        lambda evs: evs[0].kind == "shm-create",
    ),
    ClassCauses(
        "TD074",
        (
            ClassCause(
                "the local ranks do not share /dev/shm (a container per rank without --ipc=host, a pod without a "
                "shared emptyDir)",
                "`ls /dev/shm` in each rank's container while the job runs",
            ),
            ClassCause(
                "systemd-logind's RemoveIPC=yes deleted the segments of a user that logged out",
                "RemoveIPC in /etc/systemd/logind.conf",
            ),
            ClassCause(
                "the local ranks run different NCCL versions, or a release with a regression here (one report was "
                "fixed by going back to 2.21.5)",
                "every local rank's NCCL version banner",
                versions_differ,
            ),
            ClassCause("the peer's process exited first and removed its segments", "the peer's log: its last lines"),
        ),
        "every local rank's NCCL version banner, where each rank runs (container, pod), `df -h /dev/shm`",
    ),
    ClassCauses(
        "TD087",
        (
            ClassCause(
                "cuMem host memory works on some local ranks and not others (NUMA hidden in the container): a rank "
                "that fell back to /dev/shm reads a peer's cuMem descriptor as a segment name; "
                "NCCL_CUMEM_HOST_ENABLE=0 in every rank, or give the container the host's NUMA view and IPC "
                "(--ipc=host)",
                "NCCL_DEBUG=INFO: 'CUMEM imported' beside 'MMAP imported' lines, or 'cuMem host allocations do not "
                "appear to be working'",
                cumem_mixed,
                ruled_out=cumem_host_off,
            ),
            VERSIONS,
        ),
        "NCCL_DEBUG=INFO from every local rank, `numactl -H` in the container",
        lambda evs: not (evs[0].fields.get("msg") or evs[0].fields.get("num")),
    ),
)
