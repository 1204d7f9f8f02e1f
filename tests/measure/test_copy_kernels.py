"""The HBM copy kernels without a GPU: names and parameters, the choice per GPU, launch shapes,
the PTX text (what it holds, that ptxas takes it) and what it does (run by tests/support/ptxsim.py
on buffers with tails, ``loops`` times)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from tests.benchmarks import hbm_kernels
from tests.support import ptxsim
from topodoctor.measure.timer import copy_kernels, copy_ptx, ptx
from topodoctor.measure.timer.copy_kernels import CopyKernel, for_gpu, geometry, parse

CATALOGUE = [
    *hbm_kernels.structure(),
    *hbm_kernels.BULK,
    *[k for base in (CopyKernel(), CopyKernel("oneshot", 2, 256)) for k in hbm_kernels.load_hints(base)],
    *[k for base in (CopyKernel(), CopyKernel("oneshot", 2, 256)) for k in hbm_kernels.store_hints(base)],
    *hbm_kernels.vectors(CopyKernel()),
    *hbm_kernels.vectors(CopyKernel("oneshot", 4, 128)),
    *hbm_kernels.skews(CopyKernel("oneshot", 4, 128)),
]


def test_every_kernel_of_the_sweep_is_named_once_and_parses_back() -> None:
    names = [k.name for k in CATALOGUE]
    assert len(set(names)) == len(names)
    assert all(parse(n) == k for n, k in zip(names, CATALOGUE))


@pytest.mark.parametrize(
    ("name", "kernel"),
    [
        ("stride", CopyKernel()),
        ("stride-u12", CopyKernel(unroll=12)),
        ("oneshot-t256-u2-ld:nc-l2:256B", CopyKernel("oneshot", 2, 256, load="nc", prefetch=True)),
        ("stride-b4-t128-v4u32x2-st:cs", CopyKernel("stride", 4, 128, 4, "v4u32x2", store="cs")),
        ("bulk", CopyKernel("bulk", 2, 1, 1, chunk_kib=16)),
        ("bulk-s4-c11k-b2", CopyKernel("bulk", 4, 1, 2, chunk_kib=11)),
        ("oneshot-u64-o4096", CopyKernel("oneshot", vec="u64", skew=4096)),
        ("stride-u8-u64", CopyKernel("stride", 8, vec="u64")),
    ],
)
def test_a_short_name_fills_in_the_defaults(name: str, kernel: CopyKernel) -> None:
    assert parse(name) == kernel and parse(kernel.name) == kernel


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("memcpy-u4", "stride, oneshot or bulk"),
        ("stride-x4", "not a kernel parameter"),
        ("stride-u0", "unroll"),
        ("stride-t100", "multiple of 32"),
        ("oneshot-b2", "blocks per SM"),
        ("stride-ld:nope", "unknown hint"),
        ("bulk-s4-c12k", "fit 49152 bytes"),
        ("bulk-ld:nc", "no vector or cache hints"),
        ("stride-c4k", "only a bulk copy"),
        ("stride-o100", "multiple of 256"),
        ("bulk-u64", "no vector or cache hints"),
    ],
)
def test_a_wrong_name_says_what_is_wrong(name: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse(name)


@pytest.mark.parametrize(
    ("name", "ptx_version", "sm"),
    [
        ("stride", (7, 0), 70),
        ("stride-ld:cs-st:wt", (7, 0), 70),
        ("stride-ld:na", (7, 4), 70),
        ("oneshot-st:na", (7, 4), 70),
        ("oneshot-l2:256B", (7, 4), 80),
        ("bulk", (8, 0), 90),
    ],
)
def test_what_a_kernel_needs_and_where_it_runs(name: str, ptx_version: tuple[int, int], sm: int) -> None:
    k = parse(name)
    assert k.needs == (ptx_version, sm)
    assert copy_ptx.header([k]).startswith(f".version {ptx_version[0]}.{ptx_version[1]}\n.target sm_{sm}\n")
    assert for_gpu(k, (sm // 10, sm % 10)) == k
    assert for_gpu(k, (sm // 10 - 1, 5)) == copy_kernels.PORTABLE  # an older GPU gets the portable kernel


def test_the_default_kernel_runs_on_every_supported_gpu() -> None:
    for kernel in (copy_kernels.DEFAULT, copy_kernels.PORTABLE, copy_kernels.STRIDE):
        assert parse(kernel.name) == kernel
    assert copy_kernels.PORTABLE.needs == (copy_kernels.BASE_PTX, copy_kernels.BASE_SM)


def test_launch_shapes() -> None:
    n16 = (512 << 20) // 16
    assert geometry(parse("stride-t256-b4"), n16, 132) == copy_kernels.Geometry(528, 256, True)
    assert geometry(parse("stride-t256-b4"), n16, 132, share=2) == copy_kernels.Geometry(264, 256, True)
    assert geometry(parse("bulk-b3"), n16, 132) == copy_kernels.Geometry(396, 1, True)
    # a oneshot grid covers the buffer: the last block is partial, never missing
    one = geometry(parse("oneshot-u4-t256"), n16, 132)
    assert one == copy_kernels.Geometry(n16 // 1024, 256, False)
    assert geometry(parse("oneshot-u4-t256"), n16 + 1, 132).grid == n16 // 1024 + 1
    assert geometry(parse("oneshot-u2-t128-v4u32x2"), 1000, 132).grid == -(-500 // 256)
    with pytest.raises(ValueError, match="more than a grid holds"):
        geometry(parse("oneshot-u1-t32"), 1 << 40, 132)


@pytest.mark.parametrize("kernel", [k for k in CATALOGUE if k.style != "bulk"], ids=lambda k: k.name)
def test_the_ptx_reflects_the_parameters(kernel: CopyKernel) -> None:
    text = copy_ptx.entry(kernel, "td_hbm")
    width = 2 if kernel.vec == "v4u32x2" else 1
    vt = copy_ptx.LANES[kernel.vec][0]
    loads = re.findall(r"\tld\.global(\S*) ", text)
    stores = re.findall(r"\tst\.global(\S*) ", text)
    # the burst (unroll elements) and the one-at-a-time path, each element one or two accesses
    assert len(loads) == len(stores) == (kernel.unroll + 1) * width
    hint = copy_kernels.LOAD_HINTS[kernel.load] + (".L2::256B" if kernel.prefetch else "")
    assert set(loads) == {hint + vt} and set(stores) == {copy_kernels.STORE_HINTS[kernel.store] + vt}
    assert text.count("{") == text.count("}")
    assert f"{kernel.unroll - 1};" in text  # how far ahead a whole burst reaches


def test_a_bulk_kernel_holds_its_stages_in_shared_memory() -> None:
    k = parse("bulk-s3-c15k-b2")
    text = copy_ptx.entry(k, "td_hbm")
    assert ".shared .align 128 .b8 td_buf[46080];" in text and ".b64 td_bar[3];" in text
    assert text.count("mbarrier.init") == 3 and "cp.async.bulk.wait_group.read 0;" in text


@pytest.mark.slow
def test_the_whole_sweep_is_ptx_the_assembler_accepts(tmp_path: Path) -> None:
    assembler = shutil.which("ptxas")
    if assembler is None:
        pytest.skip("no ptxas here: the GPU host's JIT compiles them")
    text = copy_ptx.header(CATALOGUE) + "".join(copy_ptx.entry(k, f"k{i}") for i, k in enumerate(CATALOGUE))
    (tmp_path / "all.ptx").write_text(text)
    done = subprocess.run([assembler, "-arch=sm_90", str(tmp_path / "all.ptx"), "-o", str(tmp_path / "all.cubin")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


SIMULATED = [
    *[CopyKernel(style, u, 32 * (1 + u % 2), 1 + (u % 3 if style == "stride" else 0), vec)
      for style in ("stride", "oneshot") for vec in ("u64", "v4u32", "v2u64", "v4u32x2") for u in (1, 2, 3, 8)],
    parse("stride-u4-t64-ld:ncna-st:cs-l2:256B"),
    parse("oneshot-u2-t32-ld:lu-st:wt"),
    *[CopyKernel("bulk", s, 1, b, chunk_kib=c) for s, c, b in ((1, 1, 1), (2, 1, 3), (3, 2, 2), (8, 1, 1))],
]  # fmt: skip


def _copy(kernel: CopyKernel, n16: int, loops: int, sms: int = 3, text: str | None = None) -> tuple[bytes, bytes]:
    mem = ptxsim.Memory()
    src = mem.alloc(n16 * 16, os.urandom(48))
    dst = mem.alloc(n16 * 16)
    geo = geometry(kernel, n16, sms)
    text = text or copy_ptx.header([kernel]) + copy_ptx.entry(kernel, "td_hbm")
    for _ in range(1 if geo.loops_inside else loops):
        ptxsim.run(text, "td_hbm", geo.grid, geo.block, [dst, src, n16, loops if geo.loops_inside else 1], mem)
    return mem.read(src, n16 * 16), mem.read(dst, n16 * 16)


@pytest.mark.parametrize("kernel", SIMULATED, ids=lambda k: k.name)
@pytest.mark.parametrize("n16", [2, 38, 1234])
def test_each_kernel_copies_every_byte_and_no_more(kernel: CopyKernel, n16: int) -> None:
    """Tails included (a buffer that is not a whole number of bursts, blocks or chunks); memory
    past the buffers is not allocated, so a kernel that reads or writes there fails."""
    src, dst = _copy(kernel, n16, loops=2)
    assert dst == src


def test_the_simulator_catches_a_wrong_tail() -> None:
    kernel = parse("stride-u4-t32")
    text = copy_ptx.header([kernel]) + copy_ptx.entry(kernel, "td_hbm")
    overrun = text.replace("setp.ge.u64 %p2, %last, %n;", "setp.gt.u64 %p2, %last, %n;")
    with pytest.raises(ptxsim.SimError, match="outside every allocation"):
        _copy(kernel, 672, 1, text=overrun)  # 96 threads: a burst's last element is exactly the end
    short = text.replace("setp.ge.u64 %p2, %i, %n;", "setp.ge.u64 %p2, %i, 3;")
    src, dst = _copy(kernel, 1234, 1, text=short)
    assert dst != src


def test_the_simulator_catches_a_stage_reused_too_early() -> None:
    kernel = parse("bulk-s2-c1k")
    text = copy_ptx.header([kernel]) + copy_ptx.entry(kernel, "td_hbm")
    with pytest.raises(ptxsim.SimError, match="reloaded before a store read it"):
        _copy(kernel, 1234, 1, text=text.replace("cp.async.bulk.wait_group.read 0;", ""))


def test_the_simulator_catches_a_wait_on_the_wrong_phase() -> None:
    """Waiting on phase 0 every time: a stage's second load is never waited for, its store copies
    the first chunk again."""
    kernel = parse("bulk-s2-c1k")
    text = copy_ptx.header([kernel]) + copy_ptx.entry(kernel, "td_hbm")
    wrong = text.replace("and.b32 %parity, %parity, 1;", "and.b32 %parity, %parity, 0;")
    assert wrong != text
    with pytest.raises(ptxsim.SimError, match="never waited for"):
        _copy(kernel, 1234, 2, text=wrong)


def test_the_chase_walks_only_on_its_target_block() -> None:
    mem = ptxsim.Memory()
    nodes, stride = 1024, 16
    chain = mem.alloc(nodes * 8)
    mem.write(chain, b"".join((chain + (i + stride) % nodes * 8).to_bytes(8, "little") for i in range(nodes)))
    out = mem.alloc(4 * 8)
    text = ptx.module().decode().rstrip("\0")
    for target in (2, 0):
        ptxsim.run(text, ptx.CHASE, 4, 1, [chain, 300, out, target], mem)
    ends = [int.from_bytes(mem.read(out + 8 * b, 8), "little") for b in range(4)]
    assert ends == [chain + 300 * stride % nodes * 8, 0, chain + 300 * stride % nodes * 8, 0]


def test_the_base_module_keeps_to_volta() -> None:
    assert ptx.module().startswith(b".version 7.0\n.target sm_70\n")
    assert b"td_copy" in ptx.module() and b"td_chase" in ptx.module()
    with pytest.raises(ValueError, match="newer GPU"):
        ptx.module(parse("stride-l2:256B"))
    assert ptx.hbm_module(parse("bulk")).startswith(b".version 8.0\n.target sm_90\n")
    assert replace(copy_kernels.STRIDE, unroll=12) == parse("stride-u12")
