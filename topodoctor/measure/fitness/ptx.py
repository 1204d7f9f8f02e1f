"""The SM kernels of the fitness tests, as PTX text the driver compiles at load time.

Why PTX: a CUDA toolkit is rarely installed on a compute node, but libcuda's JIT (the driver's
``libnvidia-ptxjitcompiler``) is, so ``cuModuleLoadData`` turns this text into machine code for
whatever GPU is present. Standard library only.

Two modules. The base module (``module``), PTX 7.0 for Volta and later:

``td_copy(dst, src, n16, loops)``: the copy kernel of SM copies between GPUs and with the host,
nvbandwidth's access pattern (``copy_kernels.STRIDE``): the pointers may be local, a peer's or
mapped host memory.

``td_chase(start, steps, out, target)``: launched with one single-thread block per SM; only block
``target`` walks, following ``steps`` pointers from ``start``, and stores where it ended at
``out[target]``. Each load depends on the last, so the time per step is the latency of one read;
the ending address proves the chain was walked (the latency test's data check).

The HBM module (``hbm_module``): ``td_hbm``, the copy kernel the HBM test runs
(``copy_kernels.DEFAULT`` or one the task names), alone so that a kernel needing a newer GPU or
driver never keeps the others from loading.
"""

from __future__ import annotations

from topodoctor.measure.fitness import copy_kernels, copy_ptx
from topodoctor.measure.fitness.copy_kernels import CopyKernel

COPY = "td_copy"
CHASE = "td_chase"
HBM = "td_hbm"

_CHASE = f"""
.visible .entry {CHASE}(.param .u64 p_start, .param .u32 p_steps, .param .u64 p_out, .param .u32 p_target)
{{
\t.reg .pred %p<2>;
\t.reg .b32 %steps, %target, %cta;
\t.reg .b64 %node, %out, %slot;
\tld.param.u64 %node, [p_start];
\tld.param.u32 %steps, [p_steps];
\tld.param.u64 %out, [p_out];
\tld.param.u32 %target, [p_target];
\tmov.u32 %cta, %ctaid.x;
\tsetp.ne.u32 %p1, %cta, %target;
\t@%p1 bra END;
STEP:
\tsetp.eq.u32 %p1, %steps, 0;
\t@%p1 bra STORE;
\tld.global.u64 %node, [%node];
\tsub.u32 %steps, %steps, 1;
\tbra STEP;
STORE:
\tmul.wide.u32 %slot, %target, 8;
\tadd.u64 %out, %out, %slot;
\tst.global.u64 [%out], %node;
END:
\tret;
}}
"""


def module(copy: CopyKernel = copy_kernels.STRIDE) -> bytes:
    """The base module (``td_copy`` with ``copy``'s shape, ``td_chase``), NUL-terminated as
    cuModuleLoadData wants it."""
    if copy.style == "bulk" or copy.needs[1] > copy_kernels.BASE_SM:
        raise ValueError(f"{copy.name} needs a newer GPU than the base module targets")
    text = copy_ptx.header([copy]) + copy_ptx.entry(copy, COPY) + _CHASE
    return text.encode() + b"\0"


def hbm_module(kernel: CopyKernel) -> bytes:
    """The module holding ``td_hbm`` with ``kernel``'s shape."""
    return (copy_ptx.header([kernel]) + copy_ptx.entry(kernel, HBM)).encode() + b"\0"
