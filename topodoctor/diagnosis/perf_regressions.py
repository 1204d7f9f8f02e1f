"""NCCL releases with a performance regression users reported and NCCL's maintainers confirmed or
fixed: data only, each with its source. (Failures, crashes and hangs tied to a version are another
table: nccl/known_bugs.py.) A regression is a candidate, never proof: the finding says to compare
with the release named as unaffected."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Regression:
    """A range of NCCL releases slower than their neighbours on some hardware, at some sizes."""

    first: tuple[int, int, int]  # the first release affected
    last: tuple[int, int, int]  # the last release affected
    where: str  # the hardware or setting it showed on
    sizes: str  # "large" (the bandwidth-bound sizes this judges), "small" (latency-bound)
    what: str
    unaffected: str
    source: str
    arch: tuple[str, ...] = ()  # GPU architectures it showed on; empty: any
    multinode: bool | None = None  # True: only across nodes
    sign: str = ""  # what NCCL's log shows of it; a regression with a sign is named only where the log shows it


# NCCL's log line for a graph search that found no path (grammar.SEARCH_FAILED), for pattern 1: the balanced tree
TREE_SEARCH_FAILED = "Could not find a path for pattern 1"

REGRESSIONS: tuple[Regression, ...] = (
    Regression(
        (2, 25, 1), (2, 28, 9), "GPUs before Hopper across nodes", "large",
        "the tree search finds no path (pattern 1, the balanced tree) and NCCL falls back to one channel for every "
        "collective: 2.25.1 bounds the search's GPU-NIC path type by the GPUs' farthest NIC (search.cc "
        "ncclTopoGetGpuMaxPath), which a balanced tree coming back through PHB or SYS exceeds; 2.29.2 lifts the "
        "bound before Hopper ('Ampere relies on BALANCED_TREE which sometimes needs to come back through SYS or PHB')",
        "2.24.3 or 2.29.2", "NCCL's source, src/graph/search.cc at v2.25.1-1 and v2.29.2-1",
        ("Volta", "Turing", "Ampere", "Ada"), True, TREE_SEARCH_FAILED,
    ),
    Regression(
        (2, 16, 2), (2, 16, 5), "PCIe GPUs in pairs joined by NVLink bridges on AMD hosts", "large",
        "all_reduce, all_gather and reduce_scatter about 10x slower than with 2.14.3 / 2.15.5 on 8 x A40 with "
        "4 NVLink bridges (2.16.2's release notes: 'Reduce inter-socket bandwidth on AMD CPUs')",
        "2.15.5", "https://github.com/NVIDIA/nccl/issues/770", ("Ampere",),
    ),
    Regression(
        (2, 29, 0), (2, 29, 9), "8 x H100 on one node", "small",
        "small all_reduce sizes slower than 2.28 (latency-bound sizes only)",
        "2.28.9", "https://github.com/NVIDIA/nccl/issues/2094", ("Hopper",),
    ),
    Regression(
        (2, 29, 7), (2, 30, 4), "Hopper GPUs, symmetric-memory kernels (registered windows: nccl-tests -R 2)", "small",
        "all_reduce, all_gather and reduce_scatter slower at small and medium sizes than 2.29.2: the receive loads "
        "of the LL all-to-all became ld.acquire.sys (ll_a2a__funcs.h recvUnrolled; ld.relaxed.sys from 2.30.7)",
        "2.29.3 or 2.30.7", "https://github.com/NVIDIA/nccl/issues/2058", ("Hopper",),
    ),
    Regression(
        (2, 30, 5), (2, 30, 5), "H100 NVL on AMD hosts, across nodes", "small",
        "all_reduce around 1 MB about 60 % slower than the release before",
        "2.29.7", "https://github.com/NVIDIA/nccl/issues/2441", ("Hopper",), True,
    ),
)  # fmt: skip

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def version_of(text: str) -> tuple[int, int, int] | None:
    """2.28.9+cuda13.0 -> (2, 28, 9); nccl-tests' "nccl-library=23005" form -> (2, 30, 5) (the library
    that ran, not the headers it was built with)."""
    text = text or ""
    digits = re.search(r"nccl-library=(\d{5})\b", text) or re.search(r"^\s*(\d{5})\s*$", text)
    if digits is not None:
        n = int(digits.group(1))
        return n // 10000, (n // 100) % 100, n % 100
    if m := _VERSION.search(text):
        return int(m.group(1)), int(m.group(2)), int(m.group(3))
    return None


def regressions_of(version: str, arch: str = "", multinode: bool | None = None) -> list[Regression]:
    """The regressions a release is in, filtered by what the evidence shows of the hardware."""
    v = version_of(version)
    if v is None:
        return []
    return [
        r for r in REGRESSIONS
        if r.first <= v <= r.last and (not r.arch or not arch or arch in r.arch)
        and (r.multinode is None or multinode is None or r.multinode == multinode)
    ]  # fmt: skip
