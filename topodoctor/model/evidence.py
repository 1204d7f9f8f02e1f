"""What the evidence a user brings says, as plain data: the readers' answer (``topodoctor/evidence/``)
and the diagnosis' input (``topodoctor diagnose``).

Each reader turns one kind of text (nccl-tests' table, ``nvidia-smi topo -m``, a copy matrix, an NCCL log,
``lspci -vvv``, a command line ...) into the parts below, partial where the text is partial. ``Evidence``
joins the parts of every input given; nothing here reads a file or judges. Every part says which
``Piece`` (input and kind) it came from, so a finding can quote its source. Fields a text did not show
stay at their "not shown" value (``None``, ``""`` or empty): not shown is never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from topodoctor.model.collectives import NcclAccount, RankInfo, Row
from topodoctor.model.evidence_prose import ProseSaid
from topodoctor.model.nccl_account import NcclGraphSeen

# The kinds of text a reader recognises, detected by content (never by a file's name).
Kind = Literal[
    "nccl-tests",  # nccl-tests' text output of any *_perf binary (or its -J JSON)
    "topo-matrix",  # nvidia-smi topo -m
    "topo-p2p",  # nvidia-smi topo -p2p r|w|n|a|p
    "nvlink-status",  # nvidia-smi nvlink -s / --status
    "nvlink-errors",  # nvidia-smi nvlink -e
    "smi-list",  # nvidia-smi -L
    "smi-query",  # nvidia-smi -q (the sections that matter here)
    "smi-summary",  # plain nvidia-smi (the table with the driver and CUDA version)
    "p2p-bandwidth-latency",  # cuda-samples' p2pBandwidthLatencyTest
    "nvbandwidth",  # nvbandwidth's text or -j JSON
    "nccl-topo-xml",  # NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE
    "nccl-graph-xml",  # NCCL_GRAPH_DUMP_FILE / NCCL_GRAPH_FILE
    "lspci",  # lspci -vvv (ACSCtl, LnkCap, LnkSta)
    "kernel-xid",  # kernel log lines with NVRM: Xid
    "kernel-pcie-link",  # the kernel's "Gb/s available PCIe bandwidth" lines (dmesg, journalctl)
    "gpu-power",  # a GPU's power limit stated with its default (a rig report's line, a sentence)
    "command-line",  # docker run -e / --gpus, mpirun -x, srun --export, export NCCL_...=, env dumps
    "nccl-log",  # NCCL INFO / WARN output of any program
    "nccl-inspector",  # NCCL Inspector's per-collective records (2.28+)
    "health-check",  # health-check tools' lines quoting a measured copy (Azure NHC's check_gpu_bw)
    "version-line",  # a version stated on its own line: "NCCL 2.29.7", pip's nvidia-nccl-cu12==2.21.5
    "pair-sweep",  # a two-node sweep's result as people post it: "hostA,hostB   87.9" per pair
    "nic-status",  # ibstat, ibstatus, ibv_devinfo (-v), ethtool: each port's state and rate; perftest's ib_*_bw
    "osu-bandwidth",  # the OSU micro-benchmarks' osu_bw / osu_bibw table, its buffers on host or device
    "horovod-build",  # `horovodrun --check-build`: the frameworks, controllers and tensor operations built
    "prose",  # the reporter's sentences: the hardware, the op and the figures they state (evidence_prose.py)
    "nccl-words",  # NCCL's and nvidia-smi's names in the sentences: an algorithm, a release, a path class (NcclSaid)
]


@dataclass(frozen=True)
class Piece:
    """One kind of text found in one input: where it stands and how much of it could be read."""

    kind: Kind
    source: str  # the input's path as the user named it ("-" for standard input)
    first_line: int  # 1-based, inclusive
    last_line: int
    version: str = ""  # the tool's own version where it printed one (nccl-tests 2.13.9, nvbandwidth v0.8)
    cut: str = ""  # what could not be read ("the table ends inside the row of 1 GiB"); "" when read whole


@dataclass(frozen=True)
class GpuSeen:
    """One GPU as the evidence shows it. ``index`` is the index the tool printed (nvidia-smi's, or a
    CUDA ordinal where only a CUDA program showed it: ``ordinal_kind`` says which)."""

    piece: int  # index into Evidence.pieces
    index: int
    ordinal_kind: Literal["nvml", "cuda", "rank"] = "nvml"
    host: str = ""  # the node it was seen on, where the text names one
    name: str = ""  # as printed: "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB"
    bus_id: str = ""  # as nvidia-smi prints it: 00000000:18:00.0
    uuid: str = ""
    cpu_affinity: str = ""  # "0-63", as printed
    numa_affinity: str = ""
    pcie_gen: int | None = None  # current
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    nvlinks_up: int | None = None
    nvlinks_listed: int | None = None  # links the tool listed, up or not
    nvlink_gbps: float | None = None  # per link, per direction, as the tool printed it
    nvlink_errors: dict[str, int] = field(default_factory=dict)  # nvlink -e's counters summed over links
    fabric_state: str = ""  # nvidia-smi -q's Fabric State / Status
    virtualization: str = ""  # "Pass-Through", "VGPU", "None"
    clock_event_reasons: tuple[str, ...] = ()  # the reasons nvidia-smi -q marks Active
    ecc_uncorrected: int | None = None  # volatile double-bit / uncorrectable
    remapping_pending: bool | None = None
    remapping_failed: bool | None = None
    power_limit_w: float | None = None  # the limit in force (nvidia-smi -q's Current / Enforced Power Limit)
    power_default_w: float | None = None  # the board's default limit


@dataclass(frozen=True)
class PairSeen:
    """How two GPUs (or a GPU and a NIC) reach each other, as topo -m or topo -p2p prints it."""

    piece: int
    a: str  # "GPU0", "NIC1" (nvidia-smi's row names); "cuda0" where a CUDA program named the device
    b: str
    link: str = ""  # topo -m's cell: X, NV18, NV#, PIX, PXB, PHB, NODE, SYS (SOC on old drivers)
    p2p: dict[str, str] = field(default_factory=dict)  # topo -p2p's cells by mode: {"r": "OK", "w": "CNS"};
    # p2pBandwidthLatencyTest's cudaDeviceCanAccessPeer answer: {"can-access-peer": "yes" | "no"}
    host: str = ""


@dataclass(frozen=True)
class NicSeen:
    """A NIC as the evidence names it: topo -m's legend (NIC0: mlx5_0), NCCL's NET/IB lines, lspci."""

    piece: int
    name: str  # mlx5_0, ens3f0
    alias: str = ""  # topo -m's NIC0
    host: str = ""
    rate_gbps: float | None = None  # the port's rate where shown (NCCL's speed is Mb/s: converted)
    link_layer: str = ""  # IB, RoCE, Ethernet
    gdr: bool | None = None  # GPUDirect RDMA as NCCL's topology dump marks it (gdr="1")
    port: int | None = None  # the port number, where the tool prints one per port (ibstat, ibstatus)
    state: str = ""  # ACTIVE, DOWN (ibstat's State, ibstatus' state, ethtool's Link detected)
    ca_type: str = ""  # ibstat's CA type (MT4123), ibv_devinfo's vendor_part_id as MT<id>
    rate_text: str = ""  # the rate as printed: "100 Gb/sec (4X EDR)", "200", "100000Mb/s"
    measured_gbps: float | None = None  # perftest's (ib_write_bw ...) average over this device, Gb/s
    pci_busid: str = ""  # NCCL's topology dump: the PCI device the NIC's net sits under (several nets: one link)
    pci_link_gbps: float | None = None  # ... and that link as NCCL rates it (width x lane rate / 80, GB/s)


@dataclass(frozen=True)
class CopyMatrix:
    """One matrix of copy figures between devices: p2pBandwidthLatencyTest's four, or one nvbandwidth
    testcase. ``values[i][j]`` is from ``rows[i]`` to ``columns[j]`` (None where the tool printed none or
    N/A); a host-to-device testcase has the single row "host"."""

    piece: int
    tool: Literal["p2pBandwidthLatencyTest", "nvbandwidth", "topodoctor"]
    testcase: str  # nvbandwidth's name (device_to_device_memcpy_read_ce), or p2pBandwidthLatencyTest's
    # heading in short: "unidirectional p2p=disabled", "bidirectional p2p=enabled", "latency p2p=enabled"
    direction: Literal["unidirectional", "bidirectional", "latency"]
    p2p: bool | None  # peer access on (True), off (False), not said (None)
    unit: Literal["GB/s", "us"]
    rows: tuple[str, ...]  # device labels as printed: "0", "1", ... or "host"
    columns: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    host: str = ""
    sum_gbps: float | None = None  # nvbandwidth's "SUM testcase value" where printed


@dataclass(frozen=True)
class CollectiveRun:
    """One nccl-tests binary's output: its header, its table and its closing lines."""

    piece: int
    op: str  # all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv, ...
    rows: tuple[Row, ...]
    ranks: tuple[RankInfo, ...] = ()  # the "#  Rank  N Group ... on HOST device D [BUSID] NAME" lines
    nranks: int | None = None
    nodes: int | None = None  # distinct hosts among the ranks
    threads: int | None = None  # nThread
    gpus_per_thread: int | None = None  # nGpus
    avg_busbw_gbps: float | None = None  # "# Avg bus bandwidth"
    out_of_bounds: int | None = None  # "# Out of bounds values : N"
    nccl_version: str = ""  # the library nccl-tests printed, or NCCL's banner in the same output
    test_version: str = ""  # nccl-tests' own version


@dataclass(frozen=True)
class PcieSeen:
    """One PCIe function as ``lspci -vvv`` shows it, or as the kernel reports its link at boot ("252.048 Gb/s
    available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link at 0000:01:00.0 (capable of ...)"): there
    ``link_sta`` is the narrowest link on the path to the root port, ``link_cap`` the function's own."""

    piece: int
    bdf: str  # as lspci prints it (0000:18:00.0 or 18:00.0)
    description: str = ""  # "PCI bridge: Broadcom / LSI PEX890xx", "3D controller: NVIDIA ..."
    acs_ctl: dict[str, bool] = field(default_factory=dict)  # ACSCtl's flags: {"SrcValid": True, "ReqRedir": ...}
    link_cap: tuple[float, int] | None = None  # (GT/s, width) the port can do
    link_sta: tuple[float, int] | None = None  # (GT/s, width) it trained to
    downgraded: bool | None = None  # lspci's "(downgraded)" mark; the kernel's "limited by"
    host: str = ""
    limited_at: str = ""  # the kernel's limiting device: the function itself, or a port above it
    available_gbit_s: float | None = None  # the kernel's figures, Gb/s as it prints them
    capable_gbit_s: float | None = None


@dataclass(frozen=True)
class XidSeen:
    """One kernel XID line."""

    piece: int
    code: int
    bus_id: str = ""
    text: str = ""  # the rest of the line as the driver wrote it
    host: str = ""


# how a setting is quoted that only the reporter's sentences state ("I set NCCL_IB_DISABLE=1"): the run used
# it on their word, and no tool's output shows it
SAID_SETTING = "in the reporter's words"
# one the sentence ties to the slowdown ("when setting NCCL_SHM_DISABLE=1 I see a large drop"): the reporter's
# own run with and without it, not a list of what was tried
SAID_WITH_SLOWDOWN = f"{SAID_SETTING}, the slowdown said with it:"


@dataclass(frozen=True)
class EvidenceSetting:
    """A variable the job ran with, and where the evidence shows it: a command line (``docker run -e``,
    ``mpirun -x``, ``srun --export``, ``export``), NCCL's own ``set by environment to`` line, an env dump."""

    piece: int
    name: str
    value: str
    how: str = ""  # "docker run -e", "mpirun -x", "NCCL INFO", "export", "env"
    host: str = ""


@dataclass(frozen=True)
class Launch:
    """What a command line says of how the job was started: containers and the GPUs each sees."""

    piece: int
    launcher: str  # docker, podman, mpirun, srun, torchrun, kubectl, enroot/pyxis; nccl-tests: a binary run bare
    gpus: str = ""  # --gpus / NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES as given
    ipc_host: bool | None = None  # docker --ipc=host
    shm_size: str = ""  # --shm-size
    network_host: bool | None = None  # --network=host / --net=host
    devices: tuple[str, ...] = ()  # --device /dev/infiniband ...
    privileged: bool | None = None
    text: str = ""  # the command line, cut to a few hundred characters
    program: str = ""  # the nccl-tests binary it runs (all_reduce_perf), where it runs one
    min_bytes: int | None = None  # nccl-tests' -b / --minbytes
    max_bytes: int | None = None  # nccl-tests' -e / --maxbytes
    hosts: tuple[tuple[str, int | None], ...] = ()  # -H / --host node1:2,node2:2: each host and its slots
    nodes: int | None = None  # the nodes it spans as it says: -H's hosts, --nnodes N, srun -N N, a --node_rank given
    processes: int | None = None  # the processes an MPI launcher starts (mpirun -np N, srun -n N), where it says
    gpus_per_process: int | None = None  # nccl-tests' -g GPUs times its -t threads, where either is given


@dataclass(frozen=True)
class NcclLine:
    """One NCCL INFO / WARN line as it stood, with the host and CUDA device its prefix names
    (``host:pid:tid [dev] NCCL INFO ...``): what the account leaves out the diagnosis reads here (which
    network NCCL chose, GPUDirect RDMA per host and direction, an HCA it refused), quoting the line."""

    piece: int
    line: int  # 1-based, in the piece's input
    text: str  # from "NCCL" on
    host: str = ""
    device: int | None = None  # the [N] of the prefix: the logging process's CUDA device


@dataclass(frozen=True)
class OsuRun:
    """One run of the OSU micro-benchmarks' bandwidth test (osu_bw, osu_bibw): where its buffers were (the CUDA
    build's "Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)"), and its MB/s at the sizes shown."""

    piece: int
    test: str  # "bw" or "bibw"
    send: str  # "device", "host", or "" where neither the header nor the command line says
    recv: str
    rows: tuple[tuple[int, float], ...]  # (message bytes, MB/s), as printed
    line: int = 0  # 1-based: the test's title line


@dataclass(frozen=True)
class HorovodBuild:
    """Horovod's build as `horovodrun --check-build` prints it: each section's names, with whether they are built."""

    piece: int
    version: str
    frameworks: tuple[tuple[str, bool], ...]
    controllers: tuple[tuple[str, bool], ...]
    operations: tuple[tuple[str, bool], ...]  # the tensor operations: NCCL, DDL, CCL, MPI, Gloo
    line: int = 0  # 1-based: the "Horovod vX.Y.Z:" line


@dataclass(frozen=True)
class SweepPair:
    """One pair of nodes of a two-node sweep and its figure, as a sweep script prints it: the pair's
    busbw in GB/s (the figure carries no unit; a sweep prints bandwidth, so it is read as that)."""

    piece: int
    a: str
    b: str
    busbw_gbps: float
    note: str = ""  # what followed the figure ("# crossing TOR")
    line: int = 0  # 1-based, in the piece's input


@dataclass(frozen=True)
class NcclSaid:
    """What one sentence names by NCCL's and nvidia-smi's own words (evidence/nccl_said.py): names, not figures."""

    piece: int
    line: int  # 1-based, in the piece's input
    text: str  # the sentence, cut to a few hundred characters
    algorithms: tuple[str, ...] = ()  # NCCL_ALGO's names: NVLSTree, NVLS, Tree, Ring, CollNetDirect, PAT
    versions: tuple[str, ...] = ()  # NCCL releases named ("NCCL 2.19.3"): the run's, or one compared with
    paths: tuple[str, ...] = ()  # nvidia-smi's path classes said beside NVLink or PCIe (PHB, SYS, ...)
    nvlink: bool = False  # NVLink (or an SXM part) named
    nvlink_absent: bool = False  # ... said not to carry the traffic ("not using NVLink", "no nv links")
    rented: bool = False  # a rented or cloud instance, a provider
    pcie_switch: bool = False  # a PCIe switch named
    nics_used: int | None = None  # "only used 1 HCA": the NICs the sentence says NCCL used
    nics_named: tuple[str, ...] = ()  # RDMA devices the sentence names (mlx5_0, mlx5_1)
    rings: tuple[int, ...] = ()  # ring or channel counts stated ("1 ring", "both 2 rings")


@dataclass(frozen=True)
class Evidence:
    """Everything the inputs showed, joined: one per ``topodoctor diagnose`` run."""

    pieces: tuple[Piece, ...] = ()
    gpus: tuple[GpuSeen, ...] = ()
    pairs: tuple[PairSeen, ...] = ()
    nics: tuple[NicSeen, ...] = ()
    copies: tuple[CopyMatrix, ...] = ()
    collectives: tuple[CollectiveRun, ...] = ()
    pcie: tuple[PcieSeen, ...] = ()
    xids: tuple[XidSeen, ...] = ()
    settings: tuple[EvidenceSetting, ...] = ()
    launches: tuple[Launch, ...] = ()
    graphs: tuple[NcclGraphSeen, ...] = ()  # NCCL's graph dumps
    nccl: tuple[NcclAccount, ...] = ()  # one per NCCL log piece (nccl/'s account of it), in pieces' order
    nccl_pieces: tuple[int, ...] = ()  # the piece each NcclAccount came from
    nccl_lines: tuple[NcclLine, ...] = ()  # every NCCL INFO / WARN line of the NCCL log pieces, in order
    sweeps: tuple[SweepPair, ...] = ()  # two-node sweeps' pairs
    osu: tuple[OsuRun, ...] = ()  # the OSU micro-benchmarks' bandwidth runs
    horovod: tuple[HorovodBuild, ...] = ()  # Horovod's builds as `--check-build` prints them
    prose: tuple[ProseSaid, ...] = ()  # what the reporter's sentences claim, one per input that states any
    nccl_said: tuple[NcclSaid, ...] = ()  # what the sentences name by NCCL's and nvidia-smi's words
    driver_version: str = ""
    cuda_version: str = ""
    nccl_version: str = ""  # as a version line stated it (NCCL's own lines and nccl-tests' header win)
    unreadable: tuple[str, ...] = ()  # inputs that held no kind this reads, each as "path: why"
