"""The PTX text of a copy kernel (``copy_kernels.CopyKernel``). Every entry has the same
parameters, ``(dst, src, n16, loops)``: copy ``n16`` 16-byte units from ``src`` to ``dst``,
``loops`` times over, so the timer launches any of them the same way.

Registers are named for what they hold: the PTX is read when a shape misbehaves on a GPU.
"""

from __future__ import annotations

from topodoctor.measure.timer.copy_kernels import LOAD_HINTS, STORE_HINTS, CopyKernel

PARAMS = "(.param .u64 p_dst, .param .u64 p_src, .param .u64 p_n, .param .u32 p_loops)"


def header(kernels: list[CopyKernel]) -> str:
    """The module header: the newest PTX version and SM target that any of ``kernels`` needs."""
    ptx = max(k.needs[0] for k in kernels)
    sm = max(k.needs[1] for k in kernels)
    return f".version {ptx[0]}.{ptx[1]}\n.target sm_{sm}\n.address_size 64\n"


def entry(kernel: CopyKernel, name: str) -> str:
    """The ``.entry`` of ``kernel`` under ``name``."""
    if kernel.style == "bulk":
        return _bulk(kernel, name)
    return _registers(kernel, name) + (_stride(kernel) if kernel.style == "stride" else _oneshot(kernel)) + "}\n"


# --- register-path kernels (stride, oneshot)
LANES = {"u64": (".u64", "%d", 1), "v2u64": (".v2.u64", "%d", 2), "v4u32": (".v4.u32", "%v", 4),
         "v4u32x2": (".v4.u32", "%v", 4)}  # fmt: skip  # per access: type, register prefix, registers


def _slots(kernel: CopyKernel) -> list[str]:
    """The data registers of each load in flight, as a PTX operand per access."""
    _, reg, per = LANES[kernel.vec]
    width = 2 if kernel.vec == "v4u32x2" else 1
    out = []
    for k in range(kernel.unroll * width):
        regs = ", ".join(f"{reg}{per * k + j}" for j in range(per))
        out.append("{" + regs + "}" if per > 1 else regs)
    return out


def _access(kernel: CopyKernel, slot: int, src: str, dst: str) -> tuple[list[str], list[str]]:
    """Load and store of element ``slot`` (one or two accesses) at ``[src]`` / ``[dst]``."""
    vt = LANES[kernel.vec][0]
    ld = f"ld.global{LOAD_HINTS[kernel.load]}{'.L2::256B' if kernel.prefetch else ''}{vt}"
    st = f"st.global{STORE_HINTS[kernel.store]}{vt}"
    slots = _slots(kernel)
    width = 2 if kernel.vec == "v4u32x2" else 1
    loads, stores = [], []
    for half in range(width):
        off = f"+{16 * half}" if half else ""
        reg = slots[slot * width + half]
        loads.append(f"\t{ld} {reg}, [{src}{off}];")
        stores.append(f"\t{st} [{dst}{off}], {reg};")
    return loads, stores


def _burst(kernel: CopyKernel, count: int) -> str:
    """``count`` elements from ``%a_src`` / ``%a_dst``, ``%step`` bytes apart: every load, then every store."""
    loads, stores = [], []
    for k in range(count):
        ld, st = _access(kernel, k, "%a_src", "%a_dst")
        loads += ld
        stores += st
        if k < count - 1:
            loads.append("\tadd.u64 %a_src, %a_src, %step;")
            stores.append("\tadd.u64 %a_dst, %a_dst, %step;")
    return "\n".join(loads + stores) + "\n"


def _registers(kernel: CopyKernel, name: str) -> str:
    _, reg, per = LANES[kernel.vec]
    data = f"{'.b64' if reg == '%d' else '.b32'} {reg}"
    count = len(_slots(kernel)) * per
    # n counts 16-byte units: elements of 8 or 32 bytes are twice or half as many
    scale = {8: "\tshl.b64 %n, %n, 1;\n", 32: "\tshr.u64 %n, %n, 1;\n"}.get(kernel.element_bytes, "")
    return f"""
.visible .entry {name}{PARAMS}
{{
\t.reg .pred %p<3>;
\t.reg .b32 %loops, %cta, %nthr, %thr, %ncta, %left;
\t.reg {data}<{count}>;
\t.reg .b64 %dst, %src, %n, %first, %last, %i, %stride, %step, %span, %jump, %off, %a_src, %a_dst, %t;
\tld.param.u64 %dst, [p_dst];
\tld.param.u64 %src, [p_src];
\tld.param.u64 %n, [p_n];
\tld.param.u32 %loops, [p_loops];
{scale}\tmov.u32 %cta, %ctaid.x;
\tmov.u32 %nthr, %ntid.x;
\tmov.u32 %thr, %tid.x;
\tmov.u32 %ncta, %nctaid.x;
"""


def _stride(kernel: CopyKernel) -> str:
    """Grid-stride: element ``i`` then ``i + T``...; ``unroll`` at a time while a whole burst fits,
    then one at a time."""
    u, shift = kernel.unroll, kernel.element_shift
    one = _access(kernel, 0, "%a_src", "%a_dst")
    return f"""\tmul.wide.u32 %first, %cta, %nthr;
\tcvt.u64.u32 %t, %thr;
\tadd.u64 %first, %first, %t;
\tmul.wide.u32 %stride, %ncta, %nthr;
\tshl.b64 %step, %stride, {shift};
\tmul.lo.u64 %span, %stride, {u - 1};
\tmul.lo.u64 %jump, %stride, {u};
LOOPS:
\tsetp.eq.u32 %p1, %loops, 0;
\t@%p1 bra DONE;
\tsub.u32 %loops, %loops, 1;
\tmov.u64 %i, %first;
BIG:
\tadd.u64 %last, %i, %span;
\tsetp.ge.u64 %p2, %last, %n;
\t@%p2 bra SMALL;
\tshl.b64 %off, %i, {shift};
\tadd.u64 %a_src, %src, %off;
\tadd.u64 %a_dst, %dst, %off;
{_burst(kernel, u)}\tadd.u64 %i, %i, %jump;
\tbra BIG;
SMALL:
\tsetp.ge.u64 %p2, %i, %n;
\t@%p2 bra LOOPS;
\tshl.b64 %off, %i, {shift};
\tadd.u64 %a_src, %src, %off;
\tadd.u64 %a_dst, %dst, %off;
{chr(10).join(one[0] + one[1])}
\tadd.u64 %i, %i, %stride;
\tbra SMALL;
DONE:
\tret;
"""


def _oneshot(kernel: CopyKernel) -> str:
    """Block ``b`` owns elements ``b * threads * unroll`` on; thread ``t`` copies ``t, t + threads...``
    (``unroll`` of them): all at once where the block is whole, one by one in the last block."""
    u, shift = kernel.unroll, kernel.element_shift
    one = _access(kernel, 0, "%a_src", "%a_dst")
    return f"""\tmul.lo.u32 %left, %nthr, {u};
\tmul.wide.u32 %first, %cta, %left;
\tcvt.u64.u32 %t, %thr;
\tadd.u64 %first, %first, %t;
\tcvt.u64.u32 %stride, %nthr;
\tshl.b64 %step, %stride, {shift};
\tmul.lo.u64 %span, %stride, {u - 1};
\tadd.u64 %last, %first, %span;
\tshl.b64 %off, %first, {shift};
LOOPS:
\tsetp.eq.u32 %p1, %loops, 0;
\t@%p1 bra DONE;
\tsub.u32 %loops, %loops, 1;
\tadd.u64 %a_src, %src, %off;
\tadd.u64 %a_dst, %dst, %off;
\tsetp.ge.u64 %p2, %last, %n;
\t@%p2 bra TAIL;
{_burst(kernel, u)}\tbra LOOPS;
TAIL:
\tmov.u64 %i, %first;
\tmov.u32 %left, {u};
EACH:
\tsetp.ge.u64 %p2, %i, %n;
\t@%p2 bra LOOPS;
{chr(10).join(one[0] + one[1])}
\tadd.u64 %a_src, %a_src, %step;
\tadd.u64 %a_dst, %a_dst, %step;
\tadd.u64 %i, %i, %stride;
\tsub.u32 %left, %left, 1;
\tsetp.eq.u32 %p2, %left, 0;
\t@%p2 bra LOOPS;
\tbra EACH;
DONE:
\tret;
"""


# --- bulk copies (Hopper's TMA)
def _bulk(kernel: CopyKernel, name: str) -> str:
    """One thread per block walks its chunks (block ``b`` owns chunks ``b, b + blocks...``), ``stages``
    of them in flight: a chunk is loaded into shared memory (completion counted in bytes on that
    stage's mbarrier), stored back out as a bulk group, and its stage reloaded once the store has
    read it. Items run over ``loops`` passes of the block's chunks, so stages carry across passes."""
    s, c = kernel.unroll, kernel.chunk_kib << 10

    def issue(k: str) -> str:
        """Load item ``k``'s chunk into stage ``k % stages``."""
        return f"""\trem.u64 %t, {k}, {s};
\tcvt.u32.u64 %stage, %t;
\tmad.lo.u32 %bar, %stage, 8, %bars;
\tmad.lo.u32 %smem, %stage, {c}, %buf;
{chunk(k)}\tadd.u64 %a_src, %src, %off;
\tmbarrier.arrive.expect_tx.shared::cta.b64 %state, [%bar], %size;
\tcp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%smem], [%a_src], %size, [%bar];
"""

    def chunk(k: str) -> str:
        """Offset and size of item ``k``'s chunk: chunk ``b + (k % mine) * blocks``."""
        return f"""\trem.u64 %t, {k}, %mine;
\tmad.lo.u64 %t, %t, %blocks, %b;
\tmul.lo.u64 %off, %t, {c};
\tsub.u64 %t, %bytes, %off;
\tmin.u64 %t, %t, {c};
\tcvt.u32.u64 %size, %t;
"""

    inits = "".join(f"\tmbarrier.init.shared::cta.b64 [%bars+{8 * k}], 1;\n" for k in range(s))
    return f"""
.visible .entry {name}{PARAMS}
{{
\t.reg .pred %p<3>;
\t.reg .b32 %loops, %cta, %ncta, %buf, %bars, %stage, %bar, %smem, %size, %parity;
\t.reg .b64 %dst, %src, %bytes, %chunks, %b, %blocks, %mine, %items, %k, %next, %off, %a_src, %a_dst, %t, %state;
\t.shared .align 128 .b8 td_buf[{s * c}];
\t.shared .align 8 .b64 td_bar[{s}];
\tld.param.u64 %dst, [p_dst];
\tld.param.u64 %src, [p_src];
\tld.param.u64 %bytes, [p_n];
\tld.param.u32 %loops, [p_loops];
\tshl.b64 %bytes, %bytes, 4;
\tadd.u64 %chunks, %bytes, {c - 1};
\tdiv.u64 %chunks, %chunks, {c};
\tmov.u32 %cta, %ctaid.x;
\tmov.u32 %ncta, %nctaid.x;
\tcvt.u64.u32 %b, %cta;
\tcvt.u64.u32 %blocks, %ncta;
\tsetp.ge.u64 %p1, %b, %chunks;
\t@%p1 bra DONE;
\tsub.u64 %mine, %chunks, %b;
\tadd.u64 %mine, %mine, %blocks;
\tsub.u64 %mine, %mine, 1;
\tdiv.u64 %mine, %mine, %blocks;
\tcvt.u64.u32 %t, %loops;
\tmul.lo.u64 %items, %mine, %t;
\tsetp.eq.u64 %p1, %items, 0;
\t@%p1 bra DONE;
\tmov.u32 %buf, td_buf;
\tmov.u32 %bars, td_bar;
{inits}\tfence.mbarrier_init.release.cluster;
\tfence.proxy.async.shared::cta;
\tmov.u64 %k, 0;
FILL:
\tsetp.ge.u64 %p1, %k, %items;
\t@%p1 bra START;
\tsetp.ge.u64 %p1, %k, {s};
\t@%p1 bra START;
{issue("%k")}\tadd.u64 %k, %k, 1;
\tbra FILL;
START:
\tmov.u64 %k, 0;
MAIN:
\tsetp.ge.u64 %p1, %k, %items;
\t@%p1 bra FINISH;
\trem.u64 %t, %k, {s};
\tcvt.u32.u64 %stage, %t;
\tmad.lo.u32 %bar, %stage, 8, %bars;
\tmad.lo.u32 %smem, %stage, {c}, %buf;
\tdiv.u64 %t, %k, {s};
\tcvt.u32.u64 %parity, %t;
\tand.b32 %parity, %parity, 1;
WAIT:
\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%bar], %parity;
\t@!%p2 bra WAIT;
\tfence.proxy.async.shared::cta;
{chunk("%k")}\tadd.u64 %a_dst, %dst, %off;
\tcp.async.bulk.global.shared::cta.bulk_group [%a_dst], [%smem], %size;
\tcp.async.bulk.commit_group;
\tadd.u64 %next, %k, {s};
\tsetp.ge.u64 %p1, %next, %items;
\t@%p1 bra NEXT;
\tcp.async.bulk.wait_group.read 0;
{issue("%next")}NEXT:
\tadd.u64 %k, %k, 1;
\tbra MAIN;
FINISH:
\tcp.async.bulk.wait_group 0;
DONE:
\tret;
}}
"""
