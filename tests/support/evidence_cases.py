"""Evidence built by hand from text people posted (each test names its thread): the few lines of each
kind split the way the readers do, so the judgement can be tested apart from them."""

from __future__ import annotations

import re

from topodoctor.model.collectives import Connection, NcclAccount, RankInfo, Row, Timing
from topodoctor.model.evidence import (
    CollectiveRun,
    CopyMatrix,
    Evidence,
    EvidenceSetting,
    GpuSeen,
    NcclLine,
    NicSeen,
    PairSeen,
    Piece,
)

_PREFIX = re.compile(r"^(?P<host>[\w.-]+):\d+:\d+ \[(?P<dev>\d+)\] (?:\S+ )?(?P<text>NCCL .*)$")
_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[(\S+)\]\s+(.*)$")


def rows(op: str, text: str) -> tuple[Row, ...]:
    """nccl-tests' table rows (size count type redop root time algbw busbw wrong, twice), root optional."""
    out = []
    for line in text.strip().splitlines():
        f = line.split()
        if len(f) == 12:  # no root column
            f = [*f[:4], "-1", *f[4:]]
        size, count, dtype, redop, root = int(f[0]), int(f[1]), f[2], f[3], int(f[4])
        oop = Timing(float(f[5]), float(f[6]), float(f[7]), None)
        ip = Timing(float(f[9]), float(f[10]), float(f[11]), None)
        out.append(Row(op, size, count, dtype, redop, root, oop, ip))  # type: ignore[arg-type]
    return tuple(out)


def ranks(text: str) -> tuple[RankInfo, ...]:
    """nccl-tests' "#  Rank  N Group 0 Pid P on HOST device D [BUS] NAME" lines."""
    out = []
    for line in text.strip().splitlines():
        m = _RANK.search(line)
        assert m is not None, line
        r, host, dev, bus, name = m.groups()
        out.append(RankInfo(int(r), int(dev), host, 0, int(dev), bus, name.strip(), host))
    return tuple(out)


def run(op: str, table: str, rank_lines: str, piece: int = 0, version: str = "") -> CollectiveRun:
    """One nccl-tests binary's output."""
    rk = ranks(rank_lines)
    hosts = {r.host for r in rk}
    return CollectiveRun(piece, op, rows(op, table), rk, len(rk), len(hosts), nccl_version=version)


def topo(text: str, piece: int = 0, host: str = "") -> tuple[PairSeen, ...]:
    """nvidia-smi topo -m's matrix (header row then one row per device; affinity columns ignored)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    names = lines[0].split()
    names = [n for n in names if re.match(r"^(GPU|NIC|mlx)", n)]
    out = []
    for line in lines[1:]:
        cells = line.split()
        if not cells or not re.match(r"^(GPU|NIC|mlx)", cells[0]):
            continue
        for b, cell in zip(names, cells[1 : 1 + len(names)]):
            out.append(PairSeen(piece, cells[0], b, cell, host=host))
    return tuple(out)


def nccl_lines(text: str, piece: int = 0) -> tuple[NcclLine, ...]:
    """NCCL's log lines with their host:pid:tid [dev] prefix."""
    out = []
    for i, line in enumerate(text.strip().splitlines(), 1):
        m = _PREFIX.match(line.strip())
        if m:
            out.append(NcclLine(piece, i, m.group("text"), m.group("host"), int(m.group("dev"))))
    return tuple(out)


def matrix(text: str, testcase: str, direction: str, p2p: bool | None, piece: int = 0) -> CopyMatrix:
    """One p2pBandwidthLatencyTest matrix ("   D\\D 0 1 ..." then one row per device)."""
    lines = [ln.split() for ln in text.strip().splitlines()]
    cols = tuple(lines[0][1:])
    body = [ln for ln in lines[1:] if ln]
    rws = tuple(ln[0] for ln in body)
    vals = tuple(tuple(float(v) for v in ln[1:]) for ln in body)
    return CopyMatrix(piece, "p2pBandwidthLatencyTest", testcase, direction, p2p, "GB/s", rws, cols, vals)  # type: ignore[arg-type]


def evidence(*parts: object, pieces: int = 3, **more: object) -> Evidence:
    """Evidence of the parts given (each a tuple of one kind, or one CollectiveRun / CopyMatrix)."""
    kinds: dict[str, list[object]] = {}
    for p in parts:
        items = p if isinstance(p, tuple) else (p,)
        for it in items:
            key = {
                CollectiveRun: "collectives",
                PairSeen: "pairs",
                NcclLine: "nccl_lines",
                CopyMatrix: "copies",
                GpuSeen: "gpus",
                NicSeen: "nics",
                EvidenceSetting: "settings",
            }[type(it)]
            kinds.setdefault(key, []).append(it)
    ps = tuple(Piece("nccl-log", f"input{i}.txt", 1, 100) for i in range(pieces))
    return Evidence(pieces=ps, **{k: tuple(v) for k, v in kinds.items()}, **more)  # type: ignore[arg-type]


def account(
    version: str = "", nodes: int | None = 1, channels: int | None = None, nvls_channels: int | None = None,
    connections: tuple[Connection, ...] = (), env: dict[str, str] | None = None,
) -> NcclAccount:  # fmt: skip
    """NCCL's account of a log, with what a test needs set."""
    return NcclAccount(
        version, None, nodes, channels, None, nvls_channels, None, None, connections, (), (), env or {}, 1
    )
