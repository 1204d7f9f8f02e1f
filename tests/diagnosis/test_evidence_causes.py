"""The causes of a slow run, joined from a user's evidence: each test holds real figures or lines as
they were posted (the thread in its docstring) or measured on the lent hosts (docs/diagnosis.md)."""

from __future__ import annotations

from pathlib import Path

from evidence_cases import account, evidence, matrix, nccl_lines, run, topo
from tests_support_evidence import H100_X2_RANKS, H100_X2_TOPO, judge
from tests_support_evidence import all_reduce_row as _row

from topodoctor.model.evidence import EvidenceSetting, GpuSeen, NicSeen

ROOT = Path(__file__).resolve().parents[2]


def _lead(found: tuple[object, ...]) -> object:
    return found[0]


def test_p2p_level_loc_on_nvlink_is_named_with_its_line() -> None:
    """NCCL_P2P_LEVEL=LOC on 2 x H100 NVSwitch: all_reduce 24.9 GB/s at 1 GiB via SHM (docs/diagnosis.md,
    nvidia-h100-x2, 2026-11-26; the default run gave 330). NCCL's own lines in its 2.28 wording."""
    log = """
h100:2972:3001 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC
h100:2972:3001 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
h100:2973:3002 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct
"""
    ev = evidence(run("all_reduce", _row(24.9), H100_X2_RANKS), topo(H100_X2_TOPO, piece=1), nccl_lines(log, 2))
    f = _lead(judge(ev))
    assert (f.code, f.severity) == ("TD023", "error")  # type: ignore[attr-defined]
    cause = f.cause  # type: ignore[attr-defined]
    assert cause.what.startswith("NCCL_P2P_LEVEL=LOC sends this node's traffic through SHM")
    assert cause.confidence == "high" and cause.explains >= 0.9
    assert any("set by environment to LOC" in line for line in cause.evidence["lines"])
    assert cause.evidence["expected_gbps"] > 300 and cause.evidence["measured_gbps"] == 24.9


def test_p2p_level_nvl_on_an_nvlink_pair_is_not_blamed() -> None:
    """NCCL_P2P_LEVEL=NVL keeps P2P on NVLink pairs (paths.cc): at the healthy 330 GB/s of the same host
    nothing is wrong, and the variable is not named."""
    log = "h100:2972:3001 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL\n"
    log += "h100:2972:3001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    ev = evidence(run("all_reduce", _row(330.0), H100_X2_RANKS), topo(H100_X2_TOPO, piece=1), nccl_lines(log, 2))
    assert [f.code for f in judge(ev)] == ["TD021"]


def test_one_channel_is_named_as_the_cap() -> None:
    """NCCL_MAX_NCHANNELS=1 on 2 x H100: 21.2 GB/s at 1 GiB (docs/diagnosis.md, nvidia-h100-x2)."""
    log = "h100:2972:3001 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 1\n"
    log += "h100:2972:3001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    ev = evidence(run("all_reduce", _row(21.2), H100_X2_RANKS), topo(H100_X2_TOPO, piece=1), nccl_lines(log, 2))
    f = _lead(judge(ev))
    assert f.code == "TD036"  # type: ignore[attr-defined]
    assert "NCCL_MAX_NCHANNELS=1 holds NCCL to 1 channel" in f.message  # type: ignore[attr-defined]
    assert "transports: every channel connection of the node via P2P" in f.cause.ruled_out  # type: ignore[attr-defined]


def test_ll_protocol_explains_most_of_the_shortfall() -> None:
    """NCCL_PROTO=LL on 2 x H100: 120.5 GB/s at 1 GiB (docs/diagnosis.md, nvidia-h100-x2)."""
    ev = evidence(
        run("all_reduce", _row(120.5), H100_X2_RANKS),
        topo(H100_X2_TOPO, piece=1),
        EvidenceSetting(2, "NCCL_PROTO", "LL", "export"),
    )
    f = _lead(judge(ev))
    assert f.code == "TD036" and "NCCL_PROTO=LL" in f.cause.what  # type: ignore[attr-defined]
    assert f.cause.explains > 0.8  # type: ignore[attr-defined]


def test_slow_without_evidence_of_why_asks_for_the_log() -> None:
    """A third of the healthy figure and nothing else: the cause is not guessed, the log is asked for."""
    ev = evidence(run("all_reduce", _row(110.0), H100_X2_RANKS), topo(H100_X2_TOPO, piece=1))
    f = _lead(judge(ev))
    assert (f.code, f.severity) == ("TD022", "warning")  # type: ignore[attr-defined]
    assert "NCCL_DEBUG=INFO" in f.message  # type: ignore[attr-defined]


def test_sockets_when_verbs_are_missing_and_ib_disabled() -> None:
    """nccl-tests#82 (https://github.com/NVIDIA/nccl-tests/issues/82): two V100-PCIE nodes, NCCL 2.9.6,
    `Failed to open libibverbs.so[.1]` on both and -x NCCL_IB_DISABLE=1: the network is TCP sockets. No NIC
    listing shows whether RDMA NICs exist (neither missing verbs nor the variable says so): a warning that
    asks for `ibv_devinfo`, with the fix of either network."""
    ranks = """
#   Rank  0 Pid  14926 on v100-gpu-1 device  0 [0x00] Tesla V100-PCIE-16GB
#   Rank  1 Pid   9210 on v100-gpu-5 device  0 [0x00] Tesla V100-PCIE-16GB
"""
    table = "           8             2   float       0    45.82    0.00    0.00    0    38.17    0.00    0.00    0"
    log = """
v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
v100-gpu-5:9210:9210 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
"""
    ev = evidence(
        run("broadcast", table, ranks), nccl_lines(log, 1), EvidenceSetting(2, "NCCL_IB_DISABLE", "1", "mpirun -x")
    )
    found = judge(ev)
    f = next(x for x in found if x.code == "TD025")
    assert f.severity == "warning" and "`ibv_devinfo`" in f.message
    assert "NCCL_IB_DISABLE=1" in f.message and "libibverbs could not be loaded" in f.message
    assert any("Failed to open libibverbs" in line for line in f.evidence["lines"])


def test_gdr_disabled_for_every_hca() -> None:
    """NVIDIA/nccl#1537 (https://github.com/NVIDIA/nccl/issues/1537): RoCE NICs in use, and NCCL's
    `GPU Direct RDMA Disabled for HCA` for both: GPUDirect RDMA is off."""
    log = """
hostname1:25668:27396 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB primaryip:10.10.10.10<0>
hostname1:25668:27396 [0] NCCL INFO Using network IB
hostname1:25668:27396 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
hostname1:25668:27396 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'
"""
    found = judge(evidence(nccl_lines(log)))
    f = next(x for x in found if x.code == "TD026")
    assert f.severity == "warning" and "GPUDirect RDMA off on every host" in f.message
    assert not any(x.code == "TD025" for x in found)  # IB is in use: not a socket fallback


def test_gdr_on_one_side_names_the_host() -> None:
    """GPUDirect RDMA on one node's connections and not the other's, in NCCL's transport.cc wording
    (`[send] via NET/IB/0/GDRDMA` against `[receive] via NET/IB/0`)."""
    log = """
node-a:100:200 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
node-a:100:200 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
node-b:300:400 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0
node-b:300:400 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0
"""
    found = judge(evidence(nccl_lines(log), nccl=(account(nodes=2),), nccl_pieces=(0,)))
    f = next(x for x in found if x.code == "TD026")
    assert f.subject == "host:node-b" and "but not on node-b" in f.message


def test_p2p_slower_than_staged_copies_is_acs() -> None:
    """NVIDIA/nccl#814 (https://github.com/NVIDIA/nccl/issues/814): p2pBandwidthLatencyTest on six GPUs,
    P2P writes at 9.9 GB/s against 22 GB/s staged through the host: ACS / IOMMU redirects peer traffic."""
    off = """
   D\\D     0      1      2      3      4      5
     0 911.08  20.10  22.16  22.14  22.33  22.37
     1  20.39 920.20  22.26  22.24  22.34  22.22
     2  22.18  22.37 920.74  22.09  22.40  22.24
     3  22.24  22.42  22.25 922.37  20.46  22.24
     4  22.19  22.39  22.25  20.43 920.62  22.23
     5  22.09  22.30  22.22  22.32  22.38 921.96
"""
    on = """
   D\\D     0      1      2      3      4      5
     0 912.68   9.90   9.90   9.90   9.90   9.90
     1   9.90 922.37   9.90   9.90   9.90   9.90
     2  10.01  10.01 922.24  10.01  10.01  10.01
     3  10.23  10.23  10.23 921.83  10.23  10.23
     4   9.65   9.64   9.65   9.65 921.29   9.65
     5  10.22  10.22  10.22  10.22  10.22 922.37
"""
    ev = evidence(
        matrix(off, "unidirectional p2p=disabled", "unidirectional", False),
        matrix(on, "unidirectional p2p=enabled", "unidirectional", True, piece=0),
    )
    f = next(x for x in judge(ev) if x.code == "TD029")
    assert f.severity == "error" and "9.9 GB/s, under the 20.1 GB/s staged" in f.message


def test_h200_p2p_beats_staged_copies() -> None:
    """The lent 4 x H200 host's p2pBandwidthLatencyTest (reference-outputs/h200-x4/p2pbw.txt): P2P 362-393
    GB/s against 38 staged: no ACS finding."""
    off = "   D\\D 0 1\n 0 3941.97 37.59\n 1 38.60 4006.09"
    on = "   D\\D 0 1\n 0 3985.97 361.60\n 1 391.77 4000.96"
    ev = evidence(
        matrix(off, "unidirectional p2p=disabled", "unidirectional", False),
        matrix(on, "unidirectional p2p=enabled", "unidirectional", True),
    )
    assert not any(f.code == "TD029" for f in judge(ev))


def test_ranks_each_on_device_zero_are_split_containers() -> None:
    """Two ranks of one host that both run on CUDA device 0 and meet via SHM: each sees one GPU (a
    container per GPU), in NCCL's connection wording."""
    log = """
gpu-node:10:20 [0] NCCL INFO Channel 00 : 0[0] -> 1[0] via SHM/direct/direct
gpu-node:11:21 [0] NCCL INFO Channel 00 : 1[0] -> 0[0] via SHM/direct/direct
"""
    found = judge(evidence(nccl_lines(log)))
    assert found[0].code == "TD034" and found[0].severity == "error"


def test_common_node_of_a_pairwise_sweep() -> None:
    """A pair sweep of three nodes where both pairs with node-c are a third of the healthy one."""

    def pair(a: str, b: str, busbw: float, piece: int) -> object:
        ranks = f"#  Rank  0 Group  0 Pid 1 on {a} device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
        ranks += f"#  Rank  1 Group  0 Pid 2 on {b} device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
        return run("all_reduce", _row(busbw), ranks, piece)

    ev = evidence(
        pair("node-a", "node-b", 45.0, 0), pair("node-a", "node-c", 14.0, 1), pair("node-b", "node-c", 15.0, 2)
    )
    found = judge(ev)
    assert found[0].code == "TD038" and found[0].subject == "host:node-c"


def test_gdr_one_sided_in_the_older_wording_names_the_receiving_rank() -> None:
    """NCCL before 2.12 prints each rank's bus id in brackets, and a paste often keeps the lines without
    their host prefix: `[send] via NET/IB/0/GDRDMA` against `[receive] via NET/IB/1` for one pair of
    ranks still shows GPUDirect RDMA missing where rank 2 receives (transport.cc: "peer -> me [receive]")."""
    from topodoctor.model.evidence import NcclLine

    lines = (
        NcclLine(0, 1, "NCCL INFO Channel 00 : 9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA"),
        NcclLine(0, 2, "NCCL INFO Channel 00 : 9[1a000] -> 2[6b000] [receive] via NET/IB/1"),
    )
    found = judge(evidence(lines))
    f = next(x for x in found if x.code == "TD026")
    assert "but not on the node of rank 2 (receive side)" in f.message and f.subject == "rank 2"
    assert not any(x.code == "TD034" for x in found)  # bus ids, not CUDA devices: no split containers


def test_an_rdma_device_nccl_could_not_open_is_why_sockets_ran() -> None:
    """NCCL's own lines when the container cannot open the RDMA device (net_ib.cc, ibvwrap.cc wording):
    sockets with the device named, an error."""
    log = """
h:1:1 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed
h:1:1 [0] transport/net_ib.cc:148 NCCL WARN NET/IB : Unable to open device mlx5_bond_0
h:1:1 [0] NCCL INFO NET/IB : No device found.
h:1:1 [0] NCCL INFO NET/Socket : Using [0]bond0:200.1.93.2<0>
h:1:1 [0] NCCL INFO Using network Socket
"""
    f = next(x for x in judge(evidence(nccl_lines(log))) if x.code == "TD025")
    assert f.severity == "error" and "NCCL could not open mlx5_bond_0" in f.message and f.subject == "network"


def test_nccl_using_fewer_hcas_than_the_node_has() -> None:
    """topo -m's legend names four mlx5 NICs; NCCL's `NET/IB : Using` (net_ib.cc) lists one: the others are
    down or hidden from the container."""
    from topodoctor.model.evidence import NicSeen

    nics = tuple(NicSeen(0, f"mlx5_{i}", alias=f"NIC{i}") for i in range(4))
    log = "n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\n"
    log += "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
    found = judge(evidence(nics, nccl_lines(log, 1), nccl=(account(nodes=2),), nccl_pieces=(1,)))
    f = next(x for x in found if x.code == "TD035")
    assert "NCCL found 1 of the node's 4 RDMA NICs (mlx5_0)" in f.message


def test_geforce_with_p2p_shown_working_is_not_called_p2p_less() -> None:
    """A patched open kernel module gives RTX 5090s peer access (github.com/aikitoria/open-gpu-kernel-modules,
    its sample output: P2P writes 55.6-56.6 GB/s against 43 staged, all_reduce 45 GB/s on 8 GPUs): with
    the peer copies well above the staged ones, no TD033 and no ACS finding."""
    names = "NVIDIA GeForce RTX 5090"
    off = "   D\\D 0 1 2\n 0 1500 43.0 43.1\n 1 43.2 1500 43.0\n 2 43.1 43.0 1500"
    on = "   D\\D 0 1 2\n 0 1500 55.6 56.1\n 1 56.6 1500 55.9\n 2 56.0 55.8 1500"
    ranks = "\n".join(f"#  Rank  {i} Group  0 Pid 1 on turin device  {i} [0x{i + 1:02x}] {names}" for i in range(8))
    row = "   134217728      33554432     float     sum      -1   5200  25.8  45.2  0   5200  25.8  45.2  0"
    ev = evidence(
        run("all_reduce", row, ranks),
        matrix(off, "unidirectional p2p=disabled", "unidirectional", False),
        matrix(on, "unidirectional p2p=enabled", "unidirectional", True),
    )
    found = judge(ev)
    assert not any(f.code in ("TD033", "TD029") for f in found)
    assert not any(f.severity in ("warning", "error") for f in found)


def test_a_cut_nvlink_listing_is_not_links_down() -> None:
    """`nvidia-smi nvlink -s` lists every link, down ones as inactive; a paste that stops after one link of
    an A100 (12 by design) says nothing of the other eleven."""
    cut = GpuSeen(0, 2, name="NVIDIA A100-SXM4-80GB", nvlinks_up=1, nvlinks_listed=1, nvlink_gbps=25.0)
    down = GpuSeen(0, 3, name="NVIDIA A100-SXM4-80GB", nvlinks_up=11, nvlinks_listed=12, nvlink_gbps=25.0)
    found = judge(evidence(cut, down))
    assert [f.subject for f in found if f.code == "TD031"] == ["GPU3"]


def test_a_table_without_its_header_is_not_judged() -> None:
    """nccl-tests' rows pasted apart from the `Using devices` lines (nccl-tests#119 posted its 3-node table
    so): without the ranks and nodes the figure is not held to one node's NVLink."""
    from topodoctor.model.evidence import CollectiveRun

    rows = run("all_reduce", "   134217728  33554432  float  sum  -1  2638  50.88  95.93  0  2640  50.84  95.86  0", "")
    bare = CollectiveRun(0, "all_reduce", rows.rows)
    found = judge(evidence(bare, GpuSeen(1, 0, name="NVIDIA A100-SXM4-40GB")))
    assert [(f.code, f.severity) for f in found] == [("TD022", "info")] and "Using devices" in found[0].message


def test_topo_p2p_cns_is_no_p2p() -> None:
    """`nvidia-smi topo -p2p r` answering CNS (chipset not supported) between two L4s: no P2P between
    them, whatever the GPU allows (nvidia-smi's legend)."""
    from topodoctor.model.evidence import PairSeen

    pairs = (PairSeen(0, "GPU0", "GPU1", p2p={"r": "CNS"}), PairSeen(0, "GPU1", "GPU0", p2p={"r": "CNS"}))
    found = judge(evidence(pairs, GpuSeen(0, 0, name="NVIDIA L4")))
    f = next(x for x in found if x.code == "TD033")
    assert f.severity == "warning" and "no P2P (CNS: chipset not supported)" in f.message


def test_rtx_3090_pairs_without_their_bridge_have_no_p2p() -> None:
    """NVIDIA/nccl#1127 (https://github.com/NVIDIA/nccl/issues/1127): eight RTX 3090s, P2P=Enabled copies at
    6.1 GB/s between GPUs 0-3, the staged figure: GeForce without a bridge has no peer access."""
    on = "   D\\D 0 1 2\n 0 838.25 6.11 6.13\n 1 6.11 838.25 6.12\n 2 6.13 6.12 839.15"
    ev = evidence(tuple(GpuSeen(0, i, name="NVIDIA GeForce RTX 3090") for i in range(3)),
                  matrix(on, "bidirectional p2p=enabled", "bidirectional", True))  # fmt: skip
    assert any(f.code == "TD033" and f.severity == "warning" for f in judge(ev))


def test_a_kernel_link_limit_at_the_port_above_names_that_port_and_the_gpu() -> None:
    """The kernel's report of Gen5 GPUs behind Gen4 switches (fixtures/diagnose/real/
    h100-behind-gen4-switch-dmesg, stas00/ml-engineering): the limit is at the port above, so the fix is
    that port, not a reseat; joined by bus id to the GPU nvidia-smi showed there."""
    from dataclasses import replace

    from topodoctor.evidence.inputs import join, read_input

    text = (ROOT / "fixtures/diagnose/real/h100-behind-gen4-switch-dmesg/evidence-1.txt").read_text()
    ev = join([read_input("dmesg.txt", text)])
    found = judge(ev)
    assert [f.code for f in found] == ["TD030"] and found[0].severity == "error"
    assert "limited by the 16.0 GT/s (Gen4) x16 link at 0000:01:00.0" in found[0].message
    assert "lspci -vvv -s 0000:01:00.0" in found[0].fix
    gpu = GpuSeen(0, 3, name="NVIDIA H100 80GB HBM3", bus_id="00000000:04:00.0")
    named = judge(replace(ev, gpus=(gpu,)))
    assert named[0].subject == "GPU3" and named[0].message.startswith("GPU3 (0000:04:00.0)")


def test_a_kernel_link_report_at_full_bandwidth_is_no_cause() -> None:
    """The plain form (a NIC at Gen3 x16 as capable, a linux-rdma thread) says the link is whole."""
    from topodoctor.evidence.inputs import join, read_input

    line = "[    9.843126] mlx5_core 0000:02:00.0: 126.016 Gb/s available PCIe bandwidth (8.0 GT/s PCIe x16 link)\n"
    assert not [f for f in judge(join([read_input("dmesg.txt", line)])) if f.severity != "info"]


def _read(*paths: str) -> object:
    from topodoctor.evidence.inputs import join, read_input

    return join([read_input(p, (ROOT / p).read_text()) for p in paths])


def test_p2p_disable_on_a_launch_line_is_the_cause() -> None:
    """Two DDP launches, the slower with NCCL_P2P_DISABLE=1 (titan-nvlink-p2p-disable-ddp)."""
    found = judge(_read("fixtures/diagnose/real/titan-nvlink-p2p-disable-ddp/evidence-1.txt"))  # type: ignore[arg-type]
    assert found[0].code == "TD023" and "NCCL_P2P_DISABLE=1" in found[0].message and found[0].severity == "error"


def test_fewer_threads_without_a_figure_is_said_not_blamed() -> None:
    """NCCL_NTHREADS=256 on an all_reduce_perf line and nothing else (normal-8x5090-pcie-28, whose
    figure was normal): information; beside a short figure it stays a candidate."""
    found = judge(_read("fixtures/diagnose/real/normal-8x5090-pcie-28/evidence-1.txt"))  # type: ignore[arg-type]
    assert [(f.code, f.severity) for f in found] == [("TD036", "info")]
    short = evidence(
        run("all_reduce", _row(100.0), H100_X2_RANKS), topo(H100_X2_TOPO, piece=1),
        (EvidenceSetting(2, "NCCL_NTHREADS", "256", "command prefix"),),
    )  # fmt: skip
    blamed = [f for f in judge(short) if f.code == "TD036"]
    assert blamed and blamed[0].severity != "info" and "NCCL_NTHREADS=256" in blamed[0].message


def test_a_sweep_table_names_the_node_whose_every_pair_is_slow() -> None:
    """NVIDIA/nccl-tests#106 (pair-sweep-one-slow-node): both pairs with se02gn644 run at 49 GB/s while its
    partners reach 87-88 with other nodes; 284/678 is slow too but neither node is seen elsewhere, so it
    is said apart, not blamed on 644."""
    found = judge(_read("fixtures/diagnose/real/pair-sweep-one-slow-node/evidence-1.txt"))  # type: ignore[arg-type]
    assert [(f.code, f.subject) for f in found if f.severity != "info"] == [("TD038", "host:se02gn644")]
    assert "se02gn284/se02gn678 (49.28) is slow apart" in found[0].message
    assert len(found[0].evidence["slow_runs"]) == 2  # type: ignore[arg-type]


def test_a_sweep_of_unrelated_slow_pairs_names_no_node() -> None:
    """Two slow pairs that share no node, and no node exonerated twice: no one node is to blame."""
    from topodoctor.evidence.inputs import join, read_input

    text = "n1,n2 49.1\nn3,n4 49.0\nn5,n6 88.2\nn1,n5 87.9\n"
    assert not [f for f in judge(join([read_input("sweep.txt", text)])) if f.code == "TD038"]


def test_a_release_with_a_small_size_regression_beside_a_small_size_run() -> None:
    """NVIDIA/nccl#2058 (nccl-2297-symmem-regression): NCCL 2.29.7 and an all_reduce_perf run of 1K-4M
    only; the regression is a lead to compare against, said as a warning. The same line sweeping to 1G,
    or an unaffected release, says nothing of it."""
    found = judge(
        _read(  # type: ignore[arg-type]
            "fixtures/diagnose/real/nccl-2297-symmem-regression/evidence-1.txt",
            "fixtures/diagnose/real/nccl-2297-symmem-regression/evidence-2.txt",
        )
    )
    assert [(f.code, f.severity) for f in found] == [("TD037", "warning")]
    assert "NCCL 2.29.7" in found[0].message and "https://github.com/NVIDIA/nccl/issues/2058" in found[0].fix
    from topodoctor.evidence.inputs import join, read_input

    big = "NCCL 2.29.7\n\nall_reduce_perf -b 1k -e 1G -g 1 -f 2\n"
    assert not [f for f in judge(join([read_input("v", big)])) if f.code == "TD037"]
    other = "NCCL 2.28.9\n\nall_reduce_perf -b 1k -e 4m -g 1 -f 2\n"
    assert not [f for f in judge(join([read_input("v", other)])) if f.code == "TD037"]


def test_a_health_check_threshold_is_not_the_hardware_rate() -> None:
    """Azure/azurehpc-health-checks#162 (normal-h100pcie-12-links): NHC fails a 256.63 GB/s pair against a
    335 threshold the maintainers later lowered; with no model or links shown the figure is above any
    PCIe floor and no cause is named."""
    found = judge(_read("fixtures/diagnose/real/normal-h100pcie-12-links/evidence-1.txt"))  # type: ignore[arg-type]
    assert not [f for f in found if f.severity != "info"]
    from topodoctor.evidence.inputs import join, read_input

    slow = "ERROR:  nhc:  Health check failed:  check_gpu_bw: P2P test on GPU 1 to GPU 0 failed. Bandwidth 5.2 is less "
    slow += "than 335. FaultCode: NHC2020\n"  # the same line with a figure no healthy x16 link gives
    assert [f.code for f in judge(join([read_input("nhc.log", slow)])) if f.severity == "warning"] == ["TD022"]


def test_a_kernel_link_limit_of_the_function_itself_at_full_width_may_be_idle() -> None:
    """A line in the kernel's format (drivers/pci/pci.c, the figure as it computes it: 2.5 GT/s x16 after
    8b/10b is 32 Gb/s) for a function limited by its own link, at full width but Gen1: the fix says a GPU
    idles at a lower generation."""
    from topodoctor.evidence.inputs import join, read_input

    line = "[    3.6] pci 0000:07:00.0: 32.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x16 link at "
    line += "0000:07:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)\n"
    (f,) = judge(join([read_input("dmesg.txt", line)]))
    assert f.code == "TD030" and "limited by its own link at 2.5 GT/s (Gen1) x16" in f.message
    assert "under load" in f.fix


def test_a_slow_pair_apart_from_the_node_is_still_judged_on_its_own() -> None:
    """nccl-tests' two-node runs with the pairs and figures of NVIDIA/nccl-tests#106: se02gn644 is named,
    and the 284/678 run, which it does not explain, is left to be judged on its own."""

    def pair(a: str, b: str, busbw: float, piece: int) -> object:
        ranks = f"#  Rank  0 Group  0 Pid 1 on {a} device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
        ranks += f"#  Rank  1 Group  0 Pid 2 on {b} device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
        return run("all_reduce", _row(busbw), ranks, piece)

    sweep = [("se02gn644", "se02gn699", 49.36), ("se02gn632", "se02gn641", 88.36), ("se02gn284", "se02gn678", 49.28),
             ("se02gn641", "se02gn644", 49.30), ("se02gn404", "se02gn699", 86.81)]  # fmt: skip
    ev = evidence(*(pair(a, b, bw, k) for k, (a, b, bw) in enumerate(sweep)), pieces=5)
    found = judge(ev)
    assert found[0].code == "TD038" and found[0].subject == "host:se02gn644"
    from topodoctor.diagnosis.evidence import _collectives
    from topodoctor.diagnosis.evidence_facts import facts_of

    # the nodes' NICs are not shown, so each run left is said as not judged (before the findings are
    # joined per subject): the three runs without se02gn644, 284/678 among them
    _, _, said = _collectives(facts_of(ev))
    left = sorted(f.evidence["measured_gbps"] for f in said if f.code == "TD022")  # type: ignore[type-var]
    assert left == [49.28, 86.81, 88.36]


def test_sockets_between_nodes_are_held_against_the_ethernet_line_ethtool_shows() -> None:
    """nccl-tests#82's two V100-PCIE nodes over sockets (libibverbs missing), with `ethtool`'s 25000Mb/s:
    under the line the figure is one TCP stream's rate times the streams (net_socket.cc), which the
    evidence does not show, so the finding says the share and asks for the per-stream rate; at the line
    the line is the ceiling."""
    ranks = """
#   Rank  0 Pid  14926 on v100-gpu-1 device  0 [0x00] Tesla V100-PCIE-16GB
#   Rank  1 Pid   9210 on v100-gpu-5 device  0 [0x00] Tesla V100-PCIE-16GB
"""
    log = "v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
    eth = NicSeen(3, "eth0", rate_gbps=25.0, link_layer="Ethernet", state="ACTIVE", rate_text="25000Mb/s")
    for busbw, said in ((1.5, "0.48 of the 25 Gb/s Ethernet line"), (3.0, "the line itself is the ceiling")):
        table = f"  1073741824     268435456   float     sum    1000.0   {busbw:.2f}   {busbw:.2f}  0e+00"
        table += f"    1000.0   {busbw:.2f}   {busbw:.2f}  0e+00"
        found = judge(evidence(run("all_reduce", table, ranks), nccl_lines(log, 1), eth))
        f = next(x for x in found if x.code == "TD025")
        assert said in f.message, f.message
        assert ("iperf3" in f.message) == (busbw < 2.5)
