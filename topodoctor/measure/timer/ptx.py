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

The check module (``same_module``): ``td_same(a, b, n16, flag)`` compares ``n16`` 16-byte units
of two buffers on one GPU and stores 1 at ``flag`` where any differs: a copy's data checked where
it lies, at the memory's speed, instead of read back over PCIe and compared by the CPU.
"""

from __future__ import annotations

from topodoctor.measure.timer import copy_kernels, copy_ptx
from topodoctor.measure.timer.copy_kernels import CopyKernel

COPY = "td_copy"
CHASE = "td_chase"
HBM = "td_hbm"
SAME = "td_same"

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

_LANES = "".join(f"\tsetp.ne.u32 %p2, %a{k}, %b{k};\n\t@%p2 bra DIFF;\n" for k in range(4))
# A grid-stride walk over 16-byte units; a thread that finds a difference flags it and stops (the
# flag only ever goes from 0 to 1, so racing stores agree).
_SAME = f"""
.visible .entry {SAME}(.param .u64 p_a, .param .u64 p_b, .param .u64 p_n, .param .u64 p_flag)
{{
\t.reg .pred %p<3>;
\t.reg .b32 %cta, %nthr, %thr, %ncta, %one, %a<4>, %b<4>;
\t.reg .b64 %pa, %pb, %n, %flag, %i, %stride, %off, %at_a, %at_b, %t;
\tld.param.u64 %pa, [p_a];
\tld.param.u64 %pb, [p_b];
\tld.param.u64 %n, [p_n];
\tld.param.u64 %flag, [p_flag];
\tmov.u32 %one, 1;
\tmov.u32 %cta, %ctaid.x;
\tmov.u32 %nthr, %ntid.x;
\tmov.u32 %thr, %tid.x;
\tmov.u32 %ncta, %nctaid.x;
\tmul.wide.u32 %i, %cta, %nthr;
\tcvt.u64.u32 %t, %thr;
\tadd.u64 %i, %i, %t;
\tmul.wide.u32 %stride, %ncta, %nthr;
NEXT:
\tsetp.ge.u64 %p1, %i, %n;
\t@%p1 bra END;
\tshl.b64 %off, %i, 4;
\tadd.u64 %at_a, %pa, %off;
\tadd.u64 %at_b, %pb, %off;
\tld.global.v4.u32 {{%a0, %a1, %a2, %a3}}, [%at_a];
\tld.global.v4.u32 {{%b0, %b1, %b2, %b3}}, [%at_b];
{_LANES}\tadd.u64 %i, %i, %stride;
\tbra NEXT;
DIFF:
\tst.global.u32 [%flag], %one;
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


def same_module() -> bytes:
    """The module holding ``td_same`` (PTX 7.0 for Volta and later)."""
    return (copy_ptx.header([copy_kernels.PORTABLE]) + _SAME).encode() + b"\0"
