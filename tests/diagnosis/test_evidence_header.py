"""An nccl-tests table posted without its header: not judged on a guess of the nodes, its header lines asked
for; placed, and judged, where the rest of the evidence says the nodes, the ranks and (between nodes) the
NICs' rate."""

# ruff: noqa: E501 (the tools' lines are kept as they were printed)
from __future__ import annotations

from pathlib import Path

from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding

ROOT = Path(__file__).resolve().parents[2]

# nccl#1411 (https://github.com/NVIDIA/nccl/issues/1411): CUDA_VISIBLE_DEVICES=0,2,4,6, NCCL_CROSS_NIC=0, the
# table as posted, from under its column header on
TABLE = """#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     2097152        524288     float     sum      -1    122.3   17.15   30.02      0    88.53   23.69   41.46      0
     4194304       1048576     float     sum      -1    103.1   40.70   71.22      0    101.5   41.30   72.28      0
     8388608       2097152     float     sum      -1    157.1   53.40   93.45      0    158.1   53.06   92.85      0
    16777216       4194304     float     sum      -1    244.7   68.55  119.97      0    242.9   69.08  120.88      0
    33554432       8388608     float     sum      -1    432.4   77.60  135.80      0    434.0   77.32  135.31      0
    67108864      16777216     float     sum      -1    825.4   81.31  142.28      0    824.7   81.38  142.41      0
   134217728      33554432     float     sum      -1   1493.1   89.89  157.31      0   1490.6   90.04  157.57      0
"""
# nccl#1357 (https://github.com/NVIDIA/nccl/issues/1357), the same reporter's cluster of two 8 x H100 nodes
# (qh100-gpu19, qh100-gpu20): NCCL's init lines with its count of ranks and nodes
NCCL_COUNT = """qh100-gpu19:49357:49418 [3] NCCL INFO comm 0x5555e0b324c0 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0
qh100-gpu19:49355:49414 [1] NCCL INFO comm 0x55bbc86693d0 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1 MNNVL 0
"""

# nccl#1357's `nvidia-smi topo -m` of a node, as the index holds it (cut inside GPU7's row)
TOPO = """$ nvidia-smi topo -m

        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    NIC0    NIC1    NIC2    NIC3    NIC4    NIC5    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV18    NV18    NV18    NV18    NV18    NV18    NV18    PIX     SYS     SYS     SYS     SYS     SYS     0-47,96-143     0               N/A
GPU1    NV18     X      NV18    NV18    NV18    NV18    NV18    NV18    SYS     SYS     SYS     SYS     SYS     SYS     0-47,96-143     0               N/A
GPU2    NV18    NV18     X      NV18    NV18    NV18    NV18    NV18    SYS     PIX     SYS     SYS     SYS     SYS     0-47,96-143     0               N/A
GPU3    NV18    NV18    NV18     X      NV18    NV18    NV18    NV18    SYS     SYS     SYS     SYS     SYS     SYS     0-47,96-143     0               N/A
GPU4    NV18    NV18    NV18    NV18     X      NV18    NV18    NV18    SYS     SYS     PIX     SYS     SYS     SYS     48-95,144-191   1               N/A
GPU5    NV18    NV18    NV18    NV18    NV18     X      NV18    NV18    SYS     SYS     SYS     SYS     SYS     SYS     48-95,144-191   1               N/A
GPU6    NV18    NV18    NV18    NV18    NV18    NV18     X      NV18    SYS     SYS     SYS     PIX     SYS     SYS     48-95,144-191   1               N/A
GPU7    NV18    NV18    NV18    NV18    NV
"""


def _about_table(*texts: str) -> list[Finding]:
    found = judge(join([read_input(f"evidence-{k}.txt", t) for k, t in enumerate(texts)]))
    return [f for f in found if f.subject == "all_reduce"]


def test_a_table_without_its_header_asks_for_the_header_lines() -> None:
    """The table alone: how many ranks on how many nodes is unknown, so no verdict, and the header lines
    (nThread / nGpus, the Rank lines) are what is asked for."""
    (f,) = _about_table(TABLE)
    assert (f.code, f.severity) == ("TD022", "info")
    assert "not judged" in f.message and "`# nThread N nGpus N`" in f.message and "`#  Rank N" in f.message
    assert f.evidence["post"] and "Using devices" in f.evidence["post"][0]  # type: ignore[index]


def test_nccls_count_of_nodes_without_the_nics_rate_says_what_is_known_and_asks_for_both() -> None:
    """With NCCL's `nRanks 16 nNodes 2`: the run is placed on two nodes, but between nodes the figure needs
    the NICs' rate, which nothing shows: still not judged, saying what is known."""
    (f,) = _about_table(TABLE, NCCL_COUNT)
    assert (f.code, f.severity) == ("TD022", "info")
    assert "nNodes 2" in f.message and "nRanks 16" in f.message and "`ibstat`" in f.message


def test_nodes_ranks_and_the_nics_listed_elsewhere_let_the_table_be_judged() -> None:
    """With an `ibstat` listing of a 400 Gb/s ConnectX-7 port (fixtures/evidence/ibstat-cx7-ndr-one-ca.txt) and
    the node's topo -m beside NCCL's count, the header-less table is placed on two nodes and judged against
    the NICs (157 GB/s over a 50 GB/s port on two nodes is the tree's figure, as nccl-tests#196 settled), its
    quote saying where the nodes and ranks came from."""
    ibstat = (ROOT / "fixtures/evidence/ibstat-cx7-ndr-one-ca.txt").read_text()
    (f,) = _about_table(TABLE, NCCL_COUNT, ibstat, TOPO)
    assert (f.code, f.severity) == ("TD021", "info") and "the NICs' rate" in f.message
    assert "(no header lines: NCCL's log: nNodes 2, NCCL's log: nRanks 16)" in str(f.evidence["seen_in"])
