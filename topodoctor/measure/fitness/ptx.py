"""The SM kernels of the fitness tests, as PTX text the driver compiles at load time.

Why PTX: a CUDA toolkit is rarely installed on a compute node, but libcuda's JIT (the driver's
``libnvidia-ptxjitcompiler``) is, so ``cuModuleLoadData`` turns this text into machine code for
whatever GPU is present (Volta and later: ``.target sm_70``). Standard library only.

Two kernels:

``td_copy(dst, src, n16, loops)``: every thread copies the 16-byte units ``t, t + T, t + 2T...``
(T threads in the grid), ``UNROLL`` loads in flight before their stores, ``loops`` times over.
That is the access pattern of nvbandwidth's ``stridingMemcpyKernel`` (12 loads in flight):
each warp touches consecutive 512 bytes, and enough loads are outstanding to cover the
latency of HBM, NVLink or PCIe. The pointers may be local, a peer's or mapped host memory.

``td_chase(start, steps, out)``: one thread follows ``steps`` pointers from ``start`` and stores
where it ended; each load depends on the last, so the time per step is the latency of one
read. The ending address proves the chain was walked (the data check of the latency test).
"""

from __future__ import annotations

UNROLL = 4  # loads in flight per thread: the best of 4, 8, 12 and 16 on H200 (docs/benchmarks.md)
COPY = "td_copy"
CHASE = "td_chase"


def _copy_kernel(unroll: int) -> str:
    v = [f"{{%v{4 * k}, %v{4 * k + 1}, %v{4 * k + 2}, %v{4 * k + 3}}}" for k in range(unroll)]
    loads, stores = [], []
    for k in range(unroll):
        step = "" if k == unroll - 1 else "\n\tadd.u64 %rd11, %rd11, %rd6;"
        loads.append(f"\tld.global.v4.u32 {v[k]}, [%rd11];{step}")
        step = "" if k == unroll - 1 else "\n\tadd.u64 %rd12, %rd12, %rd6;"
        stores.append(f"\tst.global.v4.u32 [%rd12], {v[k]};{step}")
    body = "\n".join(loads + stores)
    return f"""
.visible .entry {COPY}(.param .u64 p_dst, .param .u64 p_src, .param .u64 p_n, .param .u32 p_loops)
{{
\t.reg .pred %p<3>;
\t.reg .b32 %r<9>;
\t.reg .b32 %v<{4 * unroll}>;
\t.reg .b64 %rd<16>;
\tld.param.u64 %rd1, [p_dst];
\tld.param.u64 %rd2, [p_src];
\tld.param.u64 %rd3, [p_n];
\tld.param.u32 %r6, [p_loops];
\tmov.u32 %r1, %ctaid.x;
\tmov.u32 %r2, %ntid.x;
\tmov.u32 %r3, %tid.x;
\tmov.u32 %r4, %nctaid.x;
\tmad.lo.u32 %r5, %r1, %r2, %r3;
\tmul.lo.u32 %r7, %r4, %r2;
\tcvt.u64.u32 %rd4, %r5;
\tcvt.u64.u32 %rd5, %r7;
\tshl.b64 %rd6, %rd5, 4;
\tmul.lo.u64 %rd7, %rd5, {unroll - 1};
\tmul.lo.u64 %rd13, %rd5, {unroll};
LOOPS:
\tsetp.eq.u32 %p1, %r6, 0;
\t@%p1 bra DONE;
\tsub.u32 %r6, %r6, 1;
\tmov.u64 %rd8, %rd4;
BIG:
\tadd.u64 %rd9, %rd8, %rd7;
\tsetp.ge.u64 %p2, %rd9, %rd3;
\t@%p2 bra SMALL;
\tshl.b64 %rd10, %rd8, 4;
\tadd.u64 %rd11, %rd2, %rd10;
\tadd.u64 %rd12, %rd1, %rd10;
{body}
\tadd.u64 %rd8, %rd8, %rd13;
\tbra BIG;
SMALL:
\tsetp.ge.u64 %p2, %rd8, %rd3;
\t@%p2 bra LOOPS;
\tshl.b64 %rd10, %rd8, 4;
\tadd.u64 %rd11, %rd2, %rd10;
\tadd.u64 %rd12, %rd1, %rd10;
\tld.global.v4.u32 {v[0]}, [%rd11];
\tst.global.v4.u32 [%rd12], {v[0]};
\tadd.u64 %rd8, %rd8, %rd5;
\tbra SMALL;
DONE:
\tret;
}}
"""


_CHASE = f"""
.visible .entry {CHASE}(.param .u64 p_start, .param .u32 p_steps, .param .u64 p_out)
{{
\t.reg .pred %p<2>;
\t.reg .b32 %r<2>;
\t.reg .b64 %rd<3>;
\tld.param.u64 %rd1, [p_start];
\tld.param.u32 %r1, [p_steps];
\tld.param.u64 %rd2, [p_out];
STEP:
\tsetp.eq.u32 %p1, %r1, 0;
\t@%p1 bra END;
\tld.global.u64 %rd1, [%rd1];
\tsub.u32 %r1, %r1, 1;
\tbra STEP;
END:
\tst.global.u64 [%rd2], %rd1;
\tret;
}}
"""


def module(unroll: int = UNROLL) -> bytes:
    """The PTX module holding both kernels, NUL-terminated as cuModuleLoadData wants it."""
    if not 1 <= unroll <= 32:
        raise ValueError(f"unroll must be 1-32, got {unroll}")
    text = ".version 7.0\n.target sm_70\n.address_size 64\n" + _copy_kernel(unroll) + _CHASE
    return text.encode() + b"\0"
