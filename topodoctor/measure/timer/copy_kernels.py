"""The SM copy kernels of the HBM test: one description (how the grid walks the buffer, how many
loads each thread keeps in flight, the cache hints) that names itself, parses back from its
name, says what the driver needs to load it and how to launch it. ``copy_ptx`` writes its PTX.

Three styles:

``stride``: a persistent grid (``blocks_per_sm`` blocks per SM) where every thread copies the
elements ``t, t + T, t + 2T...`` (T threads in the grid), ``unroll`` loads in flight before their
stores: nvbandwidth's ``stridingMemcpyKernel`` with 12 in flight, 512 threads and one block per SM.

``oneshot``: one pass, no loop: every thread copies ``unroll`` elements a block apart and the grid
covers the buffer (many short blocks, the hardware scheduler keeps every SM full). It is launched
once per copy, so the gaps between launches are in its time.

``bulk``: Hopper's bulk copy engine (TMA, ``cp.async.bulk``): one thread per block moves chunks
global -> shared -> global, ``stages`` chunks in flight; no registers carry the data.

An element is 8 bytes (``u64``, BabelStream's double), 16 (one ``v4.u32`` or ``v2.u64`` access)
or 32 (``v4u32x2``: two adjacent 16-byte accesses per thread, a warp covers 1 KiB). Load hints:
``nc`` (read-only path), ``cg``, ``cs`` (streaming), ``lu`` (last use), ``na``
(``L1::no_allocate``), ``ncna``; ``l2:256B`` asks L2 to fetch 256 bytes per miss. Store hints:
``cs``, ``wt``, ``cg``, ``na``.

``skew``: the destination starts that many bytes into its buffer. Source and destination are
separate allocations whose addresses agree in their low bits (both start on a 2 MiB page), so
a read and the write of the same element, issued together, can land in the same HBM channel and
bank; a skew moves the write elsewhere (STREAM's array offset for the same reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Style = Literal["stride", "oneshot", "bulk"]
Vec = Literal["u64", "v4u32", "v2u64", "v4u32x2"]

LOAD_HINTS = {"def": "", "nc": ".nc", "cg": ".cg", "cs": ".cs", "lu": ".lu", "na": ".L1::no_allocate",
              "ncna": ".nc.L1::no_allocate"}  # fmt: skip
STORE_HINTS = {"def": "", "cs": ".cs", "wt": ".wt", "cg": ".cg", "na": ".L1::no_allocate"}
ELEMENT_BYTES = {"u64": 8, "v4u32": 16, "v2u64": 16, "v4u32x2": 32}
MAX_SKEW = 1 << 20
BULK_SHARED_BYTES = 48 << 10  # static shared memory a block may declare without an opt-in
MAX_GRID = (1 << 31) - 1
BASE_PTX, BASE_SM = (7, 0), 70  # the kernels without hints run on Volta and later


@dataclass(frozen=True)
class CopyKernel:
    """One copy kernel's shape. ``unroll``: loads in flight per thread (bulk: chunks in flight per
    block); ``threads``: per block (bulk: 1); ``blocks_per_sm``: stride and bulk grids."""

    style: Style = "stride"
    unroll: int = 4
    threads: int = 512
    blocks_per_sm: int = 1
    vec: Vec = "v4u32"
    load: str = "def"
    store: str = "def"
    prefetch: bool = False  # .L2::256B on loads
    chunk_kib: int = 0  # bulk: bytes per copy, in KiB
    skew: int = 0  # bytes the destination starts into its buffer

    def __post_init__(self) -> None:
        problems = []
        if self.load not in LOAD_HINTS or self.store not in STORE_HINTS:
            problems.append(f"unknown hint ld:{self.load} st:{self.store}")
        if self.style == "bulk":
            if (
                self.threads != 1
                or self.vec != "v4u32"
                or (self.load, self.store, self.prefetch) != ("def", "def", False)
            ):
                problems.append("a bulk copy has one thread per block and no vector or cache hints")
            shared = self.unroll * ((self.chunk_kib << 10) + 8)  # chunks and their mbarriers
            if not 1 <= self.unroll <= 8 or self.chunk_kib < 1 or shared > BULK_SHARED_BYTES:
                problems.append(f"bulk: 1-8 stages whose chunks and barriers fit {BULK_SHARED_BYTES} bytes")
        else:
            if not 1 <= self.unroll <= 32:
                problems.append(f"unroll must be 1-32, got {self.unroll}")
            if self.threads % 32 or not 32 <= self.threads <= 1024:
                problems.append(f"threads must be a multiple of 32 up to 1024, got {self.threads}")
            if self.chunk_kib:
                problems.append("only a bulk copy has a chunk size")
        if self.skew % 256 or not 0 <= self.skew < MAX_SKEW:
            problems.append(f"skew must be a multiple of 256 below {MAX_SKEW}, got {self.skew}")
        if not 1 <= self.blocks_per_sm <= 32 or (self.style == "oneshot" and self.blocks_per_sm != 1):
            problems.append(
                f"blocks per SM must be 1-32 (oneshot: 1, its grid covers the buffer), got {self.blocks_per_sm}"
            )
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def name(self) -> str:
        """The canonical name: ``parse(k.name) == k``."""
        skew = f"-o{self.skew}" if self.skew else ""
        if self.style == "bulk":
            return f"bulk-s{self.unroll}-c{self.chunk_kib}k-b{self.blocks_per_sm}{skew}"
        grid = f"-b{self.blocks_per_sm}" if self.style == "stride" else ""
        l2 = "-l2:256B" if self.prefetch else ""
        return f"{self.style}-u{self.unroll}-t{self.threads}{grid}-{self.vec}-ld:{self.load}-st:{self.store}{l2}{skew}"

    @property
    def element_bytes(self) -> int:
        """Bytes one thread moves per element (a bulk copy moves 16-byte units)."""
        return ELEMENT_BYTES[self.vec]

    @property
    def granule_bytes(self) -> int:
        """What a copy's size must be a multiple of: whole elements, whole 16-byte units."""
        return max(16, self.element_bytes)

    @property
    def element_shift(self) -> int:
        """log2 of ``element_bytes``: an element index times the element size is a shift."""
        return self.element_bytes.bit_length() - 1

    @property
    def needs(self) -> tuple[tuple[int, int], int]:
        """(PTX ISA version, lowest SM architecture) the kernel's instructions need."""
        ptx, sm = BASE_PTX, BASE_SM
        if "L1::" in LOAD_HINTS[self.load] + STORE_HINTS[self.store]:
            ptx = max(ptx, (7, 4))  # eviction-priority qualifiers
        if self.prefetch:
            ptx, sm = max(ptx, (7, 4)), max(sm, 80)  # .L2::256B needs Ampere
        if self.style == "bulk":
            ptx, sm = max(ptx, (8, 0)), max(sm, 90)  # cp.async.bulk and mbarrier tx counts: Hopper
        return ptx, sm


# nvbandwidth's shape with 4 loads in flight: the best of 4, 8, 12 and 16 on H200 (docs/benchmarks.md)
STRIDE = CopyKernel()
PORTABLE = STRIDE  # runs on every GPU the fitness test supports and on any driver that has PTX 7.0

# the element first: "u64" is an element, never an unroll of 64
_TOKEN = re.compile(r"^(?:(?P<vec>v4u32x2|v4u32|v2u64|u64)|u(?P<u>\d+)|s(?P<s>\d+)|t(?P<t>\d+)|b(?P<b>\d+)"
                    r"|c(?P<c>\d+)k|o(?P<o>\d+)|ld:(?P<ld>\w+)|st:(?P<st>\w+)|l2:(?P<l2>256B))$")  # fmt: skip


def parse(name: str) -> CopyKernel:
    """The kernel a name describes: the style first, then any of ``u4`` (unroll), ``t512``
    (threads), ``b2`` (blocks per SM), an element (``u64``, ``v4u32``, ``v2u64``, ``v4u32x2``),
    ``ld:nc``, ``st:cs``, ``l2:256B``, ``o4096`` (skew); bulk: ``s3`` (stages), ``c16k`` (chunk),
    ``b2``, ``o4096``. Fields left out keep
    their defaults; a bulk copy's chunk defaults to 16 KiB and its stages to 2."""
    style, *tokens = name.strip().split("-")
    if style not in ("stride", "oneshot", "bulk"):
        raise ValueError(f"{name!r}: the kernel style must be stride, oneshot or bulk")
    fields: dict[str, object] = {"style": style}
    if style == "bulk":
        fields.update(threads=1, unroll=2, chunk_kib=16)
    for token in tokens:
        m = _TOKEN.match(token)
        if m is None:
            raise ValueError(f"{name!r}: {token!r} is not a kernel parameter")
        key, value = next((k, v) for k, v in m.groupdict().items() if v is not None)
        if key in ("u", "s"):
            fields["unroll"] = int(value)
        elif key in ("t", "b", "c", "o"):
            fields[{"t": "threads", "b": "blocks_per_sm", "c": "chunk_kib", "o": "skew"}[key]] = int(value)
        elif key == "vec":
            fields["vec"] = value
        elif key == "l2":
            fields["prefetch"] = True
        else:
            fields["load" if key == "ld" else "store"] = value
    return CopyKernel(**fields)  # type: ignore[arg-type]


# Copies between GPUs (`bandwidth --mode sm`): nvbandwidth's grid (512 threads, one block per SM, each
# thread striding over the buffer) with 4 loads in flight per thread where nvbandwidth keeps 12: the 4
# came closer to nvbandwidth's own figure (docs/benchmarks.md, "The figures behind constants").
PEER = parse("stride-u4-t512-b1")

# The HBM test's kernel: one 16-byte element per thread, 128 threads a block, a grid that covers the
# buffer, no cache hints: at nvbandwidth's device_local_copy where the persistent grid-stride kernel
# above fell short, and no other of the shapes tried beyond the spread (tests/benchmarks/hbm_kernels.py;
# docs/benchmarks.md, "The figures behind constants").
DEFAULT = parse("oneshot-u1-t128-v4u32-ld:def-st:def")


def for_gpu(kernel: CopyKernel, cc: tuple[int, int]) -> CopyKernel:
    """The kernel to run on a GPU of compute capability ``cc``: ``kernel`` where its instructions
    exist there, else the portable one (the figure is then the portable kernel's, and says so)."""
    return kernel if kernel.needs[1] <= cc[0] * 10 + cc[1] else PORTABLE


@dataclass(frozen=True)
class Geometry:
    """How to launch a kernel over ``n16`` 16-byte units: grid and block sizes, and whether one
    launch loops ``iters`` times (persistent grids) or each copy is its own launch (oneshot)."""

    grid: int
    block: int
    loops_inside: bool


def geometry(kernel: CopyKernel, n16: int, sms: int, share: int = 1) -> Geometry:
    """The launch of ``kernel`` on a GPU of ``sms`` SMs; ``share`` splits the SMs between kernels
    that run at once (both directions of a pair)."""
    if kernel.style == "oneshot":
        elements = n16 * 16 // kernel.element_bytes
        per_block = kernel.threads * kernel.unroll
        grid = max(1, -(-elements // per_block))
        if grid > MAX_GRID:
            raise ValueError(f"{n16 * 16} bytes need {grid} blocks of {kernel.name}: more than a grid holds")
        return Geometry(grid, kernel.threads, False)
    return Geometry(max(1, sms * kernel.blocks_per_sm // share), kernel.threads, True)
