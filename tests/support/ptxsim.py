"""A small PTX interpreter for the fitness kernels, so that their arithmetic (which element each
thread copies, the tails, the bulk copies' stages and phases) is checked here, before a GPU.

Threads run one after another, each to its end: right for kernels whose threads never talk to
each other, which is every kernel topodoctor writes. Global memory is the allocations the test
makes; an access outside them fails the run, as would a read past a buffer on a GPU. Bulk copies
are kept pending, as the hardware does: a load lands in shared memory only when a thread waits on
its mbarrier, a store reads shared memory only when a ``wait_group`` lets it, so reusing a stage
too early or waiting on the wrong phase is caught rather than hidden.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field

MASK = {8: 0xFF, 16: 0xFFFF, 32: 0xFFFFFFFF, 64: (1 << 64) - 1}
LIMIT = 5_000_000  # instructions per thread: a wait that never ends fails instead of hanging


class SimError(AssertionError):
    """The kernel did something a GPU would fault on or hang in."""


@dataclass
class Memory:
    """Global memory: allocations at fixed addresses."""

    blocks: dict[int, bytearray] = field(default_factory=dict)
    next_base: int = 0x1000_0000

    def alloc(self, size: int, fill: bytes = b"") -> int:
        """A new allocation of ``size`` bytes (filled with ``fill`` repeated, else zeros); its address."""
        base = self.next_base
        self.next_base += (size + 0xFFFF) // 0x10000 * 0x10000 + 0x10000  # a gap: overruns hit nothing
        data = bytearray(size)
        if fill:
            data[:] = (fill * (size // len(fill) + 1))[:size]
        self.blocks[base] = data
        return base

    def _at(self, addr: int, n: int) -> tuple[bytearray, int]:
        for base, data in self.blocks.items():
            if base <= addr and addr + n <= base + len(data):
                return data, addr - base
        raise SimError(f"access of {n} bytes at {addr:#x} is outside every allocation")

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes at ``addr``."""
        data, off = self._at(addr, n)
        return bytes(data[off : off + n])

    def write(self, addr: int, raw: bytes) -> None:
        """Store ``raw`` at ``addr``."""
        data, off = self._at(addr, len(raw))
        data[off : off + len(raw)] = raw


class HostMemory(Memory):
    """Global memory that is this process's memory at the given ``(address, size)`` ranges: a stand-in
    driver's device buffers, which a kernel then really reads and writes."""

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        super().__init__()
        self.ranges = ranges

    def _check(self, addr: int, n: int) -> None:
        if not any(base <= addr and addr + n <= base + size for base, size in self.ranges):
            raise SimError(f"access of {n} bytes at {addr:#x} is outside every allocation")

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes at ``addr``."""
        self._check(addr, n)
        return ctypes.string_at(addr, n)

    def write(self, addr: int, raw: bytes) -> None:
        """Store ``raw`` at ``addr``."""
        self._check(addr, len(raw))
        ctypes.memmove(addr, raw, len(raw))


@dataclass
class Kernel:
    """One parsed ``.entry``: its parameters, statements, labels and shared variables."""

    params: list[tuple[str, int]]
    body: list[tuple[str | None, bool, str, list[str], str, int]]  # predicate, negated, opcode, operands, base, bits
    labels: dict[str, int]
    shared: dict[str, int]  # name -> bytes


def parse(text: str) -> dict[str, Kernel]:
    """Every entry of a PTX module by name."""
    text = re.sub(r"//[^\n]*", "", text)
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(([^)]*)\)\s*\{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        params = [(p.split()[-1], int(p.split()[1][2:])) for p in m.group(2).split(",") if p.strip()]
        out[m.group(1)] = _kernel(text[m.end() : i - 1], params)
    return out


def _kernel(body: str, params: list[tuple[str, int]]) -> Kernel:
    stmts: list[tuple[str | None, bool, str, list[str], str, int]] = []
    labels: dict[str, int] = {}
    shared: dict[str, int] = {}
    for raw in body.replace("\n", " ").split(";"):
        s = raw.strip()
        while (m := re.match(r"^(\w+):\s*", s)) is not None:
            labels[m.group(1)] = len(stmts)
            s = s[m.end() :]
        if not s or s.startswith(".reg"):
            continue
        if s.startswith(".shared"):
            m = re.search(r"\.b(\d+)\s+(\w+)\[(\d+)\]", s)
            if m is None:
                raise SimError(f"cannot read {s!r}")
            shared[m.group(2)] = int(m.group(1)) // 8 * int(m.group(3))
            continue
        pred, neg = None, False
        if s.startswith("@"):
            head, s = s.split(None, 1)
            neg, pred = head.startswith("@!"), head.lstrip("@!")
        op, _, rest = s.partition(" ")
        stmts.append((pred, neg, op, _operands(rest), op.split(".")[0], _bits(op)))
    return Kernel(params, stmts, labels, shared)


def _operands(rest: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in rest:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _bits(op: str) -> int:
    m = re.search(r"\.[usb](8|16|32|64)$", op)
    return int(m.group(1)) if m else 64


class Block:
    """One block's shared memory, mbarriers and pending bulk copies."""

    def __init__(self, kernel: Kernel, mem: Memory) -> None:
        self.mem = mem
        self.symbols: dict[str, int] = {}
        top = 0x400
        for name, size in kernel.shared.items():
            self.symbols[name] = top
            top += (size + 127) // 128 * 128
        self.smem = bytearray(b"\xcd" * top)  # garbage until written
        self.bars: dict[int, list[int]] = {}  # addr -> [phase, expected, pending, tx]
        self.loads: list[tuple[int, int, int, int]] = []  # smem, global src, size, bar
        self.groups: list[list[tuple[int, int, int]]] = []  # committed store groups: global dst, smem, size
        self.open: list[tuple[int, int, int]] = []

    def bar_done(self, addr: int) -> None:
        b = self.bars[addr]
        if b[2] == 0 and b[3] == 0:
            b[0], b[2] = b[0] + 1, b[1]

    def land(self, bar: int) -> None:
        """Complete the loads counted on ``bar``."""
        for ld in [x for x in self.loads if x[3] == bar]:
            self.loads.remove(ld)
            smem, src, size, _ = ld
            self.smem[smem : smem + size] = self.mem.read(src, size)
            self.bars[bar][3] -= size
            self.bar_done(bar)

    def drain(self, keep: int) -> None:
        """Perform every committed store group but the ``keep`` newest."""
        while len(self.groups) > keep:
            for dst, smem, size in self.groups.pop(0):
                self.mem.write(dst, bytes(self.smem[smem : smem + size]))

    def load(self, smem: int, src: int, size: int, bar: int) -> None:
        pending = [s for g in self.groups for _, s, n in g] + [s for _, s, _ in self.open]
        if any(s <= smem < s + size or smem <= s < smem + size for s in pending):
            raise SimError(f"shared {smem:#x} reloaded before a store read it")
        self.loads.append((smem, src, size, bar))


def run(text: str, entry: str, grid: int, block: int, args: list[int], mem: Memory) -> int:
    """Run ``entry`` of module ``text`` over ``grid`` x ``block`` threads; the instructions executed."""
    kernel = parse(text)[entry]
    if len(args) != len(kernel.params):
        raise SimError(f"{entry} takes {len(kernel.params)} parameters")
    params = {name: (value, bits) for (name, bits), value in zip(kernel.params, args)}
    total = 0
    for cta in range(grid):
        blk = Block(kernel, mem)
        for tid in range(block):
            total += _thread(kernel, blk, params, {"%ctaid.x": cta, "%nctaid.x": grid, "%tid.x": tid, "%ntid.x": block})
        if blk.loads or blk.groups or blk.open:
            raise SimError(f"block {cta} ended with bulk copies it never waited for")
    return total


def _thread(kernel: Kernel, blk: Block, params: dict[str, tuple[int, int]], special: dict[str, int]) -> int:
    regs: dict[str, int] = dict(special)
    mem = blk.mem

    def val(x: str, bits: int = 64) -> int:
        if x in regs:
            return regs[x] & MASK[bits]
        if x in blk.symbols:
            return blk.symbols[x]
        if x.startswith("%"):
            raise SimError(f"{x} read before it was written")
        return int(x, 0) & MASK[bits]

    def addr(x: str) -> int:
        inner = x.strip("[]")
        base, _, off = inner.partition("+")
        return val(base.strip()) + (int(off, 0) if off else 0)

    def vec(x: str) -> list[str]:
        return [r.strip() for r in x.strip("{}").split(",")]

    pc, steps = 0, 0
    while pc < len(kernel.body):
        steps += 1
        if steps > LIMIT:
            raise SimError(f"thread {special} ran past {LIMIT} instructions (a wait that never ends?)")
        pred, neg, op, ops, base, bits = kernel.body[pc]
        pc += 1
        if pred is not None and bool(regs[pred]) == neg:
            continue
        if base == "ret" or base == "exit":
            break
        if base == "bra":
            pc = kernel.labels[ops[0]]
        elif base == "ld" and ".param" in op:
            regs[ops[0]] = params[ops[1].strip("[]")][0]
        elif base == "ld" and ".global" in op:
            size = bits // 8
            dests = vec(ops[0]) if ops[0].startswith("{") else [ops[0]]
            raw = mem.read(addr(ops[1]), size * len(dests))
            for k, d in enumerate(dests):
                regs[d] = int.from_bytes(raw[k * size : (k + 1) * size], "little")
        elif base == "st" and ".global" in op:
            size = bits // 8
            srcs = vec(ops[1]) if ops[1].startswith("{") else [ops[1]]
            mem.write(addr(ops[0]), b"".join(val(r, bits).to_bytes(size, "little") for r in srcs))
        elif base == "mov":
            regs[ops[0]] = val(ops[1], bits)
        elif base in ("add", "sub", "mul", "mad", "shl", "shr", "and", "min", "div", "rem"):
            regs[ops[0]] = _alu(op, [val(o, 32 if ".wide" in op else bits) for o in ops[1:]], bits)
        elif base == "cvt":  # cvt.<to>.<from>
            to, frm = (int(t[1:]) for t in op.split(".")[1:3])
            regs[ops[0]] = val(ops[1], frm) & MASK[to]
        elif base == "setp":
            cmp = op.split(".")[1]
            a, b = val(ops[1], bits), val(ops[2], bits)
            regs[ops[0]] = int({"eq": a == b, "ne": a != b, "ge": a >= b, "gt": a > b, "lt": a < b, "le": a <= b}[cmp])
        elif base == "mbarrier":
            _mbarrier(op, ops, blk, regs, val, addr)
        elif base == "cp":
            _bulk(op, ops, blk, val, addr)
        elif base == "fence":
            pass
        else:
            raise SimError(f"the simulator does not know {op}")
    if blk.open:
        raise SimError("bulk stores issued but never committed")
    return steps


def _alu(op: str, a: list[int], bits: int) -> int:
    base = op.split(".")[0]
    if ".wide" in op:
        bits = 64
    r = {
        "add": lambda: a[0] + a[1],
        "sub": lambda: a[0] - a[1],
        "mul": lambda: a[0] * a[1],
        "mad": lambda: a[0] * a[1] + a[2],
        "shl": lambda: a[0] << a[1],
        "shr": lambda: a[0] >> a[1],
        "and": lambda: a[0] & a[1],
        "min": lambda: min(a[0], a[1]),
        "div": lambda: a[0] // a[1],
        "rem": lambda: a[0] % a[1],
    }[base]()
    return r & MASK[bits]


def _mbarrier(op: str, ops: list[str], blk: Block, regs: dict[str, int], val: object, addr: object) -> None:
    at = addr(ops[0] if "init" in op else ops[1])  # type: ignore[operator]
    if ".init" in op:
        blk.bars[at] = [0, val(ops[1]), val(ops[1]), 0]  # type: ignore[operator]
    elif ".arrive.expect_tx" in op:
        b = blk.bars[at]
        b[3] += val(ops[2])  # type: ignore[operator]
        b[2] -= 1
        regs[ops[0]] = b[0]
        blk.bar_done(at)
    elif ".try_wait.parity" in op:
        if at not in blk.bars:
            raise SimError("wait on an mbarrier never initialised")
        want = val(ops[2]) % 2  # type: ignore[operator]
        if blk.bars[at][0] % 2 == want:  # that phase is not over yet: the loads counted on it land now
            blk.land(at)
        regs[ops[0]] = int(blk.bars[at][0] % 2 != want)
    else:
        raise SimError(f"the simulator does not know {op}")


def _bulk(op: str, ops: list[str], blk: Block, val: object, addr: object) -> None:
    if op.startswith("cp.async.bulk.shared::cluster.global"):
        size = val(ops[2])  # type: ignore[operator]
        if size % 16 or size <= 0:
            raise SimError(f"bulk copy of {size} bytes: a multiple of 16 is required")
        blk.load(addr(ops[0]), addr(ops[1]), size, addr(ops[3]))  # type: ignore[operator]
    elif op.startswith("cp.async.bulk.global.shared"):
        size = val(ops[2])  # type: ignore[operator]
        blk.open.append((addr(ops[0]), addr(ops[1]), size))  # type: ignore[operator]
    elif op == "cp.async.bulk.commit_group":
        blk.groups.append(blk.open)
        blk.open = []
    elif op.startswith("cp.async.bulk.wait_group"):
        blk.drain(int(ops[0]))
    else:
        raise SimError(f"the simulator does not know {op}")
