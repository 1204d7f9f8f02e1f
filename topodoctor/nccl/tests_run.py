"""What an nccl-tests run in a log measured, read from its text: the test (the ``*_perf`` binary its command line or
header names), the largest size its table reached and the GPUs each process drives (``-g N``, the header's
``nGpus``). A known bug of some releases shows only in such a run (``nccl.known_bugs``). And processes that each
print themselves as rank 0 of their own run (``lone_ranks``). Text in, plain data out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from topodoctor.nccl.grammar import NT_RANK

_BINARY = re.compile(
    r"\b(?P<op>all_gather|all_reduce|alltoall|broadcast|reduce_scatter|reduce|sendrecv|scatter|gather|hypercube)_perf"
)
_GPUS = re.compile(r"(?:^|\s)-g\s*(?P<n>\d+)\b|\bnGpus:?\s+(?P<h>\d+)")
# a result row: size in bytes, count, type (the redop and root columns, where printed, follow)
_ROW = re.compile(
    r"^\s*(?P<size>\d{1,15})\s+\d+\s+(?:float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64|fp8\w*)\b"
)


@dataclass(frozen=True)
class TestsRun:
    """One nccl-tests run as the log shows it ("" and 0 where it does not say)."""

    op: str = ""  # all_gather, all_reduce, ...
    max_bytes: int = 0  # the largest size of its table
    gpus_per_process: int = 0  # -g N (nGpus in the header)


def tests_run(lines: Sequence[str]) -> TestsRun:
    """The nccl-tests run a log shows (an empty ``TestsRun`` for a log of no such run)."""
    op = next((m["op"] for ln in lines if "_perf" in ln and (m := _BINARY.search(ln))), "")
    gpus = next((int(m["n"] or m["h"]) for ln in lines if (m := _GPUS.search(ln))), 0)
    sizes = [int(m["size"]) for ln in lines if (m := _ROW.match(ln))]
    return TestsRun(op, max(sizes, default=0), gpus)


def lone_ranks(lines: Sequence[str]) -> tuple[int, int, int] | None:
    """(first line, processes, hosts) where several processes of nccl-tests each print themselves as rank 0 of their
    own run (a `Using devices` line per process, all `Rank 0`): they were not started as one MPI job; None else."""
    ranks = [(i, m.group(1), m.group(2), m.group(3)) for i, ln in enumerate(lines) if (m := NT_RANK.match(ln))]
    if any(rank != "0" for _, rank, _, _ in ranks):
        return None  # a joined run lists its other ranks (two runs pasted one after the other do too)
    pids = {(host, pid) for _, _, pid, host in ranks}
    hosts = len({host for host, _ in pids})
    if len(pids) < 3 and hosts < 2:
        return None  # two runs of one process each, pasted together, read the same
    return ranks[0][0], len(pids), hosts
