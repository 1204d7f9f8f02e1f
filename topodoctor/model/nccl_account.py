"""NCCL's own account of a run, as plain data (JSON round-trip): what its INFO log says of the
communicator, its channels and transports, its choices, and of each host's network. ``nccl.account``
fills it; the collectives result carries it, the rules and the cause engine read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Connection:
    """Peer connections NCCL reported between two ranks over one transport."""

    rank: int
    peer: int
    transport: str  # P2P/CUMEM, P2P/IPC, P2P/direct pointer, SHM, NET/IB/0, NET/Socket/0, ...
    channels: int  # how many channel connections used it
    kind: Literal["p2p", "shm", "net", "collnet", "other"]


@dataclass(frozen=True)
class Route:
    """Channel connections as one host's log printed them, with the whole transport NCCL named."""

    rank: int  # data flows rank -> peer (ranks of the world's communicator)
    peer: int
    via: str  # as printed: NET/IB/0/GDRDMA, NET/IB/0/GDRDMA/Shared, NET/Socket/0, P2P/IPC/read, SHM/direct/direct
    kind: Literal["p2p", "shm", "net", "collnet", "other"]
    gdr: bool  # GPUDirect RDMA on this connection (the /GDRDMA flag)
    side: str  # "send" or "receive" (network connections: each end logs its own), "" for the others
    host: str  # the host whose log printed it; "" where the line carries no host
    channels: int  # how many channel connections it names


@dataclass(frozen=True)
class NetDevice:
    """A network device NCCL said it uses (``NET/IB : Using [0]mlx5_0:1/IB``, ``NET/Socket : Using [0]bond0:..``)."""

    host: str  # "" where the line carries no host
    net: Literal["IB", "Socket"]
    index: int
    name: str  # mlx5_0, bond0
    port: int | None  # the HCA port (IB)
    layer: str  # IB or RoCE for an HCA, "" for an interface
    address: str = ""  # the interface's address (Socket)


@dataclass(frozen=True)
class GdrHca:
    """NCCL's word on GPUDirect RDMA for one HCA (``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'``),
    or for one GPU and NIC as its graph decided (``GPU Direct RDMA Disabled for GPU 1b000 / HCA 0``)."""

    host: str
    net: str  # the network that printed it (IB, Socket, a plugin's name); "" for the graph's line
    hca: str  # as printed: the HCA's index, or the graph's NIC (its index to 2.20, NET id 2.21 - 2.28, 2.29 sys-local)
    name: str  # the device's name; "" where the line gives none
    enabled: bool
    gpu: str = ""  # the graph's line only: the GPU as printed (2.18 - 2.23 its bus id, 2.24 - 2.28 its rank,
    # 2.29 its sys-local id)
    rank: int | None = None  # the rank the graph's line names (2.29)


@dataclass(frozen=True)
class NcclGraphSeen:
    """One graph NCCL's search found, from its graph dump (``NCCL_GRAPH_DUMP_FILE``) or its INFO line
    (``Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1``). Speeds
    are NCCL's GB/s per channel; the link types are NCCL's (NVL, PIX, PXB, PHB, SYS, NET)."""

    piece: int = 0  # the evidence piece (a graph dump's); 0 in an account, which is of one piece
    pattern: int | None = None  # NCCL_TOPO_PATTERN_*: 1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS
    channels: int | None = None
    speed_intra_gbps: float | None = None
    speed_inter_gbps: float | None = None
    type_intra: str = ""
    type_inter: str = ""
    crossnic: int | None = None
    nets: int = 0  # distinct NICs its channels use
    fallback: bool = False  # the search found no path and NCCL put in its simple order (search.cc)


@dataclass(frozen=True)
class RankSeat:
    """Where a rank ran, as its init line printed it."""

    rank: int
    host: str  # "" where the line carries no host
    cuda_dev: int
    nvml_dev: int | None
    bus_id: str  # as NCCL printed it (hex, no domain); "" where absent


@dataclass(frozen=True)
class NcclChoice:
    """What NCCL chose for one op at one size (its TUNING log), and what its own model predicts."""

    op: str
    size_bytes: int  # as nccl-tests counts it (max of send and receive bytes), to match a row
    algorithm: str  # Ring, Tree, NVLS, ... (NCCL's names)
    protocol: str  # LL, LL128, Simple
    channels: int | None  # channels the call used; None in the 2.20 - 2.23 forms
    predicted_busbw_gbps: float | None  # NCCL's cost table at this size (latency included); None without it
    calls: int = 1


@dataclass(frozen=True)
class NcclAccount:
    """NCCL's own account of the run, read from its INFO log (one file per rank)."""

    version: str | None
    ranks: int | None
    nodes: int | None
    channels: int | None  # collective channels NCCL built
    p2p_channels: int | None
    nvls_channels: int | None
    nvls: bool | None  # NVLink SHARP / multicast in use; None when the log does not say
    gdr: bool | None  # GPUDirect RDMA on a network connection
    connections: tuple[Connection, ...]
    rings: tuple[str, ...]  # "0 1 2 3", per ring channel as NCCL printed it (first few)
    trees: tuple[str, ...]
    env: dict[str, str]  # NCCL variables NCCL reported as set
    logs: int  # rank logs read
    warnings: tuple[str, ...] = ()  # NCCL WARN lines
    choices: tuple[NcclChoice, ...] = ()  # per op and size (NCCL_DEBUG_SUBSYS with TUNING)
    graphs: tuple[str, ...] = ()  # the graph searches: "ring 12 ch x 30/30 GB/s NVL/PIX"
    searches: tuple[NcclGraphSeen, ...] = ()  # the same, as data, each distinct line once (INFO with GRAPH)
    search_failed: tuple[int, ...] = ()  # the patterns whose search found no path ("falling back to simple order")
    gpu_paths: tuple[tuple[str, float], ...] = ()  # NCCL's paths between the GPUs of a node: (NVL/PIX/SYS..., GB/s)
    # What each host's INFO lines said of itself and its network; empty where the log does not say
    local_ranks: int | None = None  # ranks on the first rank's node (the world communicator's localRanks)
    seats: tuple[RankSeat, ...] = ()  # rank -> host and device, from the init lines
    routes: tuple[Route, ...] = ()  # connections per printing host, with the whole transport and its flags
    networks: dict[str, str] = field(default_factory=dict)  # host -> "Using network" (IB, Socket, a plugin)
    net_devices: tuple[NetDevice, ...] = ()  # NET/IB : Using / NET/Socket : Using, per host
    gdr_hcas: tuple[GdrHca, ...] = ()  # GPU Direct RDMA Enabled / Disabled for HCA, per host
    ib_absent: tuple[str, ...] = ()  # hosts whose log says NET/IB : No device found

    def choice(self, op: str, size_bytes: int) -> NcclChoice | None:
        """NCCL's choice for a row (same op and size), if it logged one."""
        return next((c for c in self.choices if c.op == op and c.size_bytes == size_bytes), None)
