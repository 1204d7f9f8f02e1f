"""Rule cases of the diagnoses of a user's evidence (TD021 - TD039, TD982 - TD993; a family of the table in
tests/rules/cases/__init__.py): each a firing case and a near miss, the evidence set on the rules'
Context as `topodoctor diagnose` gives it. Figures are the lent hosts' (docs/diagnosis.md,
the reference outputs of the H200 hosts) or the threads' named in tests/diagnosis/test_evidence_*.py; lines
are in NCCL's own wording."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evidence_cases import account, evidence, matrix, nccl_lines, run, topo
from rule_case_kit import Case

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.evidence import CollectiveRun, Evidence, EvidenceSetting, GpuSeen, Launch, NcclSaid, NicSeen
from topodoctor.model.evidence_prose import FigureSaid, ProseSaid
from topodoctor.model.evidence_scaling import LinkSaid, ScalingSaid, SpeedSaid


def _per_gpu(value: float, nodes: int) -> SpeedSaid:
    return SpeedSaid(1, value, "samples/s", "rate", f"{value:g}/s/gpu", True, 8, nodes)


def _step(seconds: float, gpus: int) -> SpeedSaid:
    return SpeedSaid(1, seconds, "s/it", "step", f"{seconds:g}s", gpus=gpus)


def _scaled(*speeds: SpeedSaid, gpu: str = "", **said: Any) -> Evidence:
    """The reporter's words on scaling as the prose reader gives them."""
    scaled = ScalingSaid(0, speeds, distributed=True, **said)
    return evidence(prose=(ProseSaid(0, gpu=gpu, gpu_model=gpu, scaling=scaled),))


def _ranks(name: str, n: int, host: str = "node") -> str:
    return "\n".join(
        f"#  Rank  {i} Group  0 Pid {100 + i} on {host} device  {i} [0x{i + 1:02x}] {name}" for i in range(n)
    )


def _row(busbw: float, n: int = 2, size: int = 1 << 30) -> str:
    algbw = busbw * n / (2 * (n - 1))
    t = size / algbw / 1e3
    return f"{size} {size // 4} float sum -1 {t:.1f} {algbw:.2f} {busbw:.2f} 0 {t:.1f} {algbw:.2f} {busbw:.2f} 0"


def _topo(cells: dict[tuple[int, int], str], n: int) -> str:
    head = "      " + " ".join(f"GPU{i}" for i in range(n))
    body = [f"GPU{a} " + " ".join("X" if a == b else cells.get((min(a, b), max(a, b)), "NV18") for b in range(n))
            for a in range(n)]  # fmt: skip
    return "\n".join([head, *body])


H100 = "NVIDIA H100 80GB HBM3"
NV18_2 = _topo({}, 2)


def _h100(busbw: float, *more: object, cells: dict[tuple[int, int], str] | None = None, **kw: Any) -> Evidence:
    return evidence(run("all_reduce", _row(busbw), _ranks(H100, 2)), topo(_topo(cells or {}, 2), 1), *more, **kw)


def _separate(results: int) -> Evidence:
    """nccl-tests#27's launch, and the averages its processes printed after it (piece 0: the same input)."""
    launch = Launch(0, "mpirun", text="mpirun -H h1,h2 -np 2 ./all_reduce_perf -b 8 -e 128M -g 2",
                    program="all_reduce_perf", hosts=(("h1", None), ("h2", None)), nodes=2, processes=2)  # fmt: skip
    runs = [CollectiveRun(0, "", (), avg_busbw_gbps=3.94145 + k / 1e5) for k in range(results)]
    return evidence(*runs, launches=(launch,))


def _log(text: str) -> tuple[object, ...]:
    return nccl_lines(text.replace("|", "\n"), 2)


SHM = "node:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct|node:1:3 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct"  # noqa: E501
P2P = "node:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
LOC = "node:1:2 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC|" + SHM
NVL = "node:1:2 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL|" + P2P
VERBS = "a:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]"
IB = "a:1:1 [0] NCCL INFO Using network IB|a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"
GDR_OFF = (
    "h:1:2 [0] NCCL INFO Using network IB|h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"
)
ONE_SIDED = (
    "node-a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA|"
    "node-b:3:4 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0"
)
BOTH_SIDES = ONE_SIDED.replace("[receive] via NET/IB/0", "[receive] via NET/IB/0/GDRDMA")
SOCKETS = "a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0|"  # nccl-tests#284's lines
SOCKETS += "b:3:4 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0"
SPLIT = "node:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[0] via SHM/direct/direct"
ACS_OFF = "D\\D 0 1 2\n0 911 22.1 22.2\n1 22.3 920 22.2\n2 22.2 22.4 920"  # nccl#814's staged copies
ACS_ON = "D\\D 0 1 2\n0 912 9.9 9.9\n1 9.9 922 9.9\n2 10.0 10.0 922"  # and its peer copies
OK_ON = "D\\D 0 1 2\n0 912 25.1 25.0\n1 25.2 922 25.1\n2 25.0 25.1 922"
SLOW3 = "D\\D 0 1 2 3\n0 0 392 391 120\n1 392 0 392 118\n2 391 392 0 121\n3 119 120 118 0"  # GPU3 a third
EVEN4 = "D\\D 0 1 2 3\n0 0 392 391 390\n1 392 0 392 391\n2 391 392 0 392\n3 390 391 392 0"
A40_CELLS = {(0, 1): "NV4", (2, 3): "NV4", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS"}


def _p2p(enabled: str) -> Evidence:
    off = matrix(ACS_OFF, "unidirectional p2p=disabled", "unidirectional", False)
    return evidence(off, matrix(enabled, "unidirectional p2p=enabled", "unidirectional", True))


def _pcie(width: int) -> Evidence:
    g = (GpuSeen(0, 0, name=H100, pcie_gen=5, pcie_width=width, pcie_gen_max=5, pcie_width_max=16),)
    return evidence(g)


def _nics(hca: str) -> Evidence:
    nics = tuple(NicSeen(0, f"mlx5_{i}", link_layer="IB", rate_gbps=400.0) for i in range(4))
    return evidence(
        nics, EvidenceSetting(1, "NCCL_IB_HCA", hca, "export"), _log(IB), nccl=(account(nodes=2),), nccl_pieces=(2,)
    )


def _ports(first_gbit_s: float) -> Evidence:
    """ibstat's two ConnectX-6 (MT4123) ports, the first at ``first_gbit_s``, the second at 200 Gb/s."""
    return evidence(tuple(NicSeen(0, f"mlx5_{i}", rate_gbps=r, link_layer="IB", port=1, state="ACTIVE",
                                  ca_type="MT4123") for i, r in enumerate((first_gbit_s, 200.0))))  # fmt: skip


def _vm(link: str) -> Evidence:
    g = tuple(GpuSeen(0, i, name="NVIDIA A100-PCIE-40GB", virtualization="Pass-Through") for i in range(2))
    return evidence(g, topo(_topo({(0, 1): link}, 2), 1), _log(SHM))


def _a40(busbw: float, version: str) -> Evidence:
    r = run("all_reduce", _row(busbw, 4), _ranks("NVIDIA A40", 4), version=version)
    return evidence(r, topo(_topo(A40_CELLS, 4), 1))


def _sweep(c_gbps: float) -> Evidence:
    def pair(a: str, b: str, gbps: float, piece: int) -> object:
        ranks = f"#  Rank  0 Group  0 Pid 1 on {a} device  0 [0x1b] {H100}\n#  Rank  1 Group  0 Pid 2 on {b} device  0 [0x1b] {H100}"  # noqa: E501
        return run("all_reduce", _row(gbps), ranks, piece)

    return evidence(
        pair("node-a", "node-b", 45.0, 0), pair("node-a", "node-c", c_gbps, 1), pair("node-b", "node-c", c_gbps, 2)
    )


def _on(ev: Callable[[], Evidence]) -> Callable[[Any], None]:
    def put(ctx: Any) -> None:
        ctx.evidence = ev()

    return put


def _case(code: str, fires: bool, change: str, ev: Callable[[], Evidence], severity: str | None = None) -> Case:
    return Case(code, fires, "h200-x4", change, context=_on(ev), severity=severity)


def _read(*texts: str) -> Evidence:
    """The evidence the real readers make of ``texts`` (one input each)."""
    return join([read_input(f"evidence-{k}.txt", t) for k, t in enumerate(texts)])


# 4 x H200 (nvidia-smi -L) and the world communicator of one node, with the ring NCCL's search found
_SMI_X4 = "\n".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)" for i in range(4))
_COMM = "vm:2333:2333 [0] NCCL INFO comm 0x2ad45a80 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0\n"


def _searched(line: str) -> Evidence:
    return _read(_SMI_X4, "vm:2333:2333 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n" + _COMM + line)


def _nvls_nodes(four: float | None) -> Evidence:
    figures = [FigureSaid(2, 310.0, "310GB/s", "GB/s", sentence="I tested the NVLS on 2 servers, busBw is 310GB/s.")]
    if four is not None:
        figures.insert(0, FigureSaid(1, four, f"{four:g}GB/s", "GB/s", sentence=f"on 4 servers busBw is {four:g}GB/s."))
    said = ProseSaid(0, tuple(figures), gpu="H100", gpu_model="H100 SXM", gpu_count=8, nodes=4 if four else 2,
                     across_nodes=True, op="all_reduce", nvls=True)  # fmt: skip
    return evidence(prose=(said,), nccl_said=(NcclSaid(0, 1, "I enabled NVLS on 4 H100 servers", ("NVLS",)),))


def _nics_on_link(width: int, speed: str = "16.0") -> Evidence:
    dump = f"""<system version="1">
  <cpu numaid="0" affinity="ffff" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="0000:41:00.0" class="0x060400" link_speed="{speed} GT/s PCIe" link_width="{width}">
      <pci busid="0000:52:00.0" class="0x020700" link_speed="{speed} GT/s PCIe" link_width="{width}">
        <nic><net name="mlx5_0" dev="0" speed="200000" port="1" gdr="1"/><net name="mlx5_1" dev="1" speed="200000"
        port="1" gdr="1"/></nic>
      </pci>
    </pci>
  </cpu>
</system>"""
    return join([read_input("topo.xml", dump)])


_RING = "vm:2333:2333 [0] NCCL INFO Pattern 4, crossNic 0, nChannels {n}, bw {bw}/{bw}, type {t}/PIX, sameChannels 1\n"
_FAILED = (
    "vm:2333:2340 [0] graph/search.cc:1127 NCCL WARN Could not find a path for pattern 4, falling back to simple order"
)
_X4 = _ranks("NVIDIA H200", 4)
CASES: list[Case] = [
    _case("TD021", True, "4 x H200 all_reduce 359 GB/s at 2 GiB", lambda: evidence(
        run("all_reduce", _row(359.1, 4, 2 << 30), _X4), topo(_topo({}, 4), 1))),
    _case("TD021", False, "4 x H200 all_reduce 120 GB/s", lambda: evidence(
        run("all_reduce", _row(120.0, 4, 2 << 30), _X4), topo(_topo({}, 4), 1))),
    _case("TD022", True, "2 x H100 at 110 GB/s, no log", lambda: _h100(110.0), severity="warning"),
    _case("TD022", True, "largest size 1 KiB", lambda: evidence(
        run("all_reduce", _row(0.05, 2, 1024), _ranks(H100, 2))), severity="info"),
    _case("TD022", False, "2 x H100 at 330 GB/s", lambda: _h100(330.0)),
    _case("TD023", True, "NCCL_P2P_LEVEL=LOC, 24.9 GB/s via SHM", lambda: _h100(24.9, _log(LOC))),
    _case("TD023", False, "NCCL_P2P_LEVEL=NVL, 330 GB/s via P2P", lambda: _h100(330.0, _log(NVL))),
    _case("TD024", True, "SHM on NV18, no variable", lambda: evidence(topo(NV18_2, 1), _log(SHM))),
    _case("TD024", False, "P2P on NV18", lambda: evidence(topo(NV18_2, 1), _log(P2P))),
    _case("TD025", True, "two nodes, no libibverbs, NCCL_IB_DISABLE=1", lambda: evidence(
        run("broadcast", _row(1.0, 2, 1024), "#  Rank  0 Pid 1 on a device 0 [0x00] Tesla V100-PCIE-16GB\n"
            "#  Rank  1 Pid 2 on b device 0 [0x00] Tesla V100-PCIE-16GB"),
        nccl_lines(VERBS), EvidenceSetting(1, "NCCL_IB_DISABLE", "1", "mpirun -x")), severity="warning"),
    _case("TD025", True, "two nodes, NCCL_IB_DISABLE=1, ibstat lists mlx5_0", lambda: evidence(
        run("broadcast", _row(1.0, 2, 1024), "#  Rank  0 Pid 1 on a device 0 [0x00] Tesla V100-PCIE-16GB\n"
            "#  Rank  1 Pid 2 on b device 0 [0x00] Tesla V100-PCIE-16GB"),
        EvidenceSetting(1, "NCCL_IB_DISABLE", "1", "mpirun -x"),
        NicSeen(2, "mlx5_0", rate_gbps=200.0, link_layer="IB", port=1, state="ACTIVE")), severity="error"),
    _case("TD025", True, "two nodes over NET/Socket, no RDMA NIC shown", lambda: evidence(_log(SOCKETS)),
          severity="warning"),
    _case("TD025", False, "two nodes on IB", lambda: evidence(_log(IB), nccl=(account(nodes=2),), nccl_pieces=(2,))),
    _case("TD026", True, "GDR disabled for the HCA", lambda: evidence(_log(GDR_OFF))),
    _case("TD026", True, "GDR on node-a only", lambda: evidence(_log(ONE_SIDED), nccl=(account(nodes=2),),
                                                                nccl_pieces=(2,))),
    _case("TD026", False, "GDR on both sides", lambda: evidence(_log(BOTH_SIDES), nccl=(account(nodes=2),),
                                                                nccl_pieces=(2,))),
    _case("TD027", True, "4 x A40 across sockets at 11 GB/s", severity="info", ev=lambda: evidence(
        run("all_reduce", _row(11.0, 4), _ranks("NVIDIA A40", 4)), topo(_topo(dict.fromkeys(A40_CELLS, "SYS"), 4), 1))),
    _case("TD027", True, "4 x A40 across sockets, NCCL_P2P_LEVEL=SYS, 6 GB/s", lambda: evidence(
        run("all_reduce", _row(6.0, 4), _ranks("NVIDIA A40", 4)), topo(_topo(dict.fromkeys(A40_CELLS, "SYS"), 4), 1),
        EvidenceSetting(2, "NCCL_P2P_LEVEL", "SYS", "export")), severity="warning"),
    _case("TD027", False, "4 x A40 under one switch", lambda: evidence(
        run("all_reduce", _row(21.0, 4), _ranks("NVIDIA A40", 4)), topo(_topo(dict.fromkeys(A40_CELLS, "PXB"), 4), 1))),
    _case("TD028", True, "every pair PHB in a VM, SHM", lambda: _vm("PHB")),
    _case("TD028", False, "a PIX pair in a VM", lambda: _vm("PIX")),
    _case("TD029", True, "P2P 9.9 GB/s against 22 staged", lambda: _p2p(ACS_ON)),
    _case("TD029", False, "P2P 25 GB/s against 22 staged", lambda: _p2p(OK_ON)),
    _case("TD030", True, "GPU0 at x8 of x16", lambda: _pcie(8)),
    _case("TD030", False, "GPU0 at x16", lambda: _pcie(16)),
    _case("TD031", True, "H100 SXM pair at NV12", lambda: evidence(topo(_topo({(0, 1): "NV12"}, 2), 1),
                                                                   GpuSeen(0, 0, name=H100)), severity="error"),
    # stanford_alpaca#32's fix in topo -m's words: PHB between the GPUs of an NVSwitch model, no figure
    _case("TD031", True, "H100 SXM pair at PHB (NVLinks absent against the model)", lambda: evidence(
        topo(_topo({(0, 1): "PHB"}, 2), 1), GpuSeen(0, 0, name=H100)), severity="warning"),
    _case("TD031", False, "H100 SXM pair at NV18", lambda: evidence(topo(NV18_2, 1), GpuSeen(0, 0, name=H100))),
    _case("TD032", True, "4 x A40 in bridged pairs, 2.15.5", lambda: _a40(11.0, "2.15.5"), severity="info"),
    _case("TD032", False, "2 x A40 on their bridge", lambda: evidence(
        run("all_reduce", _row(44.0), _ranks("NVIDIA A40", 2)), topo(_topo({(0, 1): "NV4"}, 2), 1))),
    _case("TD032", True, "8 x RTX A6000 NVLinked in pairs, no figure", lambda: evidence(
        topo(_topo({(a, b): ("NV4" if b == a + 1 and a % 2 == 0 else "SYS") for a in range(8) for b in range(a + 1, 8)},
                   8), 1)), severity="warning"),
    _case("TD033", True, "2 x RTX 4090 at 11 GB/s", lambda: evidence(
        run("all_reduce", _row(11.0), _ranks("NVIDIA GeForce RTX 4090", 2))), severity="warning"),
    _case("TD033", True, "2 x RTX 4090 copies at 3 GB/s, far under PCIe", lambda: evidence(
        GpuSeen(0, 0, name="NVIDIA GeForce RTX 4090"), GpuSeen(0, 1, name="NVIDIA GeForce RTX 4090"),
        topo(_topo({(0, 1): "PHB"}, 2), 1),
        matrix("D\\D 0 1\n0 900 3.2\n1 3.2 900", "unidirectional p2p=enabled", "unidirectional", True)),
        severity="info"),
    _case("TD033", False, "2 x RTX A6000 at 11 GB/s", lambda: evidence(
        run("all_reduce", _row(11.0), _ranks("NVIDIA RTX A6000", 2)))),
    _case("TD034", True, "both ranks on CUDA device 0", lambda: evidence(_log(SPLIT))),
    _case("TD034", False, "ranks on devices 0 and 1", lambda: evidence(topo(NV18_2, 1), _log(P2P))),
    _case("TD035", True, "NCCL_IB_HCA=mlx5_0 of four", lambda: _nics("mlx5_0")),
    _case("TD035", False, "NCCL_IB_HCA=mlx5 (every one)", lambda: _nics("mlx5")),
    _case("TD036", True, "NCCL_MAX_NCHANNELS=1, 21.2 GB/s", lambda: _h100(
        21.2, _log("node:1:2 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 1|" + P2P)), severity="error"),
    _case("TD036", True, "NCCL_MAX_NCHANNELS=1 and no figure", lambda: evidence(
        _log("node:1:2 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 1|" + P2P)), severity="info"),
    _case("TD036", True, "NCCL_PROTO=LL and no figure", lambda: evidence(
        _log("node:1:2 [0] NCCL INFO NCCL_PROTO set by environment to LL|" + P2P)), severity="warning"),
    _case("TD036", False, "NCCL_MAX_NCHANNELS=32, 330 GB/s", lambda: _h100(
        330.0, _log("node:1:2 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 32|" + P2P))),
    _case("TD037", True, "4 x A40 at 1 GB/s on NCCL 2.16.2", lambda: _a40(1.0, "2.16.2")),
    _case("TD037", False, "4 x A40 at 1 GB/s on NCCL 2.15.5", lambda: _a40(1.0, "2.15.5")),
    _case("TD038", True, "node-c in every slow pair", lambda: _sweep(14.0)),
    _case("TD038", False, "every pair at 45 GB/s", lambda: _sweep(45.0)),
    _case("TD982", True, "mlx5_0 at 100 Gb/s beside a ConnectX-6 sibling at 200", lambda: _ports(100.0),
          severity="warning"),
    _case("TD982", True, "two ConnectX-6 ports at 200 Gb/s: the network's ceiling", lambda: _ports(200.0),
          severity="info"),
    _case("TD982", False, "NICs named by topo -m only, no port listed", lambda: evidence(
        (NicSeen(0, "mlx5_0", alias="NIC0"), NicSeen(0, "mlx5_1", alias="NIC1")))),
    # the reporter's words as the prose reader gives them (nccl-tests#117's AMD host of RTX 4090, nccl#1455's board)
    _case("TD986", True, "an AMD EPYC host of 8 x RTX 4090 said to be slow", lambda: evidence(prose=(ProseSaid(
        0, gpu="RTX 4090", gpu_model="RTX 4090", gpu_count=8, hosts=("epyc",), slow=True),)), severity="warning"),
    _case("TD986", False, "the same host asked about, not said to be slow", lambda: evidence(prose=(ProseSaid(
        0, gpu="RTX 4090", gpu_model="RTX 4090", gpu_count=8, hosts=("epyc",), asks=True),))),
    _case("TD987", True, "8 x H100 SXM named with a question and no figure", lambda: evidence(prose=(ProseSaid(
        0, gpu="H100 SXM", gpu_model="H100 SXM", gpu_count=8, asks=True),)), severity="info"),
    _case("TD987", False, "two nodes named, no GPU and no NIC", lambda: evidence(prose=(ProseSaid(
        0, nodes=2, across_nodes=True, asks=True),))),
    # how a job scales, in the reporter's words (open_clip#466, open_clip#325, imagenet-multiGPU.torch#59,
    # accelerate#71, flash-attention#1021)
    _case("TD988", True, "30 samples/s per GPU on one node, 10 on two, interconnect not stated",
          lambda: _scaled(_per_gpu(30.0, 1), _per_gpu(10.0, 2)), severity="warning"),
    _case("TD988", True, "slower as machines are added, over a 10 Gb/s interconnect", lambda: _scaled(
        links=(LinkSaid(1, "network", 10.0, False, "10Gbps interconnect"),), worse_with_nodes=True),
          severity="warning"),
    _case("TD988", False, "28 samples/s per GPU on one node and on two", lambda: _scaled(_per_gpu(30.0, 1),
                                                                                       _per_gpu(28.0, 2))),
    _case("TD989", True, "a batch of 0.48 s on one PCIe GPU, 2.3 s on four", lambda: _scaled(
        _step(0.48, 1), _step(2.3, 4), links=(LinkSaid(1, "pcie", None, False, "PCIE16"),)), severity="warning"),
    _case("TD989", True, "an epoch of 21 s on one RTX 2080 Ti and on two", lambda: _scaled(
        SpeedSaid(1, 21.0, "s", "total", "21 seconds", gpus=1), SpeedSaid(1, 21.0, "s", "total", "21 seconds", gpus=2),
        gpu="RTX 2080 Ti"), severity="info"),
    _case("TD989", False, "a batch of 0.5 s on one GPU and 0.55 s on four", lambda: _scaled(_step(0.5, 1),
                                                                                          _step(0.55, 4))),
    _case("TD990", True, "normal with 1-6 cards, slow with 7 or 8", lambda: _scaled(
        good_up_to=6, slow_from=7, slow_gpu=6, slow_gpu_text="normally if I use 1-6 cards, slow with 7 or 8 cards"),
          severity="warning"),
    _case("TD990", False, "slow with every count of cards", lambda: _scaled(worse_with_gpus=True)),
    _case("TD983", True, "mpirun -np 2 on two hosts, two averages after it", lambda: _separate(2)),
    _case("TD983", False, "mpirun -np 2 on two hosts, one average after it", lambda: _separate(1)),
    _case("TD984", True, "4 x H200, ring search of 2 channels x 12 GB/s over PHB", lambda: _searched(
        _RING.format(n=2, bw="12.000000", t="PHB")), severity="warning"),
    _case("TD984", True, "4 x H200, ring search of 12 channels x 30 GB/s over NVL", lambda: _searched(
        _RING.format(n=12, bw="30.000000", t="NVL")), severity="info"),
    _case("TD984", False, "4 x H200, no graph line", lambda: _searched("")),
    _case("TD985", True, "the ring's search fell back to the simple order", lambda: _searched(_FAILED)),
    _case("TD985", False, "the ring's search found 12 channels", lambda: _searched(
        _RING.format(n=12, bw="30.000000", t="NVL"))),
    # NVIDIA/nccl#1031's posts: NVLS all_reduce at 310 GB/s on two nodes, 180 on four
    _case("TD991", True, "NVLS all_reduce at 310 GB/s on 2 nodes and 180 on 4", lambda: _nvls_nodes(180.0)),
    _case("TD991", False, "NVLS all_reduce at 310 GB/s on 2 nodes only", lambda: _nvls_nodes(None)),
    # NVIDIA/nccl#439: two HDR NICs under one PCI link in NCCL's topology dump
    _case("TD993", True, "mlx5_0 and mlx5_1 behind one Gen4 x16 link in NCCL's dump", lambda: _nics_on_link(16)),
    _case("TD993", False, "the same NICs behind one Gen5 x16 link (48 GB/s)", lambda: _nics_on_link(16, "32.0")),
    _case("TD992", True, "nvidia-smi -q: power limit 250 W, default 370 W", lambda: _power(250.0), severity="warning"),
    _case("TD992", False, "nvidia-smi -q: power limit 360 W, default 370 W", lambda: _power(360.0)),
    _case("TD994", True, "nvidia-smi -L: two A100 and an RTX 4090, the run said slow", lambda: _said(
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\nGPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-2)\n"
        "GPU 2: NVIDIA GeForce RTX 4090 (UUID: GPU-3)\n"), severity="warning"),
    _case("TD994", True, "the same listing, no run said of it", lambda: _read(
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\nGPU 1: NVIDIA GeForce RTX 4090 (UUID: GPU-2)\n"), severity="info"),
    _case("TD994", False, "an A100 of 80 GB beside one of 40 GB: one model", lambda: _said(
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2)\n")),
    _case("TD995", True, "two RTX 3090, GPU 1 on PCIe 2.0 x4", lambda: _said(
        "Two RTX 3090 cards, GPU 1 on PCIe 2.0 x4 in the chipset slot, and tensor parallel runs slow.\n"),
        severity="warning"),
    _case("TD995", False, "two RTX 3090, GPU 1 on PCIe 4.0 x16", lambda: _said(
        "Two RTX 3090 cards, GPU 1 on PCIe 4.0 x16 in the second slot, and tensor parallel runs slow.\n")),
    _case("TD979", True, "osu_bw D D at 0.35 GB/s, H D at 6.1", lambda: _osu(345.4, 6122.0), severity="warning"),
    _case("TD979", False, "osu_bw D D at 5.9 GB/s, H D at 6.1", lambda: _osu(5900.0, 6122.0)),
    _case("TD978", True, "horovod built with Gloo only", lambda: _horovod("[ ] NCCL"), severity="warning"),
    _case("TD978", False, "horovod built with NCCL", lambda: _horovod("[X] NCCL")),
    _case("TD970", True, "latency asked of all_reduce_perf -g 4", lambda: _read(
        "Small all-reduce latency is around 22 us on 4 H200, far from what I expected.\n",
        "./build/all_reduce_perf -b 8 -e 128M -f 2 -g 4\n"), severity="warning"),
    _case("TD971", True, "an all-reduce said to take long on one device", lambda: _read(
        "In the profile the all-reduce after each matmul takes much longer on one device than on the others.\n"),
        severity="warning"),
    _case("TD971", False, "an all-reduce said to take long on every device", lambda: _read(
        "In the profile the all-reduce after each matmul takes much longer than the matmul itself.\n")),
    _case("TD970", False, "latency asked of all_reduce_perf -g 1", lambda: _read(
        "Small all-reduce latency is around 22 us on 4 H200, far from what I expected.\n",
        "mpirun -np 4 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 1\n")),
    _case("TD997", True, "osu_bw slower with UCX 1.15.0 than with 1.13.1", lambda: _said(
        "osu_bw D D between two nodes: bandwidth was lower with ucx 1.15.0 than with 1.13.1.\n"),
        severity="warning"),
    _case("TD997", False, "osu_bw lower than the NIC's rate", lambda: _said(
        "osu_bw D D between two nodes: bandwidth was lower with ucx 1.15.0 than the NIC's 25 GB/s.\n")),
    _case("TD996", True, "busbw 33 GB/s at 32 MiB, 19 at 64 MiB, 34 at 256 MiB", lambda: _curve(33.0, 19.0, 34.0),
          severity="warning"),
    _case("TD996", False, "busbw climbing 30, 32, 34 GB/s", lambda: _curve(30.0, 32.0, 34.0)),
    _case("TD039", True, "GPU3's copies a third of the others'", lambda: evidence(
        matrix(SLOW3, "device_to_device_memcpy_write_ce", "unidirectional", True))),
    _case("TD039", False, "every GPU's copies alike", lambda: evidence(
        matrix(EVEN4, "device_to_device_memcpy_write_ce", "unidirectional", True))),
]  # fmt: skip


def _power(limit_w: float) -> Evidence:
    """nvidia-smi -q's GPU Power Readings of one RTX 3090 with its limit set to ``limit_w``."""
    text = (
        "GPU 00000000:05:00.0\n    Product Name                          : NVIDIA GeForce RTX 3090\n"
        "    GPU Power Readings\n        Power Draw                        : 144.23 W\n"
        f"        Current Power Limit               : {limit_w:.2f} W\n"
        "        Default Power Limit               : 370.00 W\n"
    )
    return join([read_input("q.txt", text)])


def _said(listing: str) -> Evidence:
    """A post: what the reporter pasted, and a sentence of theirs that the run is slow."""
    said = "On the three GPUs all_reduce reaches only 20 GB/s busbw, much slower than expected."
    return join([read_input("paste.txt", listing), read_input("post.txt", said)])


def _curve(*busbw: float) -> Evidence:
    """An all_reduce table of two H100s at 32 MiB, 64 MiB and 256 MiB with the busbw given at each."""
    rows = "\n".join(_row(b, size=size) for b, size in zip(busbw, (32 << 20, 64 << 20, 256 << 20), strict=True))
    return evidence(run("all_reduce", rows, _ranks(H100, 2)))


def _osu(device_mbps: float, host_mbps: float) -> Evidence:
    """Two osu_bw runs between two nodes at 1 MiB: the send buffer in GPU memory, then in host memory."""
    head = "# OSU MPI-CUDA Bandwidth Test v5.6.1\n# Send Buffer on {} and Receive Buffer on DEVICE (D)\n"
    run = head + "# Size      Bandwidth (MB/s)\n65536 {:.2f}\n1048576 {:.2f}\n"
    text = run.format("DEVICE (D)", device_mbps * 0.9, device_mbps) + run.format("HOST (H)", host_mbps, host_mbps)
    return join([read_input("osu.txt", text)])


def _horovod(nccl: str) -> Evidence:
    """`horovodrun --check-build` of a PyTorch build whose tensor operations mark NCCL as ``nccl`` says."""
    text = "Horovod v0.28.1:\n\nAvailable Frameworks:\n    [X] PyTorch\n\nAvailable Tensor Operations:\n"
    return join([read_input("build.txt", text + f"    {nccl}\n    [X] Gloo\n")])
