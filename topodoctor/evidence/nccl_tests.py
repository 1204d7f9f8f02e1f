"""nccl-tests' text output, of any ``*_perf`` binary and version, read into the rows ``collectives
--from`` judges (``model.collectives.Row``, as its ``-J`` JSON loads).

The layout comes from nccl-tests' own printf formats (src/common.cu, src/util.cu)::

    # nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809      (2.14 and later)
    # Collective test starting: all_reduce_perf                             (2.14 and later)
    # nThread 1 nGpus 8 minBytes 8 maxBytes 4294967296 step: 4(factor) warmup iters: 1 iters: 20 ...
    #  Rank  0 Group  0 Pid   2632 on  host device  0 [0000:00:06] NVIDIA H200
    #   Rank  0 Pid  15123 on dgx1 device  0 [0x06] Tesla V100-SXM2-16GB      (before groups)
    #       size         count      type   redop    root     time   algbw   busbw  #wrong  ...
           8             2     float     sum      -1    79.51    0.00    0.00       0  ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 111.237

Older tables have no ``redop`` / ``root`` column, or an ``error`` column (the largest relative error)
in place of ``#wrong``; a run without validation (``-c 0``) prints ``N/A`` there. Where the
program's name is not printed (before 2.14) the op is told from the columns and the counts.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from topodoctor.evidence.lines import Block, Parts, cells, number
from topodoctor.model.collective_ops import BINARY_TO_OP, SPECS, Op
from topodoctor.model.collectives import RankInfo, Row, Timing, from_nccl_tests
from topodoctor.model.evidence import CollectiveRun, EvidenceSetting, GpuSeen
from topodoctor.nccl.grammar import NT_RANK as _RANK

_VERSION = re.compile(r"^# nccl-tests version (\S+)(?:.*nccl-library=(\d+))?")
_START = re.compile(r"^# Collective test starting: (\w+)")
_PROGRAM = re.compile(r"\b(\w+)_perf\b")
_HEADER = re.compile(r"^#?\s*nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)")
_USING = re.compile(r"^#?\s*Using devices\s*$")
_COLUMNS = re.compile(r"^#?\s+size\s+count\s+type\b")
# the units line under the column header, its "#" eaten by a markdown paste: "(B)    (elements)   (us)  (GB/s) ..."
_UNITS = re.compile(r"^#?\s*\(B\)\s+\(elements\)")
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)")
_BOUNDS = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)")
_CONCLUDED = re.compile(r"^#?\s*Collective test concluded(?::\s*(\w+))?")
_ROW_START = re.compile(r"^\s+\d+\s+\d+\s+[a-z]\w*\s+(?:\w+\s+)?(?:-?\d+\s+)?[\d.]+\s+[\d.]+\s+[\d.]+\s")
_WRAPPED_NAME = re.compile(r"^\s*[\w-]+(?: [\w-]+){0,3}\s*$")  # "80GB HBM3" after a cut rank line
_BANNER = re.compile(r"^NCCL version (\d+\.\d+\.\d+)")
_NCCL_LINE = re.compile(r"NCCL (?:INFO|WARN|TRACE)|^NCCL version \d")
# the tool's own lines above its table, with or without the "#" a markdown paste may eat
_OWN = re.compile(
    r"^#|^\s*(?:Using devices|Blocking Enabled|Rank\s|out-of-place|\(B\)|Reducing maxBytes|Per-Iteration)"
    r"|\b(?:iters|validation|graph|unalign):"  # the header line's end, where a narrow terminal wrapped it
)
ELEMENT_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "half": 2, "bfloat16": 2, "fp16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1,
    "int32": 4, "uint32": 4, "int": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8,
}  # fmt: skip


def starts(lines: list[str], i: int) -> bool:
    """Whether an nccl-tests output begins at line ``i``."""
    line = lines[i]
    if _VERSION.match(line) or _HEADER.match(line) or _START.match(line) or _COLUMNS.match(line):
        return True
    if line.startswith("#") and _AVG.match(line):
        return True  # the closing average alone, as people quote it to compare two runs
    if _RANK.match(line) or (_USING.match(line) and i + 1 < len(lines) and _RANK.match(lines[i + 1])):
        # the rank lines pasted without the "# nThread" header above them (a header read takes its own)
        return i == 0 or not (_RANK.match(lines[i - 1]) or _USING.match(lines[i - 1]))
    # a paste that begins inside the table: two rows in a row
    return bool(_ROW_START.match(line) and i + 1 < len(lines) and _ROW_START.match(lines[i + 1]))


class _Table:
    """The table's columns as the header line names them."""

    def __init__(self, header: str) -> None:
        names = header.lstrip("#").replace("#wrong", " #wrong").split()
        self.redop = "redop" in names
        self.root = "root" in names
        self.wrong = "#wrong" in names or "error" in names
        self.error_form = "error" in names and "#wrong" not in names
        width = 4 if self.wrong else 3
        self.groups = max(1, min(2, names.count("time")))
        self.fields = 3 + self.redop + self.root + width * self.groups

    @staticmethod
    def from_row(tokens: list[str]) -> _Table:
        """The columns of a table whose header the paste left out, told from a row: 13 cells with
        redop and root, 12 with redop (before root was printed), 11 with neither; a last cell in
        ``0e+00`` form is the old ``error`` column."""
        error = "e" in tokens[-1].lower() and not tokens[-1].isdigit()
        last = "error" if error else "#wrong"
        names = ["size", "count", "type"]
        if len(tokens) >= 13:
            names += ["redop", "root"]
        elif len(tokens) == 12:
            names += ["redop"]
        names += ["time", "algbw", "busbw", last] * 2
        return _Table(" ".join(names))

    def half(self, tokens: list[str]) -> bool:
        """Whether the tokens are a row's out-of-place half alone (its in-place half cut)."""
        return self.groups == 2 and len(tokens) == self.fields - (4 if self.wrong else 3) and tokens[0].isdigit()

    def row(self, tokens: list[str], half: bool = False) -> tuple[int, int, str, str, int, list[Timing | None]] | None:
        """(size, count, type, redop, root, timings) of a row, or None when the tokens are not one; ``half``: the
        out-of-place half alone is a row (the in-place half cut from every row: a paste clipped at its right edge)."""
        width = 4 if self.wrong else 3
        groups = 1 if half and self.half(tokens) else self.groups
        if len(tokens) < self.fields - width * (self.groups - groups) or not tokens[0].isdigit():
            return None
        if not tokens[1].isdigit():
            return None
        k = 3
        redop = tokens[k] if self.redop else ""
        k += self.redop
        root = -1
        if self.root:
            if not tokens[k].lstrip("-").isdigit():
                return None
            root = int(tokens[k])
            k += 1
        timings: list[Timing | None] = []
        for g in range(groups):
            t = tokens[k + g * width : k + (g + 1) * width]
            time_us, alg, bus = (number(x) for x in t[:3])
            wrong: int | None = None
            if self.wrong and not self.error_form and t[3].isdigit():
                wrong = int(t[3])
            timings.append(None if time_us is None or alg is None or bus is None else Timing(time_us, alg, bus, wrong))
        timings += [None] * (self.groups - groups)
        return int(tokens[0]), int(tokens[1]), tokens[2], redop, root, timings


def _guess_op(rows: list[tuple[int, int, str, str, int]], nranks: int | None) -> tuple[Op, str]:
    """The op from the columns where the program's name was not printed, and what was guessed."""
    if not rows:
        return "all_reduce", "the program is not named"
    size, count, dtype, redop, root = rows[-1]
    per = size // max(count * ELEMENT_BYTES.get(dtype, 4), 1)
    chunked = per > 1 or (nranks is not None and nranks > 1 and per == nranks)
    if root >= 0:
        op: Op = "reduce" if redop not in ("", "none") else "broadcast"
    elif redop in ("", "none"):
        op = "all_gather" if chunked else "all_to_all"
    else:
        op = "reduce_scatter" if chunked else "all_reduce"
    return op, f"the program is not named: {op} told from the columns"


def read(lines: list[str], i: int, piece: int) -> Block:
    """One nccl-tests run from line ``i``: header, rank lines, table and closing lines."""
    version = library = program = banner = ""
    threads = gpus = None
    ranks: list[RankInfo] = []
    table: _Table | None = None
    raw: list[tuple[int, int, str, str, int, list[Timing | None]]] = []
    clipped = False  # the rows hold their out-of-place half alone (the paste clipped at its right edge)
    avg = bounds = None
    cut = guessed_layout = ""
    j = i
    # the command line a paste often starts with names the program (back to the previous run's end)
    for back in range(i - 1, max(-1, i - 16), -1):
        if _AVG.match(lines[back]) or _CONCLUDED.match(lines[back]):
            break
        if m := _PROGRAM.search(lines[back]):
            program = m.group(1)
            break
    while j < len(lines):
        line = lines[j]
        if j > i and (table is not None or threads is not None) and (_VERSION.match(line) or _HEADER.match(line)):
            break  # the next run of the same paste
        if m := _VERSION.match(line):
            version = m.group(1)
            library = m.group(2) or ""
        elif (m := _BANNER.match(line)) and not library:
            banner = m.group(1)  # NCCL's own banner among the tool's lines (before nccl-tests printed its library)
        elif m := _START.match(line):
            program = m.group(1).removesuffix("_perf")
        elif m := _HEADER.match(line):
            threads, gpus = int(m.group(1)), int(m.group(2))
        elif m := _RANK.match(line):
            bus = m.group(5).strip().lower()
            ranks.append(
                RankInfo(
                    rank=int(m.group(1)),
                    local_rank=int(m.group(4)),
                    host=m.group(3),
                    pid=int(m.group(2)),
                    device=int(m.group(4)),
                    bus_id=f"{bus}.0" if bus.count(":") == 2 else None,
                    device_name=m.group(6).strip(),
                )
            )
        elif _COLUMNS.match(line):
            table = _Table(line)
        elif (_BOUNDS.match(line) or _AVG.match(line)) and avg is not None:
            break  # a second closing: the ends of several runs pasted together (each process printed its own)
        elif m := _BOUNDS.match(line):
            bounds = int(m.group(1))
        elif m := _AVG.match(line):
            avg = number(m.group(1))
        elif m := _CONCLUDED.match(line):
            program = program or (m.group(1) or "").removesuffix("_perf")  # 2.14+ names it here too
            j += 1
            break
        elif table is None and _ROW_START.match(line) and not raw:
            table = _Table.from_row(cells(line))
            guessed_layout = "the paste starts inside the table (no header): columns told from the rows"
            continue
        elif table is not None and not raw and _UNITS.match(line):
            pass
        elif table is not None and not line.startswith("#") and line.strip() and not _NCCL_LINE.search(line):
            tokens = cells(line)
            got = table.row(tokens)
            if got is None and table.half(tokens):  # a half row among half rows: the paste's right edge clipped them
                nxt = cells(lines[j + 1]) if j + 1 < len(lines) else []
                if clipped or table.half(nxt):
                    got, clipped = table.row(tokens, half=True), True
            if got is None and tokens and tokens[0].isdigit() and len(tokens) < table.fields:
                nxt = cells(lines[j + 1]) if j + 1 < len(lines) else []
                if nxt and len(tokens) + len(nxt) <= table.fields + 1 and not nxt[0].startswith("#"):
                    got = table.row(tokens + nxt)  # a row the paste wrapped onto two lines
                    if got is not None:
                        j += 1
                if got is None:
                    cut = f"the table ends inside the row of {tokens[0]} B"
                    j += 1
                    break
            if got is None:
                break  # text after the table that is not the tool's
            raw.append(got)
        elif avg is not None and line.strip() and not line.startswith("#") and not _NCCL_LINE.search(line):
            break
        elif table is None and ranks and _RANK.match(lines[j - 1]) and _WRAPPED_NAME.match(line):
            last = ranks.pop()  # a rank line a narrow terminal wrapped inside the GPU's name
            ranks.append(replace(last, device_name=f"{last.device_name} {line.strip()}"))
        elif table is None and line.strip() and not _OWN.match(line) and not _NCCL_LINE.search(line):
            break  # the output ends before its table: what follows is something else
        j += 1
    # Every rank prints its line; processes started without MPI each print "Rank 0" (a world of one each).
    nranks = max(r.rank for r in ranks) + 1 if ranks else (threads or 1) * (gpus or 1) if threads else None
    op = BINARY_TO_OP.get(program)
    guessed = ""
    if op is None and program:
        # gather, scatter, alltoallv, hypercube: read, but their rows are of no op the rules know
        guessed = f"{program}_perf's rows are not kept (an op topodoctor does not judge)"
    elif op is None and raw:
        op, guessed = _guess_op([r[:5] for r in raw], nranks)
    rows = tuple(
        Row(
            op,
            size,
            count,
            dtype,
            redop or SPECS[op].redop,
            root,
            timings[0],
            timings[1] if len(timings) > 1 else None,
        )
        for size, count, dtype, redop, root, timings in raw
        if op is not None
    )
    if not cut:
        if table is None and avg is not None:
            cut = "the Avg bus bandwidth line alone (no table)"
        elif table is None:
            cut = "no table: the output ends before the column header"
        elif not raw:
            cut = "the table has no row"
        elif avg is None:
            cut = f"the table ends after the row of {raw[-1][0]} B (no Avg bus bandwidth line)"
    halves = "every row's in-place half cut (the paste's right edge): out-of-place figures alone" if clipped else ""
    cut = "; ".join(x for x in (guessed_layout, cut, halves, guessed) if x)
    hosts = {r.host for r in ranks}
    parts = Parts()
    parts.collectives.append(
        CollectiveRun(
            piece=piece,
            op=op or program,
            rows=rows,
            ranks=tuple(ranks),
            nranks=nranks,
            nodes=len(hosts) or None,
            threads=threads,
            gpus_per_thread=gpus,
            avg_busbw_gbps=avg,
            out_of_bounds=bounds,
            nccl_version=_library(library) or banner,
            test_version=version,
        )
    )
    for r in ranks:
        bus = r.bus_id.upper() if r.bus_id else ""
        parts.gpus.append(
            GpuSeen(piece, r.device or 0, "cuda", r.host, r.device_name, f"0000{bus}" if bus.count(":") == 2 else "")
        )
    while j > i + 1 and (not lines[j - 1].strip() or _NCCL_LINE.search(lines[j - 1])):
        j -= 1  # NCCL's lines after the table are the NCCL log's piece, not this one
    return Block("nccl-tests", i, j, parts, version, cut)


def _library(code: str) -> str:
    """nccl-library=22809 -> 2.28.9 (NCCL_VERSION_CODE: major*10000 + minor*100 + patch)."""
    if not code.isdigit():
        return ""
    n = int(code)
    if n < 10000:  # before 2.9 the code was major*1000 + minor*100 + patch
        return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"
    return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"


def nccl_tests_json(doc: dict[str, Any], source: str, piece: int) -> Parts:
    """nccl-tests' ``-J`` document (read by ``model.collectives``, as ``collectives --from`` reads it),
    with its closing figures and the variables the run had."""
    res = from_nccl_tests(doc, source)
    avg, bounds = doc.get("average_bus_bandwidth"), doc.get("out_of_bounds")
    parts = Parts()
    parts.collectives.append(
        CollectiveRun(
            piece,
            res.rows[0].op if res.rows else str(res.settings.get("program", "")).removesuffix("_perf"),
            res.rows,
            res.ranks,
            res.world_size,
            len(res.nodes) or None,
            avg_busbw_gbps=number(str(avg.get("bandwidth"))) if isinstance(avg, dict) else None,
            out_of_bounds=bounds.get("count")
            if isinstance(bounds, dict) and isinstance(bounds.get("count"), int)
            else None,
            nccl_version=_library(str(doc.get("nccl_version", ""))),
        )
    )
    for r in res.ranks:
        bus = f"0000{r.bus_id.upper()}" if r.bus_id else ""
        parts.gpus.append(GpuSeen(piece, r.device or 0, "cuda", r.host, r.device_name, bus))
    parts.settings += [EvidenceSetting(piece, k, v, "nccl-tests -J env") for k, v in res.env.items()]
    return parts
