""" "Normal for this hardware": real figures at what their GPUs give get an info finding with the figure
expected, and no cause."""

from __future__ import annotations

from evidence_cases import account, evidence, nccl_lines, run, topo
from tests_support_evidence import judge

from topodoctor.model.evidence import GpuSeen

# /work/shared/reference-outputs/h200-x4/nccl.txt: nccl-tests 2.19.6, NCCL 2.28.9, 4 x H200, NV18 (2026-11-22)
H200_X4_RANKS = """
#  Rank  0 Group  0 Pid   1941 on         vm device  0 [0000:00:06] NVIDIA H200
#  Rank  1 Group  0 Pid   1941 on         vm device  1 [0000:00:07] NVIDIA H200
#  Rank  2 Group  0 Pid   1941 on         vm device  2 [0000:00:08] NVIDIA H200
#  Rank  3 Group  0 Pid   1941 on         vm device  3 [0000:00:09] NVIDIA H200
"""
H200_X4_ALL_REDUCE = """
   536870912     134217728     float     sum      -1  2321.16  231.29  346.94       0  2320.18  231.39  347.09       0
  2147483648     536870912     float     sum      -1  8970.27  239.40  359.10       0  8950.71  239.92  359.89       0
"""
H200_X4_TOPO = """
        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV18    NV18    NV18    0-63    0               N/A
GPU1    NV18     X      NV18    NV18    0-63    0               N/A
GPU2    NV18    NV18     X      NV18    0-63    0               N/A
GPU3    NV18    NV18    NV18     X      0-63    0               N/A
"""


def _codes(findings: tuple[object, ...]) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in findings]  # type: ignore[attr-defined]


def test_h200_x4_all_reduce_is_normal_with_topo_m() -> None:
    """4 x H200 NVSwitch, all_reduce 359.9 GB/s at 2 GiB: the reference output of the lent x4 host."""
    ev = evidence(run("all_reduce", H200_X4_ALL_REDUCE, H200_X4_RANKS), topo(H200_X4_TOPO, piece=1))
    found = judge(ev)
    assert _codes(found) == [("TD021", "info")]
    f = found[0]
    assert f.subject == "all_reduce"
    assert 340 < f.evidence["expected_gbps"] < 360  # the topology's model: 18 x 20.6 GB/s filled to 360, ring 0.98
    assert "NV18 between every pair" in f.evidence["basis"]
    assert "normal for 4 x H200 SXM" in f.message


def test_h200_x8_from_the_gpu_model_alone() -> None:
    """8 x H200, all_reduce 363.17 GB/s at 2 GiB (reference-outputs/h200-x8/nccl.txt), no topo -m: the GPU
    model table's 18 NVLinks to NVSwitch is the basis."""
    ranks = "\n".join(
        f"#  Rank  {i} Group  0 Pid   2632 on         vm device  {i} [0000:00:0{6 + i}] NVIDIA H200" for i in range(8)
    )
    table = "  2147483648     536870912     float     sum      -1  10348.0  207.53  363.17       0  10356.9  207.35  362.86       0"  # noqa: E501
    found = judge(evidence(run("all_reduce", table, ranks)))
    assert _codes(found) == [("TD021", "info")]
    assert "the GPU model table (H200 SXM: 18 NVLinks)" in found[0].evidence["basis"]


def test_a_third_of_the_model_is_not_normal() -> None:
    """The same 4 x H200 table with its busbw cut to a third is not called normal (the judge can fail)."""
    slow = H200_X4_ALL_REDUCE.replace("359.10", "119.70").replace("359.89", "119.96").replace("346.94", "115.6")
    slow = slow.replace("347.09", "115.7")
    found = judge(evidence(run("all_reduce", slow, H200_X4_RANKS), topo(H200_X4_TOPO, piece=1)))
    assert all(f.code != "TD021" for f in found)
    assert found[0].severity in ("warning", "error")


def test_latency_bound_sizes_are_not_judged() -> None:
    """nccl-tests#293: two ranks run only up to 2 KiB; busbw there is latency, not bandwidth."""
    table = """
           8             2     float     sum      -1    20.37    0.00    0.00      0    19.47    0.00    0.00      0
        1024           256     float     sum      -1    20.77    0.05    0.05      0    20.74    0.05    0.05      0
    """
    ranks = """
#  Rank  0 Group  0 Pid   3985 on      test2 device  0 [0x81] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   3986 on      test2 device  1 [0x82] NVIDIA H100 80GB HBM3
"""
    found = judge(evidence(run("all_reduce", table, ranks)))
    assert _codes(found) == [("TD022", "info")]
    assert "latency-bound" in found[0].message


def test_zero_nvls_channels_on_a100_is_normal() -> None:
    """NCCL on A100 SXM4 builds 0 nvls channels (NVLS needs Hopper and an NVSwitch): nccl-tests#128's
    A100-SXM4-40GB host, NCCL's own count line as 2.18+ prints it."""
    acc = account("2.18.3", channels=24, nvls_channels=0)
    ev = evidence(GpuSeen(0, 0, name="A100-SXM4-40GB"), nccl=(acc,), nccl_pieces=(0,))
    found = judge(ev)
    assert ("TD021", "info") in _codes(found)
    assert any("0 nvls channels is normal on A100 SXM" in f.message for f in found)


def test_socket_network_on_one_node_is_normal() -> None:
    """One node whose channels all go via P2P: `Using network Socket` is what NCCL prints when it finds no
    RDMA device, and it carries nothing here (NVIDIA/nccl#1817's 8-GPU node, P2P/direct pointer lines)."""
    log = """
sh9-m27xf:3884994:3885022 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
sh9-m27xf:3884994:3885022 [0] NCCL INFO Using network Socket
sh9-m27xf:3884994:3885029 [7] NCCL INFO Channel 00/0 : 7[7] -> 6[6] via P2P/direct pointer
sh9-m27xf:3884994:3885023 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/direct pointer
"""
    found = judge(evidence(nccl_lines(log)))
    assert _codes(found) == [("TD021", "info")]
    assert "Using network Socket" in found[0].message and "P2P/direct" in found[0].message


def test_odd_evidence_is_judged_without_a_fault() -> None:
    """Partial and odd pastes: ragged matrices, zero figures, words where numbers go, a GPU with zero lanes.
    The judgement says less, never fails."""
    from topodoctor.model.evidence import CopyMatrix, Evidence, EvidenceSetting

    ragged = CopyMatrix(0, "nvbandwidth", "x", "unidirectional", True, "GB/s", ("0", "1", "a"), ("0", "1"),
                        ((None, 0.0), (5.0,), ()))  # fmt: skip
    ev = evidence(
        run("all_reduce", "  1073741824 268435456 float sum -1 0.0 0.00 0.00 0 0.0 0.00 0.00 0", H200_X4_RANKS),
        ragged,
        GpuSeen(0, 0, name="NVIDIA H200", pcie_gen=0, pcie_width=0, pcie_width_max=16, nvlinks_up=-1),
        EvidenceSetting(0, "NCCL_MAX_NCHANNELS", "abc"),
        EvidenceSetting(0, "NCCL_P2P_LEVEL", "7"),
        EvidenceSetting(0, "NCCL_PROTO", "^LL,,"),
    )
    assert all(f.severity in ("info", "warning", "error") for f in judge(ev))
    assert judge(Evidence()) == ()


NV12_PAIRS = """
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    CPU Affinity    NUMA Affinity
GPU0     X      NV12    NODE    NODE    SYS     SYS     SYS     SYS     0-31,64-95      0
GPU1    NV12     X      NODE    NODE    SYS     SYS     SYS     SYS     0-31,64-95      0
GPU2    NODE    NODE     X      NV12    SYS     SYS     SYS     SYS     0-31,64-95      0
GPU3    NODE    NODE    NV12     X      SYS     SYS     SYS     SYS     0-31,64-95      0
GPU4    SYS     SYS     SYS     SYS      X      NV12    NODE    NODE    32-63,96-127    1
GPU5    SYS     SYS     SYS     SYS     NV12     X      NODE    NODE    32-63,96-127    1
GPU6    SYS     SYS     SYS     SYS     NODE    NODE     X      NV12    32-63,96-127    1
GPU7    SYS     SYS     SYS     SYS     NODE    NODE    NV12     X      32-63,96-127    1
"""


def test_bridged_pairs_are_fast_and_a_third_gpu_crosses_pcie() -> None:
    """nccl-tests#178 (https://github.com/NVIDIA/nccl-tests/issues/178): A100 cards bridged in pairs (NV12),
    NODE / SYS between the pairs. On two GPUs (-t 2) busbw 208 GB/s; on three (-t 3) 20 GB/s: both what the
    hardware gives, the second because the ring must cross PCIe (the model name is the PCIe card's, inferred
    from NV12 pairs under NODE)."""
    name = "NVIDIA A100 80GB PCIe"

    def ranks(n: int) -> str:
        return "\n".join(f"#  Rank  {i} Group  0 Pid 1 on a100 device  {i} [0x{i + 1:02x}] {name}" for i in range(n))

    two = "  1073741824 268435456 float sum -1 5162 208.0 208.0 0 5162 208.0 208.0 0"
    found = judge(evidence(run("all_reduce", two, ranks(2)), topo(NV12_PAIRS, piece=1)))
    assert _codes(found) == [("TD021", "info")] and "12 NVLinks to its peers" in found[0].evidence["basis"]
    three = "  1073741824 268435456 float sum -1 71582 15.0 20.0 0 71582 15.0 20.0 0"
    found = judge(evidence(run("all_reduce", three, ranks(3)), topo(NV12_PAIRS, piece=1)))
    assert sorted(_codes(found)) == [("TD021", "info"), ("TD032", "info")]
    assert not any(f.severity != "info" for f in found)


def test_the_run_s_gpus_are_found_by_bus_id() -> None:
    """A two-rank run on the bridged-pairs host of nccl-tests#178: on GPUs 0 and 2 (CUDA_VISIBLE_DEVICES=0,2,
    nccl-tests printing each rank's bus as [0x..]) 20 GB/s is the NODE pair's figure; on GPUs 0 and 1 the
    same 20 GB/s is a tenth of their NV12 bridge."""
    name = "NVIDIA A100 80GB PCIe"
    gpus = tuple(GpuSeen(2, i, name=name, bus_id=f"00000000:{0x10 + i:02X}:00.0") for i in range(8))
    row = "  1073741824 268435456 float sum -1 53687 20.0 20.0 0 53687 20.0 20.0 0"

    def on(a: int, b: int) -> tuple[object, ...]:
        ranks = f"#  Rank  0 Group  0 Pid 1 on a100 device  0 [0x{0x10 + a:02x}] {name}\n"
        ranks += f"#  Rank  1 Group  0 Pid 2 on a100 device  1 [0x{0x10 + b:02x}] {name}"
        return judge(evidence(run("all_reduce", row, ranks), topo(NV12_PAIRS, piece=1), gpus))

    across = on(0, 2)
    assert [f.code for f in across] == ["TD021"] and "topo -m: NODE" in across[0].evidence["basis"]
    bridged = on(0, 1)
    assert bridged[0].severity == "warning" and bridged[0].evidence["expected_gbps"] > 200


def test_one_rank_is_not_judged_and_asks_for_more_than_one_gpu() -> None:
    """fixtures/evidence/h200-x1: nccl-tests on one H200 prints busbw 0 by definition (one rank moves no data
    between GPUs): not a shortfall, not a request for topo -m, but the run that would say something."""
    from pathlib import Path

    import topodoctor

    here = Path(__file__).resolve().parents[2] / "fixtures" / "evidence" / "h200-x1"
    got = topodoctor.diagnose([here / "nt-all_reduce.txt", here / "smi-topo-m.txt"])
    leads = [f for f in got.findings if f.code not in ("TD980", "TD981")]
    assert [(f.code, f.severity) for f in leads] == [("TD022", "info")]
    assert "one rank moves no data" in leads[0].message and "topo -m" not in leads[0].message
    assert "-g 2" in leads[0].fix and "NCCL_DEBUG" not in leads[0].fix
    assert got.exit_code == 0
