"""One input's text cut into pieces, each read by the reader of its kind, and every input's pieces
joined into one ``Evidence``. No I/O: the service reads the files (bounded) and hands the text here.

A paste holds several kinds one after another (``nvidia-smi``, then ``topo -m``, then an nccl-tests
table): each reader says whether its kind begins at a line and reads it as far as it goes; the next
line no reader takes is skipped. NCCL's lines and the kernel's XID and PCIe link lines come one by one
among a program's other lines, so they are gathered from the whole input, wherever they stand. A JSON input
is told apart by its shape: nccl-tests' ``-J``, nvbandwidth's ``-j``, or NCCL Inspector's records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from topodoctor.core import fileio
from topodoctor.core.errors import InputError
from topodoctor.evidence import (
    copies,
    health_checks,
    horovod,
    host_lines,
    launch,
    nccl_said,
    nccl_tests,
    nccl_xml,
    nics,
    osu,
    power_lines,
    prose,
    smi,
    smi_query,
    sweeps,
    topo,
    versions,
)
from topodoctor.evidence.lines import Block, Parts, clean
from topodoctor.evidence.nccl_tests import nccl_tests_json
from topodoctor.evidence.nccl_text import is_inspector, json_objects, nccl_lines, read_inspector, read_nccl_log
from topodoctor.model.evidence import Evidence, Piece

Starts = Callable[[list[str], int], bool]
Reads = Callable[[list[str], int, int], Block]

# Order matters where two kinds could begin at the same line: -q's "GPU 0000:..." before -L's
# "GPU 0:", the table of plain nvidia-smi before anything that reads a "|" line.
READERS: tuple[tuple[Starts, Reads], ...] = (
    (smi_query.starts, smi_query.read),
    (smi.starts_summary, smi.read_summary),
    (smi.starts_gpu_list, smi.read_gpu_list),
    (topo.starts, topo.read),
    (copies.starts_p2p, copies.read_p2p),
    (copies.starts_nvbandwidth, copies.read_nvbandwidth),
    (nccl_xml.starts, nccl_xml.read),
    (nccl_tests.starts, nccl_tests.read),
    (host_lines.starts_lspci, host_lines.read_lspci),
    (nics.starts, nics.read),
    (osu.starts, osu.read),
    (horovod.starts, horovod.read),
    (launch.starts, launch.read),
    (versions.starts, versions.read),
    (sweeps.starts, sweeps.read),  # last: two names and a figure is the loosest shape
)
KINDS_READ = (
    "nccl-tests output (text or -J JSON), nvidia-smi (plain, -L, -q, topo -m, topo -p2p, nvlink -s/-e), "
    "p2pBandwidthLatencyTest, nvbandwidth (text or -j JSON), NCCL topology/graph XML, lspci -vvv, "
    "kernel XID and PCIe link lines, GPU power limits stated with their default, "
    "ibstat / ibstatus / ibv_devinfo / ethtool, perftest and the OSU bandwidth tests, launch command lines and env "
    "dumps, horovodrun --check-build, "
    "NCCL INFO/WARN logs, NCCL Inspector records, "
    "NCCL versions stated on their own lines, two-node sweep tables (hostA,hostB busbw), "
    "Azure NHC's check_gpu_bw lines, "
    "and the sentences around them that state the GPUs, the nodes, the NIC and a bandwidth figure with its unit"
)


@dataclass(frozen=True)
class Read:
    """What one input held: its pieces with their parts, or why none could be read."""

    pieces: tuple[Piece, ...]
    parts: tuple[Parts, ...]
    unreadable: str = ""  # "path: why", when no piece could be read


def read_input(source: str, text: str, first_piece: int = 0) -> Read:
    """The pieces of one input's text; ``first_piece`` is the index its first piece takes in the
    joined evidence (every part names its piece by that index)."""
    if not text.strip():
        return Read((), (), f"{source}: empty")
    if "\x00" in text[:8192]:
        return Read((), (), f"{source}: binary data, not text")
    head = text.lstrip()[:1]
    if head in ("{", "["):
        got = _json(source, text, first_piece)
        if got is not None:
            return got
    lines = clean(text)
    blocks = _blocks(lines, first_piece)
    pieces = tuple(Piece(b.kind, source, b.start + 1, b.end, b.version, b.cut + _long(lines, text)) for b in blocks)
    if not blocks:
        return Read((), (), f"{source}: holds no kind of text diagnose reads")
    return Read(pieces, tuple(b.parts for b in blocks))


def context_only(r: Read) -> bool:
    """Whether an input holds only NCCL's names that judge nothing by themselves (a rented host, NVLink named):
    context for the other inputs, and no input to diagnose by itself."""
    return len(r.pieces) == 1 and r.pieces[0].kind == "nccl-words" and not nccl_said.stands_alone(r.parts[0])


def _long(lines: list[str], text: str) -> str:
    return "" if len(lines) < 400_000 or text.count("\n") < 400_000 else "; the input is cut after 400000 lines"


def _blocks(lines: list[str], first_piece: int) -> list[Block]:
    """Every piece of the lines: the contiguous kinds in order, then NCCL's and the XID lines."""
    nccl = nccl_lines(lines)
    xids = host_lines.xid_lines(lines)
    links = host_lines.pcie_link_lines(lines)
    power = power_lines.power_lines(lines)
    nhc = health_checks.nhc_lines(lines)
    scattered = set(nccl) | set(xids) | set(links) | set(power) | set(nhc)
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if i in scattered or not lines[i].strip():
            i += 1
            continue
        for starts, reads in READERS:
            if starts(lines, i):
                block = reads(lines, i, first_piece + len(blocks))
                while block.end > block.start + 1 and not lines[block.end - 1].strip():
                    block.end -= 1  # the blank lines after a piece are not part of it
                blocks.append(block)
                i = max(block.end, i + 1)
                break
        else:
            i += 1
    if nccl:
        blocks.append(read_nccl_log(lines, nccl, first_piece + len(blocks)))
    if xids:
        blocks.append(host_lines.read_xids(lines, xids, first_piece + len(blocks)))
    if links:
        blocks.append(host_lines.read_pcie_links(lines, links, first_piece + len(blocks)))
    if power:
        blocks.append(power_lines.read_power(lines, power, first_piece + len(blocks)))
    if nhc:
        blocks.append(health_checks.read_nhc(lines, nhc, first_piece + len(blocks)))
    # last: the sentences around the tools' output, only among the lines no reader took
    taken = {k for b in blocks for k in (b.lines or range(b.start, b.end))}
    said = prose.read(lines, taken, first_piece + len(blocks))
    blocks += [said] if said is not None else []
    # NCCL's names in the same sentences (the prose reader keeps its lines: both read them), part of the input's
    # last piece (its sentences', where it has them); else a piece of their own: one input of several may hold only
    # the context of the others' (a later post's "I have tried cleaning the instance" names the host as rented)
    named = nccl_said.read(lines, taken, first_piece + len(blocks))
    if named is not None and blocks:
        last = first_piece + len(blocks) - 1
        blocks[-1].parts.nccl_said += [replace(s, piece=last) for s in named.parts.nccl_said]
    elif named is not None:
        blocks.append(named)
    return blocks


def _json(source: str, text: str, piece: int) -> Read | None:
    """A JSON input of a kind this reads; None when the text is not JSON after all."""
    try:
        doc = fileio.parse_json(text, source)
    except InputError:
        docs, cut = json_objects(text)
        if docs and any(is_inspector(d) for d in docs):
            last = len(text.splitlines())
            parts = read_inspector(docs, piece)
            return Read((Piece("nccl-inspector", source, 1, last, "", cut),), (parts,))
        return None
    last = len(text.splitlines()) or 1
    if isinstance(doc, dict) and "nvbandwidth" in doc:
        parts, version, cut = copies.nvbandwidth_json(doc, piece)
        return Read((Piece("nvbandwidth", source, 1, last, version, cut),), (parts,))
    if isinstance(doc, dict) and "results" in doc and "config" in doc:
        return Read((Piece("nccl-tests", source, 1, last),), (nccl_tests_json(doc, source, piece),))
    if is_inspector(doc) or (isinstance(doc, list) and any(is_inspector(d) for d in doc)):
        docs = doc if isinstance(doc, list) else [doc]
        return Read((Piece("nccl-inspector", source, 1, last),), (read_inspector(docs, piece),))
    return Read((), (), f"{source}: JSON of no kind diagnose reads")


def join(reads: Sequence[Read]) -> Evidence:
    """Every input's pieces and parts as one ``Evidence``."""
    pieces = [p for r in reads for p in r.pieces]
    parts = [p for r in reads for p in r.parts]
    return Evidence(
        pieces=tuple(pieces),
        gpus=tuple(g for p in parts for g in p.gpus),
        pairs=tuple(x for p in parts for x in p.pairs),
        nics=tuple(x for p in parts for x in p.nics),
        copies=tuple(x for p in parts for x in p.copies),
        collectives=tuple(x for p in parts for x in p.collectives),
        pcie=tuple(x for p in parts for x in p.pcie),
        xids=tuple(x for p in parts for x in p.xids),
        settings=tuple(x for p in parts for x in p.settings),
        launches=tuple(x for p in parts for x in p.launches),
        graphs=tuple(x for p in parts for x in p.graphs),
        nccl=tuple(p.nccl for p in parts if p.nccl is not None),
        nccl_pieces=tuple(k for k, p in enumerate(parts) if p.nccl is not None),
        nccl_lines=tuple(x for p in parts for x in p.nccl_lines),
        sweeps=tuple(x for p in parts for x in p.sweeps),
        osu=tuple(x for p in parts for x in p.osu),
        horovod=tuple(x for p in parts for x in p.horovod),
        prose=tuple(x for p in parts for x in p.prose),
        nccl_said=tuple(x for p in parts for x in p.nccl_said),
        driver_version=next((p.driver_version for p in parts if p.driver_version), ""),
        cuda_version=next((p.cuda_version for p in parts if p.cuda_version), ""),
        nccl_version=next((p.nccl_version for p in parts if p.nccl_version), ""),
        unreadable=tuple(r.unreadable for r in reads if r.unreadable),
    )
