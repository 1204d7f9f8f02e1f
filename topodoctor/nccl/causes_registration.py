"""The causes of a memory registration for RDMA that failed with 'Cannot allocate memory' (verbs' ibv_reg_mr and its
kin, libfabric's EFA provider's -12): the kernel refuses to pin the pages, which the job's locked-memory limit makes
it do most often, and a kernel or RDMA driver that fails the registration (a regression after a kernel upgrade, the
GPU memory path of nvidia-peermem or DMA-BUF) where the limit is already unlimited; and those of a registration the NIC
refused with an errno that names no limit. Data; ``nccl.causes`` weighs the first, the verbs finding lists the
second."""

from __future__ import annotations

from topodoctor.nccl.log_signs import ClassCause, ClassCauses

REGISTRATION_CAUSES = (
    ClassCauses(
        "TD061",
        (
            ClassCause(
                "the job's locked-memory limit is too low to pin the buffers: raise memlock to unlimited where the "
                "ranks run (`ulimit -l unlimited`, /etc/security/limits.conf, `docker run --ulimit memlock=-1`, "
                "Slurm's PropagateResourceLimits, systemd's LimitMEMLOCK)",
                "`ulimit -l` inside the job (`mpirun ... sh -c 'ulimit -l'`, `srun sh -c 'ulimit -l'`): unlimited "
                "rules it out",
            ),
            ClassCause(
                "the kernel or its RDMA and peer-memory drivers fail the registration although the limit allows it: "
                "a regression of a new kernel (boot the previous one), nvidia-peermem or DMA-BUF registration of "
                "GPU memory (NCCL_DMABUF_ENABLE=0 or 1 tells which path)",
                "`uname -r` against the last kernel that worked, `dmesg` at the failure, the same run after booting "
                "the previous kernel",
            ),
            ClassCause(
                "the node's memory for registrations used up: many ranks, communicators or large buffers pinned at "
                "once (a smaller NCCL_BUFFSIZE, fewer communicators)",
                "`free -g` and the job's number of communicators; the same run at fewer ranks per node",
            ),
        ),
        "`ulimit -l` inside the job, `uname -r` and `dmesg` on the node at the failure",
    ),
)

# why a verbs call that creates a queue or its domain (ibv_create_cq, ibv_create_qp, ibv_create_srq, ibv_alloc_pd)
# fails with ENOMEM: the kernel pins the queue's buffer against the same locked-memory limit a registration counts
# against, and the adapter's own queues and contexts are finite, shared by every RDMA user of the process (NVSHMEM,
# UCX, MPI) and of the node
QUEUE_NO_MEMORY = (
    REGISTRATION_CAUSES[0].causes[0].what,
    "the adapter's queues or contexts used up by the other RDMA users of the process or the node: a library that "
    "opens its own queue pairs beside NCCL's (NVSHMEM and DeepEP, UCX, MPI), many communicators, many ranks per NIC "
    "(`ibv_devinfo -v` gives max_cq and max_qp; the same run without the other library tells it)",
    REGISTRATION_CAUSES[0].causes[2].what,
)

# why a memory registration (ibv_reg_mr, ibv_reg_mr_iova2) fails with an errno that names no limit (EINVAL, EFAULT,
# EOPNOTSUPP...): the NIC cannot map the buffer, which for NCCL is mostly GPU memory
REGISTER_REFUSED = (
    "GPU memory the NIC cannot map: GPUDirect RDMA not available (nvidia-peermem not loaded, and no DMA-BUF path: "
    "`lsmod | grep peermem`); the run with NCCL_NET_GDR_LEVEL=LOC (buffers staged through host memory) tells it",
    "the IOMMU translating the NIC's DMA (intel_iommu=on without iommu=pt, a VM's passthrough without ATS): "
    "`dmesg | grep -i -e DMAR -e iommu`, /proc/cmdline",
    "a buffer of a kind the driver and OFED pair cannot register (cuMem memory on an older stack: "
    "NCCL_CUMEM_ENABLE=0 tells it; a user buffer NCCL was asked to register)",
)
