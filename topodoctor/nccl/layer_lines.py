"""The words of the layers between a job and NCCL that fail in their own format: a library interposed on CUDA's
driver calls (HAMi-core's vGPU layer), UCX's shared-memory transport, a framework's own check of the GPUs before
NCCL runs (accelerate). Rows of ``nccl.launcher_lines``' table; data only."""

from __future__ import annotations

import re

from topodoctor.nccl.line_shape import LauncherLine

# a library that interposes on CUDA's driver calls inside the container (HAMi-core's libvgpu.so, put in every
# process by /etc/ld.so.preload or LD_PRELOAD to split a GPU between pods): its own error line, and a frame of its
# hooks in a crash's stack (the hooked driver call that failed)
_INTERPOSER = (
    LauncherLine(
        "cuda-interposer",
        re.compile(r"\[HAMI-core ERROR \([^)]*\)\]:\s*(?P<said>.*)"),
        "HAMi-core, the vGPU layer that interposes on CUDA's driver calls in the container, failed a call",
    ),
    LauncherLine(
        "cuda-interposer",
        re.compile(r"/libvgpu/src/[\w/]+\.c\S*,? line \d+, in (?P<call>cu\w+)"),
        "a frame of HAMi-core's hook of a CUDA driver call in the stack of the failure",
    ),
)
# UCX (under MPI, UCC or a framework's own transport) fails to map its shared-memory receive queue: /dev/shm full
_UCX = (
    LauncherLine(
        "shm-full",
        re.compile(r"mm_iface(?:\.c:\d+\s+\S+)?\s*(?P<err>failed to allocate receive FIFO)"),
        "UCX's shared-memory transport (mm: posix or sysv segments in /dev/shm) could not allocate its receive FIFO",
    ),
)
# Hugging Face accelerate's own check (accelerate/state.py): RTX 40xx GPUs refused unless P2P and IB are off
_FRAMEWORK_P2P = (
    LauncherLine(
        "framework-p2p",
        re.compile(r"(?P<said>Using RTX 4000 series doesn't support faster communication broadband via P2P or IB)"),
        "accelerate refuses to start on RTX 40xx GPUs with NCCL's P2P and IB transports on",
    ),
)
LAYERS: tuple[LauncherLine, ...] = _INTERPOSER + _UCX + _FRAMEWORK_P2P
LAYER_WORDS = r"HAMI-core ERROR|/libvgpu/|mm_iface|RTX 4000 series"  # one of them is in every line LAYERS reads
