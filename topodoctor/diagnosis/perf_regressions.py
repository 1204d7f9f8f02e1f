"""NCCL releases with a performance regression users reported and NCCL's maintainers confirmed or
fixed: data only, each with its source. (Failures, crashes and hangs tied to a version are another
table: nccl/known_bugs_table.py.) A regression is a candidate, never proof: the finding says to compare
with the release named as unaffected, or to upgrade to the release that fixed it.

Built from NCCL's release notes 2.18 - 2.30 (the tag messages of v2.18.1-1 .. v2.30.7-1: their "Fix ...
performance" lines) and the source each fix changed; a regression users found that no release note names
(the 64 KiB NVLSTree chunks) is dated by the source itself. A regression is matched by its version range
and by its symptom (the algorithm, the setting, the op, the hardware, the scale the evidence shows);
where the evidence names no version, one whose symptom is specific (an algorithm or a setting) is still a
candidate, with the version asked for.
"""

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
    fixed: str = ""  # the first release without it ("" where no release dropped it)
    algo: str = ""  # NCCL's algorithm it is in (NCCL_ALGO's name): matched where the evidence names it
    setting: tuple[str, str] = ("", "")  # a variable and value it needs (NCCL_CROSS_NIC=1)
    min_nodes: int = 0  # the fewest nodes it shows on
    ops: tuple[str, ...] = ()  # the ops it slows; empty: any
    models: tuple[str, ...] = ()  # the GPU models (the model table's names' start) it showed on; empty: any
    workaround: str = ""  # what avoids it without another release

    @property
    def span(self) -> str:
        """``2.19.3 - 2.30.7`` (one release alone: ``2.18.1``)."""
        a, b = ".".join(map(str, self.first)), ".".join(map(str, self.last))
        return a if a == b else f"{a} - {b}"

    @property
    def specific(self) -> bool:
        """Whether its symptom is specific enough to name it where the evidence shows no version."""
        return bool(self.algo or self.setting[0])


# NCCL's log line for a graph search that found no path (grammar.SEARCH_FAILED), for pattern 1: the balanced tree
TREE_SEARCH_FAILED = "Could not find a path for pattern 1"

REGRESSIONS: tuple[Regression, ...] = (
    Regression(
        (2, 19, 3), (2, 30, 7), "NVLSTree all_reduce across 4 nodes or more", "large",
        "NVLSTree moves 64 KiB chunks on 4 nodes or more (2.19.3's enqueue.cc: `if (nNodes >= 4) chunkSize = "
        "65536`; transport/nvls.cc at 2.30.7 keeps it as the default): on 8 x P5 (8 x H100 each) a 4 GiB "
        "all_reduce fell from 280 to 104 GB/s busbw, and back to 279 without the cap (NVIDIA/nccl pull request 1112)",
        "2.19.1", "https://github.com/NVIDIA/nccl/pull/1112 and src/enqueue.cc at v2.19.3-1",
        ("Hopper", "Blackwell"), True, "", "", "NVLSTree", ("", ""), 4, ("all_reduce",),
        (), "NCCL_ALGO=^NVLSTree (rings and trees across the nodes), or from 2.20.3 NCCL_NVLSTREE_MAX_CHUNKSIZE "
        "above 65536 (its default, -2, keeps the 64 KiB cap on 4 nodes or more)",
    ),
    Regression(
        (2, 18, 1), (2, 21, 5), "NVLS across nodes with more than one NIC per GPU", "large",
        "the NVLS graph search mishandled more than one NIC per GPU (2.22.3's notes: 'Fix NVLS graph search when "
        "we have more than one NIC per GPU')",
        "2.22.3", "NCCL 2.22.3-1 release notes (tag v2.22.3-1)", ("Hopper",), True, "", "2.22.3", "NVLSTree",
        workaround="NCCL_ALGO=^NVLSTree",
    ),
    Regression(
        (2, 18, 1), (2, 18, 3), "NVLS on one node", "large",
        "NVLS's graph search (2.18.5's notes: 'Fix NVLS search (issue #931)')",
        "2.18.5", "NCCL 2.18.5-1 release notes (tag v2.18.5-1), https://github.com/NVIDIA/nccl/issues/931",
        ("Hopper",), None, "", "2.18.5", "NVLS", workaround="NCCL_NVLS_ENABLE=0",
    ),
    Regression(
        (2, 18, 1), (2, 18, 1), "DGX H800", "large",
        "lower bandwidth on DGX H800 (2.18.3's notes: 'Fix performance for DGX H800')",
        "2.18.3", "NCCL 2.18.3-1 release notes (tag v2.18.3-1)", ("Hopper",), None, "", "2.18.3",
        models=("H800",),
    ),
    Regression(
        (2, 18, 1), (2, 19, 1), "H800 and H100", "large",
        "NCCL's tuning of H800 and H100 systems, which 2.19.3 changed (2.19.3's notes: 'H800/H100 fixes and tuning'; "
        "2.19.1's: 'Disable network flush by default on H100')",
        "2.19.3", "NCCL 2.19.3-1 and 2.19.1-1 release notes (tags v2.19.3-1, v2.19.1-1)", ("Hopper",), None, "",
        "2.19.3", models=("H800", "H100"),
    ),
    Regression(
        (2, 18, 1), (2, 18, 1), "all_to_all at scale with more than one NIC per GPU", "large",
        "all_to_all slower at scale with more than one NIC per GPU (2.18.3's notes: 'Fix performance of alltoall at "
        "scale with more than one NIC per GPU')",
        "2.18.3", "NCCL 2.18.3-1 release notes (tag v2.18.3-1)", (), True, "", "2.18.3", ops=("all_to_all",),
    ),
    Regression(
        (2, 18, 1), (2, 23, 3), "NCCL_CROSS_NIC=1 on hosts of 1 GPU and 1 NIC per PCI switch", "large",
        "the tree search forced the balanced tree, which disables LL128 (2.23.4's notes: 'Fix tree graph search "
        "when NCCL_CROSS_NIC is set to 1')",
        "2.23.4", "NCCL 2.23.4-1 release notes (tag v2.23.4-1)", (), True, "", "2.23.4", "",
        ("NCCL_CROSS_NIC", "1"), workaround="NCCL_CROSS_NIC unset (its default, 2)",
    ),
    Regression(
        (2, 20, 3), (2, 26, 1), "NCCL_CROSS_NIC=1 across nodes", "large",
        "NCCL alternated rings without need, breaking the GPU-NIC pairs (2.20.3 added alternating rings; 2.26.2's "
        "notes: 'Fix a performance regression when using NCCL_CROSS_NIC=1')",
        "2.26.2", "NCCL 2.26.2-1 release notes (tag v2.26.2-1)", (), True, "", "2.26.2", "",
        ("NCCL_CROSS_NIC", "1"), workaround="NCCL_CROSS_NIC unset (its default, 2)",
    ),
    Regression(
        (2, 25, 1), (2, 27, 3), "DGX B200 across nodes", "large",
        "the network bandwidths given to the graph search on DGX B200 (2.27.5's notes: 'Optimize the network "
        "performance on DGX B200 systems by adjusting the bandwidths provided to the graph search algorithm')",
        "2.27.5", "NCCL 2.27.5-1 release notes (tag v2.27.5-1)", ("Blackwell",), True, "", "2.27.5",
        models=("B200",),
    ),
    Regression(
        (2, 25, 1), (2, 28, 9), "GPUs before Hopper across nodes", "large",
        "the tree search finds no path (pattern 1, the balanced tree) and NCCL falls back to one channel for every "
        "collective: 2.25.1 bounds the search's GPU-NIC path type by the GPUs' farthest NIC (search.cc "
        "ncclTopoGetGpuMaxPath), which a balanced tree coming back through PHB or SYS exceeds; 2.29.2 lifts the "
        "bound before Hopper ('Ampere relies on BALANCED_TREE which sometimes needs to come back through SYS or PHB')",
        "2.24.3 or 2.29.2", "NCCL's source, src/graph/search.cc at v2.25.1-1 and v2.29.2-1",
        ("Volta", "Turing", "Ampere", "Ada"), True, TREE_SEARCH_FAILED, "2.29.2",
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
        "2.29.3 or 2.30.7", "https://github.com/NVIDIA/nccl/issues/2058", ("Hopper",), None, "", "2.30.7",
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
