"""A GPU without peer-to-peer over PCIe (GeForce) named in the reporter's sentences with no figure: said at
info to copy through host memory, normal for it, with what to expect. Wording of NVIDIA/nccl#1309 ("Dual
4090 bandwidth slower with PCIe", its figures posted as images)."""

from __future__ import annotations

from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding

POST = (
    "Dual 4090 bandwidth slower with PCIe\n\n"
    "![4090topo](https://github.com/NVIDIA/nccl/assets/36131678/8cdb18e8-31f9-4777-94df-1d5ef38b0305)\n\n"
    "As the graph above shows, the topo between GPU0 and GPU3 is SYS,  and PIX between GPU2 and GPU3. I'm "
    "wondering why the bandwidth between GPU2 and GPU3 is much slower than the other?\n"
)


def findings(text: str) -> tuple[Finding, ...]:
    got = read_input("post.txt", text)
    assert not got.unreadable, got.unreadable
    return judge(join([got]))


def test_a_geforce_pair_copies_through_host_memory_and_that_is_normal() -> None:
    got = findings(POST)
    assert all(f.severity == "info" for f in got), [(f.code, f.severity) for f in got]
    p2p = [f for f in got if f.code == "TD021" and f.subject == "p2p"]
    assert len(p2p) == 1
    f = p2p[0]
    assert f.evidence["gpu_model"] == "RTX 4090" and f.evidence["p2p_pcie"] is False
    assert "no peer-to-peer" in f.message and "host memory" in f.message and "PIX" in f.message
    assert "GPUs under one PCIe switch" not in f.fix


def test_a_gpu_with_peer_to_peer_asked_about_gets_what_it_should_reach() -> None:
    """The same question of two GPUs that have peer-to-peer: no figure to judge, so the answer is what the
    hardware gives and the run that measures it (TD987, information), never a warning on the words."""
    got = findings(POST.replace("Dual 4090", "Dual A100"))
    assert all(f.severity == "info" for f in got), [(f.code, f.severity) for f in got]
    (f,) = [f for f in got if f.code == "TD987"]
    assert "2 x A100" in f.message and "all_reduce_perf -b 8 -e 8G -f 2 -g 2" in f.message
    assert not any(f.code == "TD021" and f.subject == "p2p" for f in got)
