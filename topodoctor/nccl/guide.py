"""The NCCL (and CUDA) settings users set that can slow or break a collective: what each means in
NCCL's documentation, what leaving it unset gives, what part of a run it touches, and what to do
about it. The hand-written half of the variable table (``nccl.variables`` holds, for every
variable, the releases that read it, its type and its source default).

Read by the cause engine (which of them the run had, and whether they could have touched it),
by ``check``'s lint and by docs/diagnosis.md. Facts from NCCL's environment documentation and
source (``src/graph/tuning.cc``, ``src/init.cc``, ``src/transport/*.cc``, NCCL 2.28).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from topodoctor.nccl.variables import DEBUG_ONLY, Variable, table

# What a setting acts on; the cause engine decides from the run's evidence whether that part was used.
Kind = Literal[
    "protocol",  # how data is packed on the wire (LL, LL128, Simple)
    "algorithm",  # ring, tree, NVLS, ...
    "channels",  # how many channels (CTAs) carry a collective
    "threads",  # threads per CTA
    "buffer",  # the staging buffer between peers
    "p2p",  # the GPU-to-GPU transport (NVLink, PCIe)
    "shm",  # the host-memory transport
    "net",  # the network transport (IB, RoCE, sockets)
    "memory",  # how NCCL allocates and shares its buffers
    "launch",  # how kernels are launched
    "multicast",  # NVLink SHARP (NVLS)
    "identity",  # how NCCL tells nodes apart
    "interface",  # which network interfaces NCCL's sockets use (bootstrap, the socket transport)
]


@dataclass(frozen=True)
class Setting:
    """One variable: NCCL's meaning, its default, what it acts on, how it slows or breaks a run, the fix."""

    name: str
    kind: Kind
    meaning: str
    default: str  # what leaving it unset gives
    harm: str  # how it can slow or break a run
    fix: str

    @property
    def debug_only(self) -> bool:
        """NCCL documents it as a debugging knob."""
        return self.name in DEBUG_ONLY

    @property
    def variable(self) -> Variable | None:
        """What NCCL's source says of it (releases, type, default); None for a variable NCCL does not read."""
        return table().get(self.name)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "NCCL_PROTO",
        "protocol",
        "the protocols NCCL may use (LL, LL128, Simple; a leading ^ excludes the ones listed)",
        "every protocol the platform supports, chosen per size",
        "LL packs 8 bytes of data with 8 of flags (half the link), LL128 keeps 120 of 128 bytes; without "
        "Simple, large messages never reach full bandwidth",
        "Unset NCCL_PROTO: NCCL picks the protocol per message size from its tuning model.",
    ),
    Setting(
        "NCCL_ALGO",
        "algorithm",
        "the algorithms NCCL may use (Ring, Tree, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT), "
        "optionally per operation",
        "every algorithm the topology supports, chosen per operation and size",
        "an operation none of whose algorithms is allowed fails with 'invalid usage' (all_gather has no "
        "Tree); a slower algorithm costs bandwidth",
        "Unset NCCL_ALGO (or allow Ring for every operation): NCCL picks the algorithm per operation.",
    ),
    Setting(
        "NCCL_BUFFSIZE",
        "buffer",
        "the size of the buffer each pair of ranks stages data through, per channel",
        "4 MiB (4194304)",
        "a small buffer cuts every transfer into small steps, each paying a synchronisation",
        "Unset NCCL_BUFFSIZE (4 MiB); lower it only to save memory, and measure.",
    ),
    Setting(
        "NCCL_NTHREADS",
        "threads",
        "CUDA threads per block of NCCL's kernels (64, 128, 256 or 512)",
        "512 on recent GPUs",
        "fewer threads per channel move less data per cycle; NVLink is left idle",
        "Unset NCCL_NTHREADS: NCCL uses 512 threads per block on recent GPUs.",
    ),
    Setting(
        "NCCL_MAX_NCHANNELS",
        "channels",
        "the most channels NCCL may use (each channel is one CUDA block)",
        "as many as the topology search builds (up to 64)",
        "too few channels cannot fill NVLink",
        "Unset NCCL_MAX_NCHANNELS (or raise it); NCCL builds the channels the topology needs.",
    ),
    Setting(
        "NCCL_MIN_NCHANNELS",
        "channels",
        "the fewest channels NCCL may use",
        "as many as the topology search builds",
        "with NCCL_MAX_NCHANNELS, it pins the channel count",
        "Unset NCCL_MIN_NCHANNELS unless a measurement shows a gain.",
    ),
    Setting(
        "NCCL_MAX_CTAS",
        "channels",
        "the most CUDA blocks (CTAs) NCCL's kernels may use",
        "as many as the topology search builds (up to 64)",
        "too few blocks are too few channels: NVLink is not filled",
        "Unset NCCL_MAX_CTAS (or raise it) unless GPU compute must be kept for the job.",
    ),
    Setting(
        "NCCL_MIN_CTAS",
        "channels",
        "the fewest CUDA blocks (CTAs) NCCL's kernels may use",
        "1",
        "more blocks than needed take SMs from the job's own kernels",
        "Unset NCCL_MIN_CTAS unless a measurement shows a gain.",
    ),
    Setting(
        "NCCL_MAX_P2P_NCHANNELS",
        "channels",
        "the most channels point-to-point operations may use",
        "64",
        "too few channels slow send/recv and all-to-all",
        "Unset NCCL_MAX_P2P_NCHANNELS.",
    ),
    Setting(
        "NCCL_P2P_LEVEL",
        "p2p",
        "the farthest path between two GPUs over which NCCL uses its P2P transport (LOC, NVL, PIX, PXB, PHB, SYS)",
        "chosen per platform (P2P over NVLink always, over PCIe where the path allows)",
        "a level below the GPUs' path sends their traffic through host memory (SHM)",
        "Unset NCCL_P2P_LEVEL: NCCL uses P2P over NVLink; restrict it only where P2P is broken.",
    ),
    Setting(
        "NCCL_P2P_DISABLE",
        "p2p",
        "1 turns NCCL's P2P transport (direct GPU access over NVLink or PCIe) off",
        "0 (P2P on)",
        "traffic between GPUs goes through host memory (SHM) or the network",
        "Unset NCCL_P2P_DISABLE; if P2P fails, fix its cause (ACS, IOMMU, the fabric manager).",
    ),
    Setting(
        "NCCL_HOSTID",
        "identity",
        "the host identity NCCL tells nodes apart by (instead of the host name)",
        "the host name",
        "ranks of one host given different values are treated as different nodes: they talk over the network",
        "Unset NCCL_HOSTID, or give every rank of a host the same value.",
    ),
    Setting(
        "NCCL_P2P_USE_CUDA_MEMCPY",
        "p2p",
        "1 moves P2P data with copy-engine memcpy driven by NCCL's proxy thread instead of its kernels",
        "0",
        "P2P data then moves by copy-engine memcpy driven from the host: slower, and runs with it have hung",
        "Unset NCCL_P2P_USE_CUDA_MEMCPY.",
    ),
    Setting(
        "NCCL_P2P_NET_CHUNKSIZE",
        "net",
        "the chunk size of point-to-point operations through the network",
        "128 KiB (131072)",
        "a small chunk slows send/recv across nodes",
        "Unset NCCL_P2P_NET_CHUNKSIZE.",
    ),
    Setting(
        "NCCL_SHM_DISABLE",
        "shm",
        "1 turns the shared-memory transport (through host memory) off",
        "0 (SHM on)",
        "ranks of one node that cannot use P2P then talk through the network stack",
        "Unset NCCL_SHM_DISABLE.",
    ),
    Setting(
        "NCCL_NET_GDR_LEVEL",
        "net",
        "the farthest path between a NIC and a GPU over which NCCL uses GPUDirect RDMA",
        "chosen per platform",
        "too low a level stages network traffic through host memory",
        "Unset NCCL_NET_GDR_LEVEL (or set it to the GPU-NIC path, e.g. PXB).",
    ),
    Setting(
        "NCCL_CUMEM_ENABLE",
        "memory",
        "1 makes NCCL allocate with the CUDA cuMem API (and share buffers as cuMem handles)",
        "1 from NCCL 2.19",
        "0 falls back to cudaMalloc and legacy IPC; little effect on bandwidth",
        "Unset NCCL_CUMEM_ENABLE unless a container or driver needs it off.",
    ),
    Setting(
        "NCCL_IB_DISABLE",
        "net",
        "1 turns the InfiniBand / RoCE transport off (NCCL uses IP sockets instead)",
        "0",
        "across nodes, sockets carry a fraction of what the HCAs can",
        "Unset NCCL_IB_DISABLE on hosts with working RDMA NICs.",
    ),
    Setting(
        "NCCL_IB_HCA",
        "net",
        "which RDMA devices (and ports) NCCL may use",
        "every active device",
        "leaving HCAs out lowers the network bandwidth; a wrong name leaves none",
        "List every HCA near the GPUs, or unset NCCL_IB_HCA.",
    ),
    Setting(
        "NCCL_IB_GID_INDEX",
        "net",
        "the GID index NCCL uses on RoCE",
        "chosen by NCCL from the RoCE version and address family",
        "a wrong index makes connections fail or time out on RoCE",
        "Unset NCCL_IB_GID_INDEX, or set the index of a RoCE v2 GID (show_gids).",
    ),
    Setting(
        "NCCL_IB_TIMEOUT",
        "net",
        "the InfiniBand verbs timeout: 4.096 us x 2^value",
        "20 (about 4 s)",
        "too low fails connections on a busy fabric; 0 waits forever, so a lost packet hangs the job",
        "Unset NCCL_IB_TIMEOUT, or keep it within 1-31 (TD609).",
    ),
    Setting(
        "NCCL_IB_QPS_PER_CONNECTION",
        "net",
        "queue pairs per connection between two ranks",
        "1",
        "too few on adaptive-routing fabrics leaves links idle",
        "Unset it unless the fabric's vendor recommends a value.",
    ),
    Setting(
        "NCCL_NCHANNELS_PER_NET_PEER",
        "net",
        "channels per network peer for point-to-point operations",
        "2",
        "too few channels slow all-to-all across nodes",
        "Unset NCCL_NCHANNELS_PER_NET_PEER.",
    ),
    Setting(
        "NCCL_LAUNCH_MODE",
        "launch",
        "PARALLEL launches one kernel per rank at once, GROUP one after another from a thread",
        "PARALLEL",
        "GROUP serialises launches: small messages pay for it",
        "Unset NCCL_LAUNCH_MODE.",
    ),
    Setting(
        "CUDA_LAUNCH_BLOCKING",
        "launch",
        "1 makes every CUDA kernel launch wait for the kernel to finish (CUDA's debugging switch)",
        "0",
        "the job's kernels and NCCL's no longer overlap; small messages pay the wait",
        "Unset CUDA_LAUNCH_BLOCKING outside debugging.",
    ),
    Setting(
        "NCCL_NVLS_ENABLE",
        "multicast",
        "NVLink SHARP: the NVSwitches reduce and multicast data (0 off, 1 on, 2 where supported)",
        "2 (on where the GPUs and switches support multicast)",
        "off, all_reduce on 4 or more NVSwitch-connected GPUs gives up the switch's reduction",
        "Leave NCCL_NVLS_ENABLE unset unless multicast must stay off on the host.",
    ),
    Setting(
        "NCCL_SOCKET_IFNAME",
        "interface",
        "the network interfaces NCCL's sockets (bootstrap, and the socket transport) may use: a prefix list, "
        "^ excludes, = matches exactly",
        "ib* interfaces first, then one in NCCL_COMM_ID's subnet, then any but docker*, lo and virbr*; docker* "
        "and lo last (src/misc/socket.cc)",
        "an interface not routed between the nodes hangs or fails bootstrap; a slow one carries the socket "
        "transport's traffic",
        "Set NCCL_SOCKET_IFNAME to the interface the nodes reach each other on (=eth0 for exactly eth0), or unset it.",
    ),
)
BY_NAME = {s.name: s for s in SETTINGS}
