"""Evidence read but formerly not joined into a cause, and what the evidence leaves undecided: each test
holds a real paste (its thread in the docstring; fixtures/diagnose/*/README.md tell the cases' threads)
or a figure measured on the lent hosts (/work/shared/hardware-facts.md, docs/diagnosis.md)."""

from __future__ import annotations

from pathlib import Path

from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding

ROOT = Path(__file__).resolve().parents[2]


def _read(*paths: str) -> Evidence:
    return join([read_input(p, (ROOT / p).read_text()) for p in paths])


def _text(*texts: str) -> Evidence:
    return join([read_input(f"paste-{k}", t) for k, t in enumerate(texts)])


def _serious(found: tuple[Finding, ...]) -> list[Finding]:
    return [f for f in found if f.severity in ("warning", "error")]


def test_nvlink_in_pairs_only_is_said_where_no_figure_shows_the_run() -> None:
    """8 x RTX A6000 bridged in pairs, topo -m and nvlink -s beside it (fixtures/diagnose/holdout/s-44,
    hpc-community.unige.ch/t/3741): the admin's answer was that only the bridged pairs are NVLinked."""
    found = judge(
        _read("fixtures/diagnose/holdout/s-44/evidence-1.txt", "fixtures/diagnose/holdout/s-44/evidence-2.txt")
    )
    (f,) = _serious(found)
    assert (f.code, f.severity) == ("TD032", "warning")
    assert "pairs only (GPU0-GPU1, GPU2-GPU3, GPU4-GPU5, GPU6-GPU7)" in f.message and "NODE, SYS" in f.message


def test_every_pair_nvlinked_is_no_island() -> None:
    """4 x V100 SXM2 in the hybrid cube mesh (NV1 / NV2 between every pair: fixtures/diagnose/holdout/s-09)."""
    found = judge(_read("fixtures/diagnose/holdout/s-09/evidence-1.txt"))
    assert not any(f.code == "TD032" for f in found)


def test_nvbandwidth_waived_on_geforce_is_no_p2p() -> None:
    """nvbandwidth v0.2 waives device_to_device_memcpy_write_ce on two RTX 2080 Ti (nvbandwidth#13): no pair has
    peer access, which the maintainer confirmed (fixtures/diagnose/holdout/s-05); the GPU model table says the same
    of the RTX 2080 Ti (GeForce), in a finding of its own."""
    found = judge(_read("fixtures/diagnose/holdout/s-05/evidence-1.txt"))
    serious = _serious(found)
    assert [f.code for f in serious] == ["TD033", "TD033"] and all("no P2P" in f.message for f in serious)
    assert any(f.message.startswith("RTX 2080 Ti (GeForce) has no P2P") for f in serious)


def test_a_run_header_without_its_table_asks_for_the_table_and_the_log() -> None:
    """8 x A100 80GB PCIe: the run's header pasted alone, its host field empty (fixtures/diagnose/holdout/s-08)."""
    found = judge(_read("fixtures/diagnose/holdout/s-08/evidence-1.txt"))
    (f,) = found
    assert (f.code, f.severity) == ("TD022", "info") and "NCCL_DEBUG=INFO" in f.message


def test_two_averages_apart_ask_for_both_logs_and_name_no_cause() -> None:
    """sendrecv_perf's Avg bus bandwidth lines of two NCCL releases, nothing else (nccl#1272,
    fixtures/diagnose/holdout/s-21): 24.24 against 18.32 GB/s."""
    base = "fixtures/diagnose/holdout/s-21/"
    found = judge(_read(base + "evidence-1.txt", base + "evidence-2.txt", base + "evidence-3.txt"))
    (f,) = _serious(found)
    assert (f.code, f.subject) == ("TD022", "sendrecv_perf")
    assert "cannot tell" in f.message and "NCCL_DEBUG=INFO" in f.message and "0.76" in f.message


def test_two_averages_alike_say_nothing() -> None:
    found = judge(_text("# Avg bus bandwidth    : 24.2382 \n", "# Avg bus bandwidth    : 24.1 \n"))
    assert _serious(found) == []


def test_a_run_split_over_hosts_beside_one_host_s_topology_asks_machines_or_containers() -> None:
    """horovodrun over node1:2,node2:2 beside the topo -m of a 4 x V100 host (nccl-tests#93,
    fixtures/diagnose/holdout/s-09): the two "nodes" were containers of that host."""
    base = "fixtures/diagnose/holdout/s-09/"
    found = judge(_read(base + "evidence-1.txt", base + "evidence-2.txt", base + "evidence-3.txt"))
    asks = [f for f in found if f.code == "TD022" and f.subject == "launch"]
    assert len(asks) == 1 and asks[0].severity == "info"
    assert "node1 (2 slots), node2 (2 slots)" in asks[0].message and "`docker run`" in asks[0].message


def test_a_port_below_its_sibling_adapters_is_the_warning_and_the_ceiling_is_information() -> None:
    """ibstatus of four HDR ports, the fourth cut inside its rate (nccl#1412): three at 200, no disparity
    among the same layer; the ceiling is 3 x 200 Gb/s."""
    found = judge(_read("fixtures/evidence/ibstatus-hdr-ports-cut.txt"))
    (f,) = [x for x in found if x.code == "TD982"]
    assert f.severity == "info" and "600 Gb/s in all" in f.message and "about 71 GB/s" in f.message


def test_a_down_roce_port_is_not_counted() -> None:
    """A DGX Spark's ibstat (geerlingguy/sbc-reviews#92): two ConnectX-7 RoCE ports up at 200, one Down."""
    found = judge(_read("fixtures/evidence/ibstat-roce-gb10-port-down.txt"))
    (f,) = [x for x in found if x.code == "TD982"]
    assert "2 active RDMA ports at 200 Gb/s" in f.message and "roceP2p1s0f1 down (not counted)" in f.message
    assert "of the 400 Gb/s a ConnectX-7 can do" in f.message


def test_a_trained_down_port_among_its_siblings_is_a_warning() -> None:
    """The ConnectX-7 port of nccl#1591 (ibstat: MT4129 at 400) beside the same adapter at 200."""
    one = (ROOT / "fixtures/evidence/ibstat-cx7-ndr-one-ca.txt").read_text()
    two = one.replace("mlx5_5", "mlx5_6").replace("Rate: 400", "Rate: 200")
    found = judge(_text(one + two))
    (f,) = _serious(found)
    assert (f.code, f.subject) == ("TD982", "nic:mlx5_6") and "200 Gb/s where" in f.message


H2D = """nvbandwidth Version: v0.8
Built from Git version: v0.8

CUDA Runtime Version: 12040
CUDA Driver Version: 12040
Driver Version: 550.54.15

Device 0: NVIDIA H100 80GB HBM3 (00000000:18:00)
Device 1: NVIDIA H100 80GB HBM3 (00000000:2a:00)
Device 2: NVIDIA H100 80GB HBM3 (00000000:3a:00)
Device 3: NVIDIA H100 80GB HBM3 (00000000:5d:00)

Running host_to_device_memcpy_ce.
memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
           0         1         2         3
 0     {0}     57.06     56.68     57.07

SUM host_to_device_memcpy_ce 184.01
"""


def test_a_host_copy_far_under_its_pcie_link_is_a_symptom_without_a_cause_shown() -> None:
    """Host-to-device 14.2 GB/s on GPU0 of an H100 VM where the others copy 57 (nvbandwidth#6's figures, in
    nvbandwidth v0.8's layout): under 0.6 of PCIe Gen5 x16; nothing shown says why, so it asks for the link."""
    found = judge(_text(H2D.format("14.20")))
    (f,) = _serious(found)
    assert (f.code, f.subject) == ("TD022", "host-GPU0") and "0.26" in f.message
    assert "`nvidia-smi -q`" in f.message and "each pair's path" not in f.message and "NCCL" not in f.message


def test_a_host_copy_at_its_link_is_normal() -> None:
    """55.9 GB/s host-to-device: the H200 hosts copy 55.5 over PCIe Gen5 x16 (hardware-facts.md)."""
    found = judge(_text(H2D.format("55.90")))
    assert _serious(found) == [] and any(f.code == "TD021" and "slowest GPU's 56 GB/s" in f.message for f in found)


def test_a_latency_bound_table_on_a_pair_across_sockets_says_so() -> None:
    """2 x T4 under CUDA_VISIBLE_DEVICES=0,1, GPU0 on the other socket, the table cut at 8 B (nccl#428,
    fixtures/diagnose/holdout/s-02): not judged, and the pair's path said."""
    found = judge(
        _read("fixtures/diagnose/holdout/s-02/evidence-1.txt", "fixtures/diagnose/holdout/s-02/evidence-2.txt")
    )
    (f,) = found
    assert f.severity == "info" and "latency-bound" in f.message and "GPU0 and GPU1 cross the CPU sockets" in f.message


def _two_nodes(busbw: float) -> str:
    """16 x A100-SXM4-80GB on two nodes, all_reduce at 1 GiB (nccl-tests' layout; sjeaugey in nccl-tests#119:
    24 GB/s per 200G NIC, 96 for four)."""
    ranks = "\n".join(
        f"#  Rank {r:2d} Group  0 Pid {1000 + r} on {'pod01' if r < 8 else 'pod02'} device  {r % 8} "
        f"[0x{16 * (r % 8) + 7:02x}] NVIDIA A100-SXM4-80GB"
        for r in range(16)
    )
    algbw = busbw * 16 / 30
    t = (1 << 30) / algbw / 1e3
    row = f"  1073741824     268435456     float     sum      -1  {t:.1f}  {algbw:.2f}  {busbw:.2f}    0"
    row += f"  {t:.1f}  {algbw:.2f}  {busbw:.2f}    0"
    head = "# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20\n"
    cols = "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    cols += "     time   algbw   busbw #wrong\n"
    return head + "#\n# Using devices\n" + ranks + "\n#\n" + cols + row + "\n# Avg bus bandwidth    : " + f"{busbw}\n"


def test_cross_node_busbw_is_held_to_the_ports_and_a_port_trained_down_is_its_cause() -> None:
    """The four HDR ports of nccl#1412's ibstatus, one at 100 Gb/s: the run at 48 GB/s is short of the four
    ports' 96, and the port below its siblings is named."""
    ports = (ROOT / "fixtures/evidence/ibstatus-hdr-ports-cut.txt").read_text()
    slow = ports.replace("rate:            200 Gb/sec (4X HDR)", "rate:            100 Gb/sec (4X EDR)", 1)
    found = judge(_text(_two_nodes(48.0), slow))
    lead = next(f for f in found if f.subject == "all_reduce")
    assert (lead.code, lead.severity) == ("TD982", "warning") and "mlx5_0 port 1 negotiated 100" in lead.message
    healthy = judge(_text(_two_nodes(70.0), ports))
    assert _serious(healthy) == [] and any(f.code == "TD021" for f in healthy)


def test_nccl_ib_hca_naming_every_port_that_is_up_leaves_none_out() -> None:
    """The DGX Spark's ibstat (one port Down) with NCCL_IB_HCA naming the ports that are up: no TD035."""
    ports = (ROOT / "fixtures/evidence/ibstat-roce-gb10-port-down.txt").read_text()
    found = judge(_text(ports, "export NCCL_IB_HCA=roceP2p1s0f0,rocep1s0f0\n"))
    assert not any(f.code == "TD035" for f in found)


def test_a_two_node_launch_alone_lists_what_would_show_how_nccl_ran() -> None:
    """An mpirun line over host1:8,host2:8 and nothing else (nccl-tests#112): information, candidates only."""
    line = "mpirun -np 16 -H host1:8,host2:8 -bind-to none -x NCCL_IB_GID_INDEX=3 -x NCCL_IB_HCA=mlx5_0 "
    found = judge(_text(line + "./build/all_reduce_perf -b 1G -e 8G -f 2\n"))
    (f,) = found
    assert (f.code, f.severity, f.subject) == ("TD022", "info", "network")
    assert "a launch over 2 nodes" in f.message and "`ibstat`" in f.message and "ACSCtl" in f.message


def test_a_version_alone_asks_for_the_run_s_log() -> None:
    found = judge(_text("INFO 07-20 17:27:20 pynccl.py:63] vLLM is using nccl==2.21.5\n"))
    (f,) = found
    assert (f.code, f.severity) == ("TD022", "info") and "NCCL_DEBUG=INFO" in f.message


def test_an_rdma_test_alone_says_what_the_link_carries_and_what_would_show_nccl_s_path() -> None:
    """ib_write_bw at 184.94 Gb/s over a RoCE bond (nccl-tests#191, where nccl-tests got less)."""
    found = judge(_read("fixtures/evidence/ib-write-bw-roce-bond-gbits.txt"))
    assert _serious(found) == []
    assert any(f.code == "TD982" and "184.94 Gb/s average" in f.message for f in found)
    assert any(f.code == "TD022" and "NCCL_DEBUG=INFO" in f.message for f in found)


def test_a_multi_host_launch_that_printed_a_result_per_process_never_joined() -> None:
    """nccl-tests#27 (fixtures/diagnose/holdout3/d-01): mpirun -H a,b -np 2 printed two averages, each a
    one-host figure; the maintainer's answer was a build without MPI=1 (`make clean`, then MPI=1)."""
    found = judge(_read("fixtures/diagnose/holdout3/d-01/evidence-1.txt"))
    (f,) = _serious(found)
    assert (f.code, f.severity, f.subject) == ("TD983", "error", "launch")
    assert "2 separate all_reduce results (Avg bus bandwidth 3.94145, 3.94156 GB/s)" in f.message
    assert "MPI=1" in f.fix and not any(x.code == "TD022" and "between the nodes" in x.message for x in found)


def test_one_result_whose_ranks_span_the_hosts_joined() -> None:
    """The near miss: an MPI build prints one header (every rank, both hosts) and one result."""
    text = "mpirun -np 2 -H a,b ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 1\n"
    text += "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20\n"
    text += "#\n# Using devices\n"
    text += "#  Rank  0 Group  0 Pid   1 on          a device  0 [0x07] NVIDIA A100-SXM4-80GB\n"
    text += "#  Rank  1 Group  0 Pid   2 on          b device  0 [0x07] NVIDIA A100-SXM4-80GB\n"
    text += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 3.94145 \n"
    found = judge(_text(text))
    assert not any(f.code == "TD983" for f in found)
