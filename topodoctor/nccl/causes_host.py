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
    cumem_host_off,
    cumem_mixed,
    ofi,
    plugin_topo,
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
